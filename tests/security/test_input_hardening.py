"""Input hardening (issue 5, item 4): every value a caller types is checked before it is used.

The inputs come from the schema: every argument and input field of every field that takes one,
each classified by its name (`KINDS`); an unclassified `ID`, `String` or `Int` fails the test.
Each bad value of its kind goes into that one input, every other input valid (a transition aims
at a payment whose move would succeed), and the answer must be INVALID_INPUT naming the input, or
a GraphQL error for what GraphQL's own types refuse; either way no DynamoDB write, no 5xx.

Account numbers: no response, log line or stored item may hold more than the last four digits
of one. The rule proposed to enforce it: a value of any string input that holds a number of 13-19
digits passing the Luhn check (contiguous, or grouped as cards are printed, by spaces or hyphens)
is INVALID_INPUT naming the input, checked with the ids, before anything is read or written; and
GraphQL's own messages never repeat such a number. A free-text reason, a confirmation id, an
installment id or an idempotency key is otherwise a legal place to type "4111111111111111", and
an idempotency key is stored as its unkeyed SHA-256, which for a card number's small space is
reversible.
"""

from __future__ import annotations

import base64
import contextvars
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from graphql import (
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNamedType,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    get_named_type,
    is_leaf_type,
)

from datasource import DynamoConfig
from schema import build_schema
from tests.api.conftest import SERVICE, Api, api_client, stored_items, token
from tests.backends import Backend

# The subgraph's schema, every field of the public one and federation's `_entities` too, asked
# at its endpoint: the two endpoints share their types and resolvers.
SCHEMA = build_schema(subgraph=True).served

# Every input, by name: the kind of value it takes. An ID, String or Int input missing here fails.
KINDS = {
    "userId": "id",
    "loanId": "id",
    "confirmationId": "id",
    "intendedInstallmentId": "id",
    "installmentId": "id",
    "paymentId": "payment id",
    "id": "node id",
    "ids": "node id",
    "after": "cursor",
    "before": "cursor",
    "reason": "text",
    "idempotencyKey": "idempotency key",
    "returnCode": "return code",
    "accountLastFour": "last four",
    "amountCents": "amount",
    "first": "page size",
    "expectedVersion": "version",
    "last": "page size",
    "url": "url",
    "eventTypes": "event type",
    "types": "event type",
    "description": "text",
    "endpointId": "endpoint id",
    "eventId": "event id",
    "owner": "id",
}
# Federation's `_entities(representations:)` takes JSON (`_Any`) that GraphQL does not look
# into: the keys inside the valid value's representations are its inputs, typed as they are.
REPRESENTATIONS = "representations"
REPRESENTATION_KEYS: tuple[dict[str, str], ...] = ({"id": "ID"}, {"userId": "ID", "loanId": "ID"})
GRAPHQL = "refused by GraphQL's types"
INVALID = "INVALID_INPUT"
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


def node_id(*parts: str) -> str:
    return base64.urlsafe_b64encode("#".join(parts).encode()).decode().rstrip("=")


