"""Schemathesis fuzzes every Query and Mutation field of the real app, on moto; Hypothesis fuzzes
the request's envelope around them (`test_fuzz_the_envelope`).

Each answer must be one the schema allows: no 5xx; every error raised while executing carries a
refusal's or domain error's `extensions.code` (a masked INTERNAL counts as a failure: the service
broke on that input); every error before execution is GraphQL's own (no code) or a query limit's;
no error shows a traceback, a module path or the table name; `data` has exactly the shape the
query asked for. Payments with fixed ids are seeded and schemathesis's dictionaries put their ids
into most arguments, so mutations reach the transition engine and the writes, not only validation.

The envelope: every field of the body (`query`, `operationName`, `variables`, `extensions`) as
every JSON type, bodies that are not JSON or not objects, nested past any parser's depth or past
the body limit, under every content type and `Accept`, over POST, GET and other methods. Every
answer must be one the GraphQL-over-HTTP specification allows (`server.graphql_over_http`): no
5xx, a GraphQL response in JSON in the negotiated media type, a status of 200, 400, 405 (with
`Allow`) or 413, and no `data` entry on a 4xx.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import graphql
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import Case, Response
from schemathesis.checks import response_schema_conformance
from schemathesis.config import SchemathesisConfig
from schemathesis.python import asgi
from schemathesis.specs.graphql.schemas import GraphQLSchema
from starlette.applications import Starlette

from datasource import DynamoConfig, Item, PaymentStore, event_item, to_item
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.history import event_of
from domain.payment import LoanRef, PaymentRef, new_payment
from domain.transitions import TransitionRequest, apply_transition
from process.settings import Settings
from resolvers.node_ids import loan_node_id, payment_node_id
from schema import build_schema
from server.app import create_app
from server.graphql_over_http import GRAPHQL_RESPONSE, JSON
from tests.api.conftest import ALICE, SERVICE, Clock, api_client, error_codes
from tests.datasource.stored_items import put_items
from tests.hypothesis_profiles import examples
from tests.payment_samples import TEST_ACTOR

USER, LOAN = "alice", "loan-1"  # ALICE's token is user "alice"
# (payment id, method, moves from PENDING): a payment in each status a mutation can start from.
SEEDED: list[tuple[str, PaymentMethod, list[TransitionRequest]]] = [
    ("0196c000-0000-7000-8000-000000000001", PaymentMethod.ACH, []),
    (
        "0196c000-0000-7000-8000-000000000002",
        PaymentMethod.ACH,
        [TransitionRequest(PaymentStatus.ACHSENT, "seed", confirmation_id="ach-1")],
    ),
    (
        "0196c000-0000-7000-8000-000000000003",
        PaymentMethod.ACH,
        [
            TransitionRequest(PaymentStatus.ACHSENT, "seed", confirmation_id="ach-2"),
            TransitionRequest(PaymentStatus.RETRY, "seed", return_code="R01"),
        ],
    ),
    (
        "0196c000-0000-7000-8000-000000000004",
        PaymentMethod.ACH,
        [
            TransitionRequest(PaymentStatus.ACHSENT, "seed", confirmation_id="ach-3"),
            TransitionRequest(PaymentStatus.COMPLETED, "seed"),
        ],
    ),
    ("0196c000-0000-7000-8000-000000000005", PaymentMethod.PINLESS, []),
    (
        "0196c000-0000-7000-8000-000000000006",
        PaymentMethod.PINLESS,
        [TransitionRequest(PaymentStatus.COMPLETED, "seed", confirmation_id="card-1")],
    ),
]
PAYMENT_IDS = [payment_id for payment_id, _, _ in SEEDED]
NODE_IDS = [payment_node_id(PaymentRef(USER, LOAN, p)) for p in PAYMENT_IDS[:3]] + [
    loan_node_id(LoanRef(USER, LOAN))
]

DICTIONARIES = {
    "users": [USER],
    "loans": [LOAN],
    "payments": PAYMENT_IDS,
    "nodes": NODE_IDS,
    "confirmations": ["ach-1", "ach-2", "card-1", "conf-new"],
    "return_codes": ["R01", "R02", "R05", "R09", "R10"],
    "installments": ["inst-1"],
    "cents": [5000, 2500],
    "reasons": ["settled", "declined by the bank"],
    "page_sizes": [1, 2, 10],
}
BINDINGS = {
    "Query.*.userId": "users",
    "Query.*.loanId": "loans",
    "Query.*.paymentId": "payments",
    "Query.node.id": "nodes",
    "Query.nodes.ids[*]": "nodes",
    "Query.paymentByConfirmation.confirmationId": "confirmations",
    "*.*.first": "page_sizes",
    "Mutation.*.input.userId": "users",
    "Mutation.*.input.loanId": "loans",
    "Mutation.*.input.paymentId": "payments",
    "Mutation.*.input.confirmationId": "confirmations",
    "Mutation.*.input.returnCode": "return_codes",
    "Mutation.*.input.reason": "reasons",
    "Mutation.*.input.intendedInstallmentId": "installments",
    "Mutation.completePayment.input.applications[*].installmentId": "installments",
    "Mutation.completePayment.input.applications[*].amountCents": "cents",
    "Mutation.createPayment.input.amountCents": "cents",
}
# Often enough that most mutations name a seeded payment, rarely enough that random ids stay.
PROBABILITY = 0.8


def fuzzed(mode: str) -> GraphQLSchema:
    """The served schema, generating `positive` (valid) queries or `all` (invalid ones too)."""
    config = {
        "base-url": "http://testserver/graphql",
        "generation": {"mode": mode},
        "dictionaries": {name: {"values": values} for name, values in DICTIONARIES.items()},
        "parameters": {
            key: {"dictionary": name, "probability": PROBABILITY} for key, name in BINDINGS.items()
        },
    }
    return schemathesis.graphql.from_file(
        without_incremental(build_schema().as_str()), config=SchemathesisConfig.from_dict(config)
    )


def without_incremental(sdl: str) -> str:
    """The served SDL without @defer and @stream (SPEC §22): schemathesis introspects it with
    graphql-core's `execute`, which refuses a schema that declares them. Documents that use them
    are drawn by tests/api/test_incremental_property.py."""
    document = graphql.parse(sdl)
    kept = [
        definition
        for definition in document.definitions
        if not (
            isinstance(definition, graphql.DirectiveDefinitionNode)
            and definition.name.value in {"defer", "stream"}
        )
    ]
    return graphql.print_ast(graphql.DocumentNode(definitions=tuple(kept)))


# The service's run is the deep one: valid queries only, so every example reaches the resolvers.
AS_SERVICE = fuzzed("positive")
AS_CUSTOMER = fuzzed("all")
CLIENT_SCHEMA = AS_SERVICE.client_schema

# schemathesis's GraphQL strategies call the `random` module now and then (not our code), which
# Hypothesis reports as a deprecation: with warnings as errors that failed a run at random.
pytestmark = [
    pytest.mark.slow,  # schemathesis's and hypothesis's runs over every field
    pytest.mark.filterwarnings(
        "ignore:Do not use the `random` module inside strategies"
        ":hypothesis.errors.HypothesisDeprecationWarning"
    ),
]
FUZZ_SETTINGS = settings(
    deadline=None,
    derandomize=True,  # the same examples on every run, so CI is reproducible
    database=None,
    phases=[Phase.generate],  # no shrinking: a failure is reported as found
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# The codes of refusals and domain errors during execution; INTERNAL (masked) is not among them:
# the service failing on an input is what the fuzzing looks for.
CODES = {"UNAUTHENTICATED", "FORBIDDEN", "INVALID_INPUT", "NOT_FOUND", "UNAVAILABLE"}
# A query limit refuses the whole operation before execution (engine.limits).
QUERY_LIMIT = re.compile(r"QUERY_[A-Z_]+")
# What a leaked traceback, module path, AWS error or table name would show.
LEAKS = re.compile(
    r"Traceback|File \"|site-packages|\.py\b|botocore|ClientError|arn:aws|loc-service"
)
DATETIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


async def seed(store: PaymentStore, clock: Clock) -> None:
    """The seeded payments and their histories, written as plain puts: not through the store's
    conditional transactions, which moto does not make idempotent (it ignores
    `ClientRequestToken`), so a request botocore retried after a dropped connection would be
    refused as a conflict with itself."""
    items: list[Item] = []
    for payment_id, method, moves in SEEDED:
        payment = dataclasses.replace(
            new_payment(
                user_id=USER,
                loan_id=LOAN,
                amount_cents=5000,
                method=method,
                process=PaymentProcess.AUTO,
                reason="seed",
                now=clock(),
                account_last_four="6789",
                intended_installment_id="inst-1",
            ),
            payment_id=payment_id,
        )
        items.append(event_item(event_of(None, payment, TEST_ACTOR)))
        for move in moves:
            moved = apply_transition(payment, move, max_attempts=3, now=clock())
            items.append(event_item(event_of(payment, moved, TEST_ACTOR)))
            payment = moved
        items.append(to_item(payment))
    await put_items(store, items)


@pytest.fixture
async def seeded_config(moto_config: DynamoConfig, moto_store: PaymentStore) -> DynamoConfig:
    await seed(moto_store, Clock())
    return moto_config


@pytest.fixture
def served(seeded_config: DynamoConfig) -> Iterator[Served]:
    """The app on the seeded table. Schemathesis's client runs the app's lifespan on an event
    loop of its own (one thread for every app) and its pytest plugin ends it with the test."""
    app_settings = Settings(
        table_name=seeded_config.table_name, dynamodb_endpoint=seeded_config.endpoint_url
    )
    app = create_app(app_settings, clock=Clock())
    # schemathesis types an ASGI scope as a dict, Starlette as a MutableMapping: the same app.
    with asgi.get_client(app) as client:  # type: ignore[arg-type]
        yield Served(app, client, seeded_config.table_name)


@dataclasses.dataclass(frozen=True)
class Served:
    app: Starlette
    client: asgi.ASGIClient
    table_name: str

    def check(self, case: Case[Any], *, token: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        response = case.call(app=self.app, session=self.client, headers=headers)
        assert self.table_name not in response.text, response.text
        assert_schema_conforming_answer(case, response)


@AS_SERVICE.parametrize()
@settings(FUZZ_SETTINGS, max_examples=examples(25))
def test_fuzz_as_service(case: Case[Any], served: Served) -> None:
    served.check(case, token=SERVICE)


@AS_CUSTOMER.parametrize()
@settings(FUZZ_SETTINGS, max_examples=examples(10))
def test_fuzz_as_customer(case: Case[Any], served: Served) -> None:
    served.check(case, token=ALICE)


# -- The envelope --------------------------------------------------------------------------------

QUERIES = [
    "{ __typename }",
    "query Q($id: ID!) { node(id: $id) { id } }",
    "query S($s: PaymentStatus!, $first: Int, $last: Int, $before: String) {"
    " paymentsByStatus(status: $s, first: $first, last: $last, before: $before)"
    " { edges { cursor } pageInfo { hasPreviousPage startCursor } } }",
    "mutation M($input: CreatePaymentInput!) { createPayment(input: $input) { __typename } }",
    "subscription { paymentEvents { version } }",
    "query A { __typename } query B { __typename }",
    "{",
    "{ noSuchField }",
    "{ }",
    "",
]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
VARIABLES = st.dictionaries(
    st.sampled_from(["id", "s", "first", "last", "before", "input", "x"]),
    JSON_VALUES | st.sampled_from([NODE_IDS[0], "RETRY", 2, {"loanId": LOAN, "amountCents": 1}]),
)
FIELDS = {
    "query": st.sampled_from(QUERIES) | JSON_VALUES,
    "operationName": st.sampled_from(["Q", "S", "M", "A", "Other", ""]) | JSON_VALUES,
    "variables": VARIABLES | JSON_VALUES,
    "extensions": st.dictionaries(st.text(max_size=8), JSON_VALUES) | JSON_VALUES,
}
ENVELOPES = st.fixed_dictionaries({}, optional=FIELDS)


def _encoded(value: object) -> bytes:
    # The standard library's encoder: integers of any size, infinities as `Infinity` (not JSON).
    return json.dumps(value).encode()


# What a parser or the body limit cannot take: nesting past orjson's depth, sizes past 64 KiB.
EXTREMES = st.sampled_from(
    [
        b"[" * 5000 + b"]" * 5000,
        b'{"query": "{ __typename }", "variables": ' + b'{"a": ' * 2000 + b"1" + b"}" * 2001,
        b'{"query": "' + b"{ __typename " * 6000 + b'}"}',
        b'{"query": "{ __typename }", "extensions": {"x": "' + b"x" * 70_000 + b'"}}',
        b'{"query": "{ __typename }", "variables": {"x": ' + b"[" * 500 + b"]" * 500 + b"}}",
    ]
)
BODIES = (
    ENVELOPES.map(_encoded)
    | JSON_VALUES.map(_encoded)
    | st.binary(max_size=64)
    | st.text(max_size=64).map(str.encode)
    | EXTREMES
)
CONTENT_TYPES = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "APPLICATION/JSON",
        "application/graphql-response+json",
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/graphql",
        "",
        None,
    ]
)
ACCEPTS = st.sampled_from(
    [
        None,
        JSON,
        GRAPHQL_RESPONSE,
        "*/*",
        "text/html",
        f"{GRAPHQL_RESPONSE}, {JSON};q=0.9",
        "x/y;q=",
    ]
)


@st.composite
def requests_to_send(draw: st.DrawFn) -> dict[str, Any]:
    headers = {"Accept": draw(ACCEPTS), "Content-Type": None}
    if draw(st.booleans()):
        headers["Authorization"] = f"Bearer {SERVICE}"
    method = draw(st.sampled_from(["POST", "POST", "POST", "GET", "PUT"]))
    if method == "GET":
        fields = draw(ENVELOPES)
        params = {
            name: value if isinstance(value, str) else json.dumps(value)
            for name, value in fields.items()
        }
        return {"method": "GET", "params": params, "headers": headers}
    headers["Content-Type"] = draw(CONTENT_TYPES)
    return {"method": method, "data": draw(BODIES), "headers": headers}


@given(request=requests_to_send())
@settings(FUZZ_SETTINGS, max_examples=examples(100))
def test_fuzz_the_envelope(request: dict[str, Any], served: Served) -> None:
    response = served.client.request(url="/graphql", **request)
    assert_graphql_over_http_answer(request, response)


def assert_graphql_over_http_answer(request: dict[str, Any], response: requests.Response) -> None:
    status = response.status_code
    assert status in (200, 400, 405, 413), (request, status, response.text)
    accept = str(request["headers"]["Accept"])
    browser = "html" in accept or "*/*" in accept
    if request["method"] == "GET" and "query" not in request["params"] and browser:
        assert response.headers["content-type"].startswith("text/html")  # GraphiQL's page
        return
    wanted = GRAPHQL_RESPONSE if accept.startswith(GRAPHQL_RESPONSE) else JSON
    assert response.headers["content-type"] == wanted, (request, response.headers)
    body = response.json()
    assert isinstance(body, dict) and set(body) <= {"data", "errors", "extensions"}, body
    assert "data" in body or body.get("errors"), body
    assert response.text and served_table_hidden(response.text), response.text
    if status == 405:
        assert response.headers["allow"] in ("POST", "GET, POST"), response.headers
    if status != 200:
        assert "data" not in body and body["errors"], body
    elif wanted == GRAPHQL_RESPONSE:
        # Under the new media type, a response without `data` is never a 2xx.
        assert "data" in body, body
    for error in body.get("errors", []):
        assert isinstance(error.get("message"), str), error
        assert not LEAKS.search(unsent(str(error), str(request))), error


def unsent(text: str, sent: str) -> str:
    """`text` without the string literals the request itself sent, which a refusal may quote:
    Hypothesis draws strings from the constants of the code it runs (a table's name among them),
    and a value sent back is not a leak."""
    return re.sub(r'"([^"\\]+)"', lambda quoted: "" if quoted[1] in sent else quoted[0], text)


def served_table_hidden(text: str) -> bool:
    return "test-" not in text


def assert_schema_conforming_answer(case: Case[Any], response: Response) -> None:
    assert response.status_code < 500, response.text
    case.validate_response(response, checks=[response_schema_conformance])
    body = response.json()
    assert set(body) <= {"data", "errors", "extensions"}, body
    errors = body.get("errors") or []
    for error in errors:
        assert not LEAKS.search(unsent(str(error), str(case.body))), error
        code = (error.get("extensions") or {}).get("code")
        if "path" in error:
            assert code in CODES, error
        else:
            # Refused before execution: GraphQL's own parse and validation errors carry no code,
            # a query limit its own.
            assert code is None or QUERY_LIMIT.fullmatch(code), error
            assert body.get("data") is None, body
    assert isinstance(case.body, str), case.body
    problems = shape_problems(case.body, body.get("data"), [e.get("path") or [] for e in errors])
    assert not problems, (problems, body)


def shape_problems(query: str, data: Any, error_paths: list[list[str | int]]) -> list[str]:
    """Where `data` differs from what the schema says `query` returns; [] when it conforms.

    A null in a non-null position is allowed only where an error was reported at or below it.
    """
    document = graphql.parse(query)
    if data is None:
        return [] if error_paths else ["neither data nor errors"]
    operation = next(
        d for d in document.definitions if isinstance(d, graphql.OperationDefinitionNode)
    )
    root = CLIENT_SCHEMA.get_root_type(operation.operation)
    assert root is not None
    fragments = {
        d.name.value: d
        for d in document.definitions
        if isinstance(d, graphql.FragmentDefinitionNode)
    }
    walker = _ShapeWalker(fragments, error_paths)
    walker.value(data, graphql.GraphQLNonNull(root), [operation.selection_set], [])
    return walker.problems


@dataclasses.dataclass
class _ShapeWalker:
    fragments: dict[str, graphql.FragmentDefinitionNode]
    error_paths: list[list[str | int]]
    problems: list[str] = dataclasses.field(default_factory=list)

    def value(
        self,
        value: Any,
        type_: graphql.GraphQLOutputType,
        selections: list[graphql.SelectionSetNode],
        path: list[str | int],
    ) -> None:
        if isinstance(type_, graphql.GraphQLNonNull):
            if value is None:
                if not any(p[: len(path)] == path for p in self.error_paths):
                    self.problems.append(f"{path}: null in a non-null {type_} with no error")
                return
            type_ = type_.of_type
        if value is None:
            return
        if isinstance(type_, graphql.GraphQLList):
            if not isinstance(value, list):
                self.problems.append(f"{path}: {value!r} is not a list")
                return
            for index, item in enumerate(value):
                self.value(item, type_.of_type, selections, [*path, index])
        elif isinstance(type_, graphql.GraphQLScalarType):
            if not _scalar_fits(type_.name, value):
                self.problems.append(f"{path}: {value!r} is not a {type_.name}")
        elif isinstance(type_, graphql.GraphQLEnumType):
            if value not in type_.values:
                self.problems.append(f"{path}: {value!r} is not a {type_.name}")
        elif isinstance(type_, graphql.GraphQLObjectType):
            self.object(value, type_, selections, path)
        else:  # an interface or union: the value must fit one of its object types
            assert isinstance(type_, graphql.GraphQLInterfaceType | graphql.GraphQLUnionType)
            candidates = CLIENT_SCHEMA.get_possible_types(type_)
            for candidate in candidates:
                trial = _ShapeWalker(self.fragments, self.error_paths)
                trial.object(value, candidate, selections, path)
                if not trial.problems:
                    return
            self.problems.append(f"{path}: {value!r} fits no type of {type_.name}")

    def object(
        self,
        value: Any,
        type_: graphql.GraphQLObjectType,
        selections: list[graphql.SelectionSetNode],
        path: list[str | int],
    ) -> None:
        if not isinstance(value, dict):
            self.problems.append(f"{path}: {value!r} is not a {type_.name} object")
            return
        fields: dict[str, list[graphql.FieldNode]] = {}
        for selection_set in selections:
            self.collect(selection_set, type_, fields)
        if set(value) != set(fields):
            self.problems.append(f"{path}: keys {sorted(value)} for {sorted(fields)}")
            return
        for key, nodes in fields.items():
            name = nodes[0].name.value
            if name == "__typename":
                if value[key] != type_.name:
                    self.problems.append(f"{path}: __typename {value[key]!r} for {type_.name}")
                continue
            subselections = [n.selection_set for n in nodes if n.selection_set is not None]
            self.value(value[key], type_.fields[name].type, subselections, [*path, key])

    def collect(
        self,
        selection_set: graphql.SelectionSetNode,
        type_: graphql.GraphQLObjectType,
        fields: dict[str, list[graphql.FieldNode]],
    ) -> None:
        for selection in selection_set.selections:
            if isinstance(selection, graphql.FieldNode):
                key = selection.alias.value if selection.alias else selection.name.value
                fields.setdefault(key, []).append(selection)
                continue
            condition: graphql.NamedTypeNode | None
            if isinstance(selection, graphql.FragmentSpreadNode):
                fragment = self.fragments[selection.name.value]
                condition, nested = fragment.type_condition, fragment.selection_set
            else:
                assert isinstance(selection, graphql.InlineFragmentNode)
                condition, nested = selection.type_condition, selection.selection_set
            if condition is None or _applies(condition.name.value, type_):
                self.collect(nested, type_, fields)


def _applies(condition: str, type_: graphql.GraphQLObjectType) -> bool:
    named = CLIENT_SCHEMA.get_type(condition)
    if named is None or isinstance(named, graphql.GraphQLObjectType):
        return named is type_
    assert isinstance(named, graphql.GraphQLInterfaceType | graphql.GraphQLUnionType)
    return CLIENT_SCHEMA.is_sub_type(named, type_)


def _scalar_fits(name: str, value: Any) -> bool:
    match name:
        case "Int":
            return type(value) is int and -(2**31) <= value < 2**31
        case "Float":
            return type(value) in (int, float)
        case "String" | "ID":
            return isinstance(value, str)
        case "Boolean":
            return isinstance(value, bool)
        case "DateTime":
            return isinstance(value, str) and DATETIME.fullmatch(value) is not None
    return True


def test_the_shape_check_finds_what_the_schema_forbids() -> None:
    query = "{ paymentsByStatus(status: RETRY) { edges { node { status amountCents } } } }"
    node = {"status": "RETRY", "amountCents": 5000}
    wrapped = {"paymentsByStatus": {"edges": [{"node": node}]}}
    assert shape_problems(query, wrapped, []) == []
    for bad in (
        {"status": "LOST", "amountCents": 5000},
        {"status": "RETRY", "amountCents": 2**31},
        {"status": "RETRY", "amountCents": None},
        {"status": "RETRY"},
        {"status": "RETRY", "amountCents": 5000, "extra": 1},
    ):
        assert shape_problems(query, {"paymentsByStatus": {"edges": [{"node": bad}]}}, [])
    errored = {"paymentsByStatus": {"edges": [{"node": {"status": "RETRY", "amountCents": None}}]}}
    assert (
        shape_problems(query, errored, [["paymentsByStatus", "edges", 0, "node", "amountCents"]])
        == []
    )
    created = (
        'mutation { createPayment(input: {loanId: "l", amountCents: 1, method: ACH}) '
        "{ ... on PaymentPayload { payment { createdAt } } ... on UserError { code } } }"
    )
    assert shape_problems(created, {"createPayment": {"code": "NOT_FOUND"}}, []) == []
    assert shape_problems(created, {"createPayment": {"code": "LOST"}}, [])
    now = datetime(2026, 3, 2, tzinfo=UTC).isoformat()
    assert shape_problems(created, {"createPayment": {"payment": {"createdAt": now}}}, [])


async def test_a_refused_node_id_leaves_no_read_running(moto_config: DynamoConfig) -> None:
    """Found by the fuzzing: `nodes` once gathered its lookups without cancelling them, so a
    refused id left the others' BatchGetItem running after the answer, and after shutdown on a
    closed client (an unclosed aiohttp session)."""
    async with api_client(moto_config) as api:
        running = asyncio.all_tasks()
        body = await api.post(
            "query($ids: [ID!]!) { nodes(ids: $ids) { id } }",
            {"ids": [*NODE_IDS[:2], "not-a-node-id"]},
        )
        left_over = asyncio.all_tasks() - running
        await asyncio.gather(*left_over, return_exceptions=True)
    assert error_codes(body) == ["INVALID_INPUT"]
    assert not left_over