ID_BAD = ["a#b", "", "   ", "x" * 129, "a\x00b", "a\nb", "a\x7fb", " lead", "trail "]
BAD: dict[str, list[tuple[Any, str]]] = {
    "id": [(value, INVALID) for value in ID_BAD],
    "payment id": [
        *((value, INVALID) for value in ID_BAD),
        ("not-a-uuid", INVALID),
        ("0190F5A4-0000-7000-8000-000000000000", INVALID),
    ],
    "node id": [
        *((value, INVALID) for value in ID_BAD),
        *(
            (node_id("Loan", "alice", part), INVALID)
            for part in ("", "x" * 129, "a\nb", "a\x00b", " lead", "trail ")
        ),
        (node_id("Payment", "alice", "loan-1", "not-a-uuid"), INVALID),
    ],
    "cursor": [(value, INVALID) for value in ("", " ", "a#b", "a\x00b", "not base64!", "x" * 2049)],
    "url": [
        (value, INVALID)
        for value in ("", "not a url", "ftp://x.example.com/", "https:///x", "https://a b/")
    ],
    "event type": [(value, INVALID) for value in ("", "payment.done", "PAYMENT.CREATED")],
    "endpoint id": [(value, INVALID) for value in ("", "a#b", "x" * 100, "not-a-uuid")],
    "event id": [(value, INVALID) for value in ("", "evt_", "evt_!!", "a#b")],
    "text": [(value, INVALID) for value in ("", "   ", "x" * 501, "a\x00b", "a\nb", "a\x7fb")],
    "idempotency key": [
        (value, INVALID) for value in ("", "   ", "x" * 256, "a\x00b", "a\nb", "a\x7fb")
    ],
    "return code": [
        (value, INVALID) for value in ("", "R1", "R001", "r01", "X01", " R01", "R01\n", "R0#")
    ],
    "last four": [
        (value, INVALID)
        for value in ("", "123", "12345", "12a4", "4111111111111111", " 1234", "1234\n")
    ],
    "amount": [
        (0, INVALID),
        (-1, INVALID),
        (-2147483648, INVALID),
        (2147483648, GRAPHQL),
        (12.5, GRAPHQL),
        ("500", GRAPHQL),
        (True, GRAPHQL),
    ],
    "version": [
        (0, INVALID),
        (-1, INVALID),
        (2147483648, GRAPHQL),
        (1.5, GRAPHQL),
        ("1", GRAPHQL),
    ],
    "page size": [
        (0, INVALID),
        (-1, INVALID),
        (101, INVALID),
        (2147483648, GRAPHQL),
        (2.5, GRAPHQL),
    ],
}


# -- The inputs, from the schema ---------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """A field that takes inputs, reached from the root (through `parent` when it is nested)."""

    type_name: str
    field: str
    parent: str | None = None

    @property
    def name(self) -> str:
        return f"{self.type_name}.{self.field}"

    @property
    def definition(self) -> Any:
        return SCHEMA.get_type(self.type_name).fields[self.field]  # type: ignore[union-attr]


@dataclass(frozen=True)
class Leaf:
    """One input: its path from the argument down (list items at index 0) and its type."""

    path: tuple[str | int, ...]
    type_name: str

    @property
    def name(self) -> str:
        return next(part for part in reversed(self.path) if isinstance(part, str))

    @property
    def kind(self) -> str | None:
        if self.type_name not in ("ID", "String", "Int"):
            return None  # an enum or a Boolean: GraphQL's types check it
        assert self.name in KINDS, f"the input {self.path} is not classified: add it to KINDS"
        return KINDS[self.name]

    def field(self, route: Route) -> str:
        """How INVALID_INPUT names it: an input object's argument is left out, items are `[i]`."""
        path = list(self.path)
        argument = route.definition.args[path[0]]
        if isinstance(get_named_type(argument.type), GraphQLInputObjectType):
            path = path[1:]
        text = ""
        for part in path:
            text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else part
        return text

    def names(self, route: Route) -> set[str]:
        """The names INVALID_INPUT may give it: an item of a list argument may go by the list's."""
        if len(self.path) == 2 and isinstance(self.path[1], int):
            return {self.field(route), str(self.path[0])}
        return {self.field(route)}


def routes() -> list[Route]:
    found = []
    for type_name, type_ in SCHEMA.type_map.items():
        if not isinstance(type_, GraphQLObjectType) or type_name.startswith("__"):
            continue
        # Subscriptions run over WebSocket only: tests/api/test_live_updates.py refuses theirs.
        if type_name == "Subscription":
            continue
        for field_name, field in type_.fields.items():
            if not field.args:
                continue
            if type_name in ("Query", "Mutation"):
                found.append(Route(type_name, field_name))
                continue
            parents = [
                name
                for name, parent in SCHEMA.query_type.fields.items()  # type: ignore[union-attr]
                if get_named_type(parent.type).name == type_name
            ]
            assert parents, f"{type_name}.{field_name} takes inputs but no root field returns it"
            found.append(Route(type_name, field_name, parents[0]))
    return sorted(found, key=lambda route: route.name)


def leaves(route: Route) -> list[Leaf]:
    found: list[Leaf] = []

    def walk(path: tuple[str | int, ...], type_: GraphQLInputType) -> None:
        inner = type_.of_type if isinstance(type_, GraphQLNonNull) else type_
        if path == (REPRESENTATIONS,):
            for index, keys in enumerate(REPRESENTATION_KEYS):
                found.extend(Leaf((*path, index, key), kind) for key, kind in keys.items())
        elif isinstance(inner, GraphQLList):
            walk((*path, 0), inner.of_type)
        elif isinstance(inner, GraphQLInputObjectType):
            for name, field in inner.fields.items():
                walk((*path, name), field.type)
        else:
            found.append(Leaf(path, get_named_type(inner).name))

    for name, argument in route.definition.args.items():
        walk((name,), argument.type)
    return found


ROUTES = routes()


# -- Requests ------------------------------------------------------------------------------------


def selection(type_: GraphQLOutputType | GraphQLNamedType, depth: int = 2) -> str:
    """Every readable field `depth` deep, so that whatever is echoed shows."""
    named = get_named_type(type_)
    if is_leaf_type(named):
        return ""
    parts = ["__typename"]
    if not isinstance(named, GraphQLObjectType):
        for possible in SCHEMA.get_possible_types(named):  # type: ignore[arg-type]
            parts.append(f"... on {possible.name} {{ {selection(possible, depth)} }}")
        return " ".join(parts)
    for name, field in named.fields.items():
        if any(isinstance(argument.type, GraphQLNonNull) for argument in field.args.values()):
            continue
        if is_leaf_type(get_named_type(field.type)):
            parts.append(name)
        elif depth > 0 and (inner := selection(field.type, depth - 1)) != "__typename":
            parts.append(f"{name} {{ {inner} }}")
    return " ".join(parts)


def document(route: Route) -> str:
    """The operation, its variables named after the arguments (`p_` for the parent's)."""
    declared = [f"${name}: {arg.type}" for name, arg in route.definition.args.items()]
    given = ", ".join(f"{name}: ${name}" for name in route.definition.args)
    body = f"{route.field}({given}) {{ {selection(route.definition.type)} }}"
    if route.parent is not None:
        parent = SCHEMA.query_type.fields[route.parent]  # type: ignore[union-attr]
        declared += [f"$p_{name}: {arg.type}" for name, arg in parent.args.items()]
        outer = ", ".join(f"{name}: $p_{name}" for name in parent.args)
        body = f"{route.parent}{f'({outer})' if outer else ''} {{ {body} }}"
    operation = "mutation" if route.type_name == "Mutation" else "query"
    return f"{operation}({', '.join(declared)}) {{ {body} }}"


def base_variables(route: Route, valid: dict[str, Any]) -> dict[str, Any]:
    """A valid value for every input this test varies; optional enums are left out."""

    def value(name: str, type_: GraphQLInputType) -> Any:
        required = isinstance(type_, GraphQLNonNull)
        inner = type_.of_type if isinstance(type_, GraphQLNonNull) else type_
        if name == REPRESENTATIONS:
            return valid[name]
        if isinstance(inner, GraphQLList):
            item = value(name, inner.of_type)
            return None if item is None else [item]
        if isinstance(inner, GraphQLInputObjectType):
            fields = {n: value(n, field.type) for n, field in inner.fields.items()}
            return {n: v for n, v in fields.items() if v is not None}
        if isinstance(inner, GraphQLEnumType):
            return (valid.get(name) or next(iter(inner.values))) if required else None
        assert name in valid or not required, f"no valid value for the input {name}"
        return valid.get(name)

    variables = {name: value(name, arg.type) for name, arg in route.definition.args.items()}
    if route.parent is not None:
        parent = SCHEMA.query_type.fields[route.parent]  # type: ignore[union-attr]
        variables |= {f"p_{name}": value(name, arg.type) for name, arg in parent.args.items()}
    return variables


def replaced(variables: dict[str, Any], path: tuple[str | int, ...], new: Any) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(variables))
    holder: Any = copy
    for part in path[:-1]:
        holder = holder[part]
    holder[path[-1]] = new
    return copy


def written(body: dict[str, Any]) -> set[str]:
    operations = body.get("extensions", {}).get("dynamodb", {}).get("operations", {})
    return set(operations) & WRITES


def outcome(route: Route, body: dict[str, Any]) -> tuple[str | None, str | None]:
    """(code, field) of the answer: INVALID_INPUT and the field, GRAPHQL, or what else came."""
    data = body.get("data")
    errors = body.get("errors", [])
    if data is None and errors and all("path" not in error for error in errors):
        return GRAPHQL, None
    if errors:
        extensions = errors[0].get("extensions", {})
        return extensions.get("code"), extensions.get("field")
    assert data is not None, body
    answer = data[route.parent or route.field]
    if isinstance(answer, dict) and "code" in answer:
        return answer["code"], answer.get("field")
    return "an answer", None


# -- The data every route aims at --------------------------------------------------------------

# The state a transition's payment must be in for its move to succeed: method, moves before.
STATES: dict[str, tuple[str, list[tuple[str, dict[str, Any]]]]] = {
    "submitPayment": ("ACH", []),
    "completePayment": ("PINLESS", []),
    "schedulePaymentRetry": ("ACH", [("submitPayment", {"confirmationId": "conf-0"})]),
    "failPayment": ("PINLESS", []),
    "returnPayment": ("ACH", [("submitPayment", {"confirmationId": "conf-0"})]),
    "chargeBackPayment": ("PINLESS", [("completePayment", {"confirmationId": "conf-0"})]),
    "skipPayment": ("ACH", []),
}


@dataclass
class Setup:
    api: Api
    config: DynamoConfig
    payment: dict[str, Any]
    loan_cursor: str
    status_cursor: str
    history_cursor: str  # of `payment`'s history
    endpoint_id: str  # a webhook endpoint
    event_id: str  # `payment`'s creation

    async def valid(self, route: Route) -> dict[str, Any]:
        """Valid values by input name; a transition gets a fresh payment its move suits."""
        payment = self.payment
        endpoint_id = self.endpoint_id
        if route.field in WEBHOOK_MUTATIONS:
            # Each its own endpoint, as a delete forgets the one it names and an owner given
            # takes it from the service the other routes call as.
            endpoint_id = await new_endpoint(self.api)
        elif route.type_name == "Mutation" and route.field in STATES:
            method, moves = STATES[route.field]
            payment = await self.api.create(user="alice", loan="loan-1", method=method)
            for mutation, extra in moves:
                # A confirmation id names one payment of a user: each payment gets its own.
                own = {k: f"{v}-{uuid.uuid4().hex[:8]}" for k, v in extra.items()}
                payment = (await self.api.move(mutation, payment, **own))["payment"]
        return {
            "userId": "alice",
            "loanId": "loan-1",
            "paymentId": payment["paymentId"],
            "confirmationId": f"conf-{uuid.uuid4().hex[:8]}",
            "intendedInstallmentId": "inst-1",
            "installmentId": "inst-1",
            "id": payment["id"],
            "ids": payment["id"],
            "representations": [
                {"__typename": "Payment", "id": payment["id"]},
                {"__typename": "Loan", "userId": "alice", "loanId": "loan-1"},
            ],
            "after": self.cursors.get(route.field, self.loan_cursor),
            "status": "PENDING",
            "first": 5,
            "reason": "hardening",
            # A UUID in its hyphenated form: 32 hex digits in a row can hold a run of 13 or more
            # decimal digits that passes the Luhn check, which the service refuses as a card number.
            "idempotencyKey": f"key-{uuid.uuid4()}",
            "returnCode": "R01",
            "accountLastFour": "6789",
            "amountCents": payment["amountCents"],
            "method": "ACH",
            "url": "https://ledger.example.com/hooks",
            "eventTypes": "payment.completed",
            "types": "payment.completed",
            "description": "the ledger",
            "endpointId": endpoint_id,
            "eventId": self.event_id,
            "owner": "ledger",
        }

    @property
    def cursors(self) -> dict[str, str | None]:
        """A valid cursor for each paginated field but a loan's payments."""
        return {
            "paymentsByStatus": self.status_cursor,
            "history": self.history_cursor,
            # No attempt is made (no dispatcher here), and no event is settled by the tests'
            # clock: these lists are read from their start.
            "deliveries": None,
            "events": None,
        }


async def prepare(api: Api, config: DynamoConfig) -> Setup:
    payment = await api.create(user="alice", loan="loan-1")
    await api.create(user="alice", loan="loan-1")
    loan = await api.data(
        'query { loan(userId: "alice", loanId: "loan-1") { payments(first: 5) {'
        " edges { cursor } } } }"
    )
    by_status = await api.data(
        "query { paymentsByStatus(status: PENDING, first: 5) { edges { cursor } } }"
    )
    history = await api.data(
        'query($p: ID!) { payment(userId: "alice", loanId: "loan-1", paymentId: $p) {'
        " history(first: 1) { edges { cursor } } } }",
        {"p": payment["paymentId"]},
    )
    event = await api.data(
        'query($p: ID!) { payment(userId: "alice", loanId: "loan-1", paymentId: $p) {'
        " history(first: 1) { edges { node { eventId } } } } }",
        {"p": payment["paymentId"]},
    )
    return Setup(
        api,
        config,
        payment,
        loan_cursor=loan["loan"]["payments"]["edges"][0]["cursor"],
        status_cursor=by_status["paymentsByStatus"]["edges"][0]["cursor"],
        history_cursor=history["payment"]["history"]["edges"][0]["cursor"],
        endpoint_id=await new_endpoint(api),
        event_id=event["payment"]["history"]["edges"][0]["node"]["eventId"],
    )


WEBHOOK_MUTATIONS = {
    "deleteWebhookEndpoint",
    "rotateWebhookSecret",
    "resendWebhookEvent",
    "assignWebhookEndpointOwner",
}
# Giving an endpoint an owner is an operator's (a service that holds the operators' scope too);
# every other route is called by a plain service.
OPERATOR = token("hardening-ops", scope="payments:service payments:webhooks-admin")


def caller(route: Route) -> str:
    return OPERATOR if route.field == "assignWebhookEndpointOwner" else SERVICE


async def new_endpoint(api: Api) -> str:
    created = await api.data(
        'mutation { createWebhookEndpoint(input: {url: "https://ledger.example.com/hooks"}) {'
        " ... on WebhookEndpointPayload { endpoint { endpointId } } } }"
    )
    endpoint_id: str = created["createWebhookEndpoint"]["endpoint"]["endpointId"]
    return endpoint_id


@pytest.fixture(scope="module")
async def setup(moto_backend: Backend) -> AsyncIterator[Setup]:
    config = moto_backend.config(f"test-hardening-{uuid.uuid4().hex}")
    # Each route's document selects every field of every list: WebhookEndpoint.deliveries' page
    # of 100, under the 10 endpoints webhookEndpoints may hold, costs 21,011; a `first` over 100
    # is to be refused by name, not for the cost it is counted at (the page's largest).
    async with api_client(config, max_query_cost=30_000, budget_customer_burst=30_000) as public:
        api = public.at("/subgraph")
        yield await prepare(api, config)
    await moto_backend.client.delete_table(TableName=config.table_name)


@pytest.mark.parametrize("route", ROUTES, ids=[route.name for route in ROUTES])
async def test_a_bad_value_in_any_input_is_refused_by_name(setup: Setup, route: Route) -> None:
    api = setup.api
    query = document(route)
    base = base_variables(route, await setup.valid(route))
    before = stored_items(setup.config)
    failures = []
    tried = 0
    for leaf in leaves(route):
        kind = leaf.kind
        if kind is None:
            continue
        expected_field = leaf.field(route)
        for value, expected in BAD[kind]:
            body = await api.post(
                query, replaced(base, leaf.path, value), as_=caller(route), debug=True
            )
            tried += 1
            code, field = outcome(route, body)
            refused = code == GRAPHQL if expected == GRAPHQL else field in leaf.names(route)
            if not refused or code != expected:
                wanted = expected if expected == GRAPHQL else f"{expected} naming {expected_field}"
                failures.append(f"{expected_field} = {value!r}: wanted {wanted}, got {body}")
            if writes := written(body):
                failures.append(f"{expected_field} = {value!r} wrote ({writes}): {body}")
    assert tried, f"{route.name} has no input this test varies"
    assert not failures, "\n".join(failures)
    assert stored_items(setup.config) == before
    # The control: with every input valid, the same request goes through, and its DynamoDB
    # calls show (a mutation's write among them), so the check for writes above can see one.
    control = await api.post(query, base, as_=caller(route), debug=True)
    assert outcome(route, control) == ("an answer", None), control
    assert "dynamodb" in control["extensions"]
    assert bool(written(control)) == (route.type_name == "Mutation")


# -- Account numbers ---------------------------------------------------------------------------


def luhn_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        digit = int(char) * (2 if position % 2 else 1)
        total += digit - 9 if digit > 9 else digit
    return total % 10 == 0


def with_check_digit(body: str) -> str:
    return next(body + digit for digit in "0123456789" if luhn_valid(body + digit))


# Luhn-valid numbers of every length a card or account number has, 13 to 19 digits.
CARD_NUMBERS = {
    13: "4222222222222",
    14: "30569309025904",
    15: "378282246310005",
    16: "4111111111111111",
    17: with_check_digit("6011000400000000"),
    18: with_check_digit("60110004000000000"),
    19: with_check_digit("601100040000000000"),
}
# What goes into every string input: bare, grouped as people type them, and inside text.
CARD_FEEDS = [
    CARD_NUMBERS[13],
    CARD_NUMBERS[19],
    "5500 0055 5555 5559",
    "5500-0055-5555-5559",
    f"declined card {CARD_NUMBERS[16]} today",
]
# Inputs with a strict format (a UUID, R and two digits, four digits, a cursor) refuse any of
# these already; two suffice to show it.
STRICT_FEEDS = [CARD_NUMBERS[16], "5500 0055 5555 5559"]
# A node id carries its parts; a card number there is one too.
NODE_FEEDS = [
    CARD_NUMBERS[16],
    node_id("Loan", "alice", CARD_NUMBERS[16]),
    node_id("Loan", CARD_NUMBERS[16], "loan-1"),
]

_HEX_DIGEST = re.compile(r"(?=[0-9a-f]*[a-f])[0-9a-f]{32,}")
# A UUID: its last group may begin with digits and end in a letter, which the grouped pattern
# below would read as a card's last group (1 UUID in about 4,000: `…-7247-4460-9572-02429b…`).
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
_DIGITS = re.compile(r"[0-9]+")
# Digits in the groups cards are printed in (4-4-4-4, 4-6-5, 4-4-4-4-3), by a space or a hyphen.
# A UUID (8-4-4-4-12) never fits, so its hyphens join nothing.
_GROUPED = re.compile(r"(?<![0-9])[0-9]{4}(?:[ -][0-9]{3,6}){2,4}(?![0-9])")
_BASE64_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,}")


def card_numbers_in(text: str, *, decode: bool = False) -> list[str]:
    """Every Luhn-valid number of 13-19 digits, contiguous or grouped as cards are printed. Hex
    digests (SHA-256 of a key) and UUIDs are skipped: they hold no digits of an input. With
    `decode`, base64url tokens (node ids, cursors) are read as well."""
    text = _UUID.sub(" ", _HEX_DIGEST.sub(" ", text))
    candidates = _DIGITS.findall(text)
    for grouped in _GROUPED.findall(text):
        groups = re.split("[ -]", grouped)
        candidates += [
            "".join(groups[start:end])
            for start in range(len(groups))
            for end in range(start + 1, len(groups) + 1)
        ]
    found = [run for run in candidates if 13 <= len(run) <= 19 and luhn_valid(run)]
    if decode:
        for token in _BASE64_TOKEN.findall(text):
            try:
                raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            except ValueError:
                continue
            found += card_numbers_in(raw.decode("latin-1"))
    return sorted(set(found))


def test_the_scanner_finds_card_numbers_and_nothing_else() -> None:
    for number in CARD_NUMBERS.values():
        assert luhn_valid(number)
        assert card_numbers_in(f'{{"reason": "x{number}"}}') == [number]
    assert card_numbers_in("5500 0055 5555 5559, 3782-822463-10005") == [
        "378282246310005",
        "5500005555555559",
    ]
    assert card_numbers_in("4111 1111 1111 1111 2027") == [CARD_NUMBERS[16]]
    assert card_numbers_in(node_id("Loan", "alice", CARD_NUMBERS[16]), decode=True)
    assert not card_numbers_in("4111111111111112 41111111111111111111 411111111111")
    harmless = [
        # UUIDs: their groups are not a card's, whatever the Luhn check says.
        "41111111-1111-4111-8111-111111111111 55000055-5555-5559-8000-000000000000",
        "0190f5a4-1234-7000-8000-123456789012",
        # Three groups of digits and a last one that begins with five: seen in a wire log.
        "f33692f8-7247-4460-9572-02429b43313e",
        "IDEMPOTENCY#" + "1234567890123" + "a" * 51,
        "2026-03-02T15:30:00.001Z 2147483647 1772553600",
    ]
    assert not card_numbers_in(" ".join(harmless))


SERVICE_LOGGERS = ("loc_payments", "strawberry", "uvicorn", "graphql", "starlette", "server")
# The SDK's loggers that write every request and response at DEBUG: a number that reaches
# DynamoDB reaches the log. Held apart from caplog, so that a failure does not print them all.
SDK_LOGGERS = ("botocore.endpoint", "botocore.parsers", "aiobotocore.endpoint")
# Set in a test's own task, and so in every task its requests start: a record logged elsewhere (by
# a task another test left running in this process, a delivery or a job) is not this test's.
THIS_TEST = contextvars.ContextVar("this_test", default=False)


class OfThisTest(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return THIS_TEST.get()


@contextmanager
def records_of_this_test(*handlers: logging.Handler) -> Iterator[None]:
    """Only the records logged by this test's own tasks reach `handlers`."""
    token = THIS_TEST.set(True)
    only = OfThisTest()
    for handler in handlers:
        handler.addFilter(only)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(only)
        THIS_TEST.reset(token)


def log_text(record: logging.LogRecord) -> str:
    """The line as a handler writes it (message, arguments, traceback), and the raw arguments."""
    return f"{logging.Formatter().format(record)} {record.args!r}"


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def sdk_wire_log() -> Iterator[list[logging.LogRecord]]:
    handler = Records()
    handler.addFilter(OfThisTest())
    saved = []
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level, logger.propagate))
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        for logger, level, propagate in saved:
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate


@pytest.fixture
async def fresh(moto_config: DynamoConfig) -> AsyncIterator[Setup]:
    async with api_client(moto_config) as public:
        yield await prepare(public.at("/subgraph"), moto_config)


def feeds(leaf: Leaf) -> list[Any]:
    if leaf.kind == "node id":
        return NODE_FEEDS
    fed: list[Any] = CARD_FEEDS if leaf.kind in ("id", "text", "idempotency key") else STRICT_FEEDS
    # ID takes a JSON number as well, and makes it a string.
    return [*fed, int(CARD_NUMBERS[16])] if leaf.type_name == "ID" else fed


async def test_no_response_log_or_item_holds_a_card_number(
    fresh: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    """Fed into every string input: each refused by name, and found nowhere afterwards."""
    for name in SERVICE_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    with records_of_this_test(caplog.handler), sdk_wire_log() as wire:
        accepted, shown, fed = await feed_card_numbers(fresh)
    assert wire and caplog.records  # this test's own records are read
    logged = sorted(
        {
            f"{record.name}: {log_text(record)[:240]!r}"
            for record in (*caplog.records, *wire)
            if card_numbers_in(log_text(record))
        }
    )
    stored = sorted(
        {
            f"{attribute} ({json.dumps(value)[:60]})"
            for item in stored_items(fresh.config)
            for attribute, value in item.items()
            if card_numbers_in(json.dumps(value))
        }
    )
    assert fed > 100
    report = [
        f"inputs that took a value holding a card number ({len(accepted)}):",
        *(f"  {where}: {', '.join(answers)}" for where, answers in accepted.items()),
        f"responses that hold one ({len(shown)} inputs):",
        *(f"  {where}: {sorted(set(found))}" for where, found in shown.items()),
        f"log records that hold one ({len(logged)}), e.g.:",
        *(f"  {line}" for line in logged[:8]),
        f"stored attributes that hold one ({len(stored)}):",
        *(f"  {line}" for line in stored[:20]),
    ]
    assert not (accepted or shown or logged or stored), "\n".join(report)


async def feed_card_numbers(
    fresh: Setup,
) -> tuple[dict[str, list[str]], dict[str, list[str]], int]:
    """(inputs that did not refuse a card number, responses that hold one, how many were fed)."""
    accepted: dict[str, list[str]] = {}
    shown: dict[str, list[str]] = {}
    fed = 0
    for route in ROUTES:
        query = document(route)
        base = base_variables(route, await fresh.valid(route))
        for leaf in leaves(route):
            if leaf.type_name not in ("ID", "String"):
                continue
            where = f"{route.name} {leaf.field(route)}"
            for value in feeds(leaf):
                body = await fresh.api.post(
                    query, replaced(base, leaf.path, value), as_=caller(route), debug=True
                )
                fed += 1
                code, field = outcome(route, body)
                if code != INVALID or field not in leaf.names(route):
                    accepted.setdefault(where, []).append(f"{value!r}: {code} {field or ''}")
                if found := card_numbers_in(json.dumps(body), decode=True):
                    shown.setdefault(where, []).extend(found)
                if written(body):
                    # The move happened: the next value needs a payment in the same state.
                    base = base_variables(route, await fresh.valid(route))
    return accepted, shown, fed


async def test_graphql_refusals_do_not_repeat_a_card_number(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    """GraphQL's own messages quote a refused value: a card number typed into a number, an enum
    or a string given as a number must not come back in them."""
    for name in SERVICE_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    with records_of_this_test(caplog.handler):
        shown = await refusals_showing_a_card_number(setup)
    assert caplog.records  # this test's own records are read
    logged = [record.name for record in caplog.records if card_numbers_in(log_text(record))]
    assert not shown, "\n".join(shown)
    assert not logged


async def refusals_showing_a_card_number(setup: Setup) -> list[str]:
    """Each request whose refusal quotes the card number it was given."""
    number = CARD_NUMBERS[16]
    shown = []
    for route in ROUTES:
        query = document(route)
        base = base_variables(route, await setup.valid(route))
        for leaf in leaves(route):
            if leaf.type_name == "ID":
                continue
            for value in (int(number), number) if leaf.type_name != "String" else (int(number),):
                body = await setup.api.post(
                    query, replaced(base, leaf.path, value), as_=caller(route)
                )
                assert outcome(route, body)[0] == GRAPHQL, body
                if card_numbers_in(json.dumps(body)):
                    shown.append(f"{route.name} {leaf.field(route)} = {value!r}: {body['errors']}")
    literals = [
        f'mutation {{ createPayment(input: {{userId: "alice", loanId: "loan-1", amountCents: '
        f"{number}, method: ACH}}) {{ __typename }} }}",
        f'mutation {{ createPayment(input: {{userId: "alice", loanId: "loan-1", amountCents: 1, '
        f"method: X{number}}}) {{ __typename }} }}",
        f"query {{ paymentsByStatus(status: PENDING, first: {number}) {{ __typename }} }}",
    ]
    for literal in literals:
        body = await setup.api.post(literal)
        if card_numbers_in(json.dumps(body)):
            shown.append(f"{literal}: {body['errors']}")
    return shown
