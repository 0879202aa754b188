"""A compiled plan answers what graphql-core's own `execute` answers, on the service's schema:
the data, and every error's message, path, locations and original error, null propagation
included; on documents written here and on documents hypothesis draws from the schema, over
stores holding payments that fail in each way a value can. Plans are made by the engine's entry
point (`engine.compile_operation`); only the tests of the one pass and of graphql-core's helpers
look inside (`engine._completion`, `engine.strawberry_adapter.resolve_info`)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
import strawberry
from graphql import (
    GraphQLEnumType,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLUnionType,
    experimental_execute_incrementally,
    parse,
    validate,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strawberry.extensions import FieldExtension

from datasource import EdgeOf, PageOf
from domain.audit import ActorKind
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.history import PaymentEvent
from domain.payment import Application, LoanRef, Payment, PaymentRef, new_payment
from engine import UntestedStrawberry, check_version, compile_operation, strawberry_adapter
from engine import _completion as completion
from resolvers.callers import Caller
from resolvers.context import Context
from resolvers.loaders import BatchReads
from resolvers.node_ids import loan_node_id, payment_node_id
from schema import build_schema
from tests.hypothesis_profiles import examples

NOW = datetime(2026, 3, 2, 15, 30, tzinfo=UTC)
# The subgraph's schema: the public one's fields and federation's `_entities` too.
SCHEMA = build_schema(subgraph=True)
GRAPHQL = SCHEMA.served


def payment(number: int = 0, **changes: Any) -> Payment:
    made = new_payment(
        user_id="u",
        loan_id="l",
        amount_cents=500 + number,
        method=PaymentMethod.ACH,
        process=PaymentProcess.AUTO,
        reason="r",
        now=NOW,
    )
    return dataclasses.replace(made, **changes)


# What a stored value can be: a payment as it should be, or one that fails in one way.
VARIATIONS: dict[str, Any] = {
    "plain": {},
    "confirmed": {"confirmation_id": "c-1", "first_presented_at": NOW},
    "applied": {"applications": (Application("p", "inst-1", 500, NOW),)},
    "null-non-null": {"status": None},
    "bad-int": {"amount_cents": "many"},
    "int-overflow": {"amount_cents": 2**40},
    "bad-enum": {"method": "cheque"},
    "null-node": None,
    "look-alike": "look-alike",
    "failing-cursor": "failing-cursor",
}


def _refused() -> str:
    raise ValueError("the cursor cannot be signed")


class Store:
    """Every read the resolvers make, over one page of nodes (some of them not payments)."""

    def __init__(self, variations: list[str]) -> None:
        self.nodes: list[Any] = []
        self.cursors: list[Any] = []
        for number, name in enumerate(variations):
            changes = VARIATIONS[name]
            if changes is None:
                node: Any = None
            elif changes == "look-alike":  # every attribute of a payment, but not a Payment
                made = payment(number)
                node = SimpleNamespace(**dataclasses.asdict(made), ref=made.ref, loan=made.loan)
            else:
                node = payment(number, **({} if changes == "failing-cursor" else changes))
            self.nodes.append(node)
            self.cursors.append(_refused if changes == "failing-cursor" else f"cursor-{number}")
        self.by_ref = {node.ref: node for node in self.nodes if node is not None}

    def _page(self) -> PageOf[Any]:
        edges = [
            EdgeOf(node, cursor if callable(cursor) else functools.partial(str, cursor))
            for node, cursor in zip(self.nodes, self.cursors, strict=True)
        ]
        return PageOf(edges=edges, has_next_page=True, end_cursor="end")

    async def batch_get(self, refs: list[PaymentRef], *, consistent: bool = True) -> list[Any]:
        return [self.by_ref.get(ref) for ref in refs]

    async def loan_payments(
        self, loan: LoanRef, *, first: int | None = None, **_: Any
    ) -> PageOf[Any]:
        if first is not None and first < 1:
            from domain.errors import InvalidInput

            raise InvalidInput("first", "must be between 1 and 100")
        return self._page()

    async def payments_by_status(self, **_: Any) -> PageOf[Any]:
        return self._page()

    async def payment_by_confirmation(self, **_: Any) -> Any:
        return self.nodes[0] if self.nodes else None

    async def history(self, ref: PaymentRef, **_: Any) -> PageOf[Any]:
        event = PaymentEvent(
            user_id=ref.user_id,
            loan_id=ref.loan_id,
            payment_id=ref.payment_id,
            version=1,
            from_status=None,
            to_status=PaymentStatus.PENDING,
            at=NOW,
            reason="made",
            actor_kind=ActorKind.SERVICE,
            actor_id="svc",
        )
        return PageOf(edges=[EdgeOf(event, lambda: "h-1")], has_next_page=False, end_cursor="h-1")


def _context(store: Store) -> Context:
    return Context(
        store=store,  # type: ignore[arg-type]
        max_attempts=3,
        clock=lambda: NOW,
        authenticated=Caller("svc", is_service=True),
    )


def _answer(result: Any) -> dict[str, Any]:
    return {
        "data": result.data,
        "errors": [
            (
                error.message,
                error.path,
                [tuple(location) for location in error.locations or ()],
                type(error.original_error).__name__,
            )
            for error in result.errors or ()
        ],
    }


def _variables(store: Store, query: str) -> dict[str, Any]:
    payments = [node for node in store.nodes if node is not None]
    every = {
        "p": payments[0].payment_id if payments else "none",
        "ids": [payment_node_id(node.ref) for node in payments] + [loan_node_id(LoanRef("u", "l"))],
        "id": payment_node_id(payments[0].ref) if payments else loan_node_id(LoanRef("u", "l")),
        "first": 2,
        "yes": True,
        "no": False,
    }
    return {name: value for name, value in every.items() if f"${name}" in query}


async def both(query: str, variations: list[str], variables: dict[str, Any] | None = None) -> Any:
    """The plan's answer and graphql-core's, each on a context of its own."""
    store = Store(variations)
    document = parse(query)
    assert not validate(GRAPHQL, document), validate(GRAPHQL, document)
    if variables is None:
        variables = _variables(store, query)
    plan = compile_operation(SCHEMA, document, None)
    answers = []
    # The loaders remember listed payments by ref; these pages also hold what is not one.
    with mock.patch.object(BatchReads, "remember", lambda self, payments: None):
        for result in (
            plan.execute(context=_context(store), variables=variables),
            # The subgraph serves @defer and @stream, which graphql-core's plain `execute`
            # refuses to run a schema with; without them in the document, one result.
            experimental_execute_incrementally(
                GRAPHQL, document, context_value=_context(store), variable_values=variables
            ),
        ):
            answers.append(_answer(await result if asyncio.iscoroutine(result) else result))
    return plan, answers


LEAVES = "paymentId status amountCents method createdAt confirmationId loanId"
PAGE_SELECTIONS: dict[str, str] = {
    "edges-and-page-info": (
        f"edges {{ cursor node {{ {LEAVES} }} }} pageInfo {{ hasNextPage endCursor }}"
    ),
    "typename-and-aliases": (
        f"__typename all: edges {{ node {{ __typename {LEAVES} }} }} "
        f"again: edges {{ node {{ id: paymentId }} }}"
    ),
    "a-fragment-and-skip": (
        "edges { ...E node @skip(if: $no) { amountCents } } pageInfo @include(if: $yes) "
        f"{{ startCursor }} fragment E on PaymentEdge {{ node {{ {LEAVES} }} }}"
    ),
    "with-resolved-fields": (
        f"edges {{ node {{ {LEAVES} allowedTransitions loan {{ id }} retryEligibility "
        "{ eligible deadline } } }"
    ),
}


@pytest.mark.parametrize("selection", PAGE_SELECTIONS, ids=list(PAGE_SELECTIONS))
@pytest.mark.parametrize("variation", VARIATIONS, ids=list(VARIATIONS))
async def test_pages_answer_what_graphql_core_answers(selection: str, variation: str) -> None:
    selected, _, fragment = PAGE_SELECTIONS[selection].partition(" fragment ")
    declared = "($yes: Boolean!, $no: Boolean!)" if "$yes" in selected else ""
    query = f'query{declared} {{ loan(userId: "u", loanId: "l") {{ payments {{ {selected} }} }} }}'
    if fragment:
        query += f" fragment {fragment}"
    plan, (planned, reference) = await both(query, ["plain", variation, "plain"])
    assert plan.covered
    assert planned == reference
    if variation in ("plain", "confirmed"):
        assert not planned["errors"] and planned["data"]


NODES = (
    f"id ... on Payment {{ {LEAVES} }} "
    "... on Loan { loanId payments(first: 1) { edges { cursor } } }"
)


@pytest.mark.parametrize("variation", VARIATIONS, ids=list(VARIATIONS))
async def test_nodes_of_an_interface_answer_what_graphql_core_answers(variation: str) -> None:
    query = f"query($ids: [ID!]!) {{ nodes(ids: $ids) {{ __typename {NODES} }} }}"
    _, (planned, reference) = await both(query, ["plain", variation])
    assert planned == reference


RESOLVED: dict[str, str] = {
    "variables": 'query($p: ID!) { payment(userId: "u", loanId: "l", paymentId: $p) '
    "{ paymentId allowedTransitions loan { id loanId } } }",
    "a-missing-user": 'query($p: ID!) { payment(loanId: "l", paymentId: $p) { paymentId } }',
    "a-refused-argument": 'query { payment(userId: "u", loanId: "l", paymentId: "") { status } }',
    "an-invalid-node-id": 'query { nodes(ids: ["not-a-node-id"]) { id } }',
    "a-refused-page-size": 'query { loan(userId: "u", loanId: "l") { payments(first: 0) { '
    "edges { cursor } } } }",
    "a-variable-page-size": 'query($first: Int) { loan(userId: "u", loanId: "l") { '
    "payments(first: $first) { edges { node { paymentId history(first: 1) { complete "
    "edges { node { version toStatus at actorKind actorId payment { paymentId } } } } } } } } }",
    "by-status-and-confirmation": "query { paymentsByStatus(status: PENDING, first: 2) { edges "
    '{ node { status } } } paymentByConfirmation(userId: "u", confirmationId: "c-1") { status } }',
    "a-root-non-null-error": 'query { loan(loanId: "l") { loanId } }',
    "a-variable-of-the-wrong-type": 'query($first: Int) { loan(userId: "u", loanId: "l") { '
    "payments(first: $first) { pageInfo { hasNextPage } } } }",
    "entities-with-malformed-ones": "query { _entities(representations: ["
    '{__typename: "Loan", userId: "u", loanId: "l"}, {__typename: "Payment", id: "not-a-node-id"}, '
    '"not an object"]) { __typename ... on Loan { loanId } ... on Payment { paymentId } } }',
    "an-installment": 'query($p: ID!) { payment(userId: "u", loanId: "l", paymentId: $p) '
    "{ applications { installmentId installment { __typename installmentId } } } }",
}


@pytest.mark.parametrize("case", RESOLVED, ids=list(RESOLVED))
async def test_resolvers_answer_what_graphql_core_answers(case: str) -> None:
    variables = {"first": "many"} if case == "a-variable-of-the-wrong-type" else None
    _, (planned, reference) = await both(RESOLVED[case], ["applied", "confirmed"], variables)
    assert planned == reference
    assert planned["data"] is not None or planned["errors"]


async def test_every_enum_member_is_named_as_graphql_core_names_it() -> None:
    for status in PaymentStatus:
        for method in PaymentMethod:
            VARIATIONS["each"] = {"status": status, "method": method}
            query = (
                'query($p: ID!) { payment(userId: "u", loanId: "l", paymentId: $p) '
                "{ status method } }"
            )
            _, (planned, reference) = await both(query, ["each"])
            assert planned == reference
            assert planned["data"]["payment"] == {"status": status.name, "method": method.name}
    del VARIATIONS["each"]


def test_what_the_plans_do_not_cover_is_left_to_graphql_core() -> None:
    covered = 'query { loan(userId: "u", loanId: "l") { payments { edges { cursor } } } }'
    assert compile_operation(SCHEMA, parse(covered), None).covered
    for query, reason in [
        ("{ __schema { queryType { name } } }", "introspection"),
        ('{ __type(name: "Payment") { name } }', "introspection"),
        ("subscription { paymentEvents { version } }", "a subscription"),
    ]:
        plan = compile_operation(SCHEMA, parse(query), None)
        assert plan.fallback_reason == reason


async def test_introspection_is_answered_by_graphql_core() -> None:
    query = 'query { __typename __type(name: "Payment") { name kind } }'
    _, (planned, reference) = await both(query, ["plain"])
    assert planned == reference
    assert planned["data"] == {
        "__typename": "Query",
        "__type": {"name": "Payment", "kind": "OBJECT"},
    }


def test_an_untested_strawberry_is_refused_at_start() -> None:
    check_version()
    with pytest.raises(UntestedStrawberry, match=r"0\.0\.1"):
        check_version("0.0.1")


class Shout(FieldExtension):
    def resolve(self, next_: Any, source: Any, info: Any, **kwargs: Any) -> Any:
        return str(next_(source, info, **kwargs)).upper()


@strawberry.type
class Word:
    text: str = strawberry.field(extensions=[Shout()])
    plain: str


async def _doubled(number: int) -> int:
    await asyncio.sleep(0)
    return 2 * number


@strawberry.type
class WordsQuery:
    @strawberry.field
    def words(self) -> list[Word]:
        return [Word(text="one", plain="one")]

    @strawberry.field
    async def doubled(self, info: strawberry.Info) -> list[int]:
        """graphql-core's helpers for resolvers, which a plan gives too."""
        helpers = strawberry_adapter.resolve_info(info).async_helpers
        helpers.track([asyncio.sleep(0)])
        results: list[int] = await helpers.gather([_doubled(1), _doubled(2)])
        return results


async def test_field_extensions_and_graphql_cores_helpers_work_in_a_plan() -> None:
    schema = strawberry.Schema(query=WordsQuery)
    document = parse("{ words { text plain } doubled }")
    result = compile_operation(schema, document, None).execute(context=None, variables=None)
    assert asyncio.iscoroutine(result)
    answer = await result
    assert answer.errors is None
    assert answer.data == {"words": [{"text": "ONE", "plain": "one"}], "doubled": [2, 4]}


# Documents drawn from the schema: arguments for the fields that take them.
ARGUMENTS: dict[tuple[str, str], list[str]] = {
    ("Query", "payment"): [
        '(userId: "u", loanId: "l", paymentId: $p)',
        '(loanId: "l", paymentId: $p)',
        '(userId: "u", loanId: "l", paymentId: "")',
    ],
    ("Query", "loan"): ['(userId: "u", loanId: "l")', '(loanId: "l")'],
    ("Query", "nodes"): ["(ids: $ids)", '(ids: ["not-a-node-id"])'],
    ("Query", "node"): ["(id: $id)"],
    ("Query", "paymentsByStatus"): ["(status: PENDING, first: 5)", "(status: PENDING)"],
    ("Query", "paymentByConfirmation"): ['(userId: "u", confirmationId: "c-1")'],
    ("Loan", "payments"): ["", "(first: 5)", "(first: $first)", "(first: 0)"],
    ("Payment", "history"): ["", "(first: 2)"],
}
DIRECTIVES = ["", "", "", " @include(if: $yes)", " @skip(if: $no)", " @skip(if: true)",
              " @include(if: $no)"]  # fmt: skip


def _named(graphql_type: Any) -> Any:
    while isinstance(graphql_type, GraphQLNonNull | GraphQLList):
        graphql_type = graphql_type.of_type
    return graphql_type


@st.composite
def selections(draw: st.DrawFn, graphql_type: Any, depth: int, fragments: list[str]) -> str:
    """A selection set of `graphql_type`, `depth` levels deep at most."""
    if isinstance(graphql_type, GraphQLInterfaceType | GraphQLUnionType):
        parts = []
        if isinstance(graphql_type, GraphQLInterfaceType):
            parts.append(draw(selections(GraphQLObjectType("_", graphql_type.fields), depth, [])))
        for possible in GRAPHQL.get_possible_types(graphql_type):
            if draw(st.booleans()):
                inner = draw(selections(possible, depth, fragments))
                parts.append(
                    f"... on {possible.name}{draw(st.sampled_from(DIRECTIVES))} {{ {inner} }}"
                )
        return " ".join(parts) or "__typename"
    names = [
        name
        for name, field in graphql_type.fields.items()
        if (graphql_type.name, name) in ARGUMENTS
        or not any(isinstance(arg.type, GraphQLNonNull) for arg in field.args.values())
    ]
    chosen = draw(st.lists(st.sampled_from([*names, "__typename"]), min_size=1, max_size=5))
    parts = []
    for index, name in enumerate(chosen):
        alias = draw(st.sampled_from(["", "", f"a{index}: "]))
        directive = draw(st.sampled_from(DIRECTIVES))
        if name == "__typename":
            parts.append(f"{alias}__typename{directive}")
            continue
        arguments = draw(st.sampled_from(ARGUMENTS.get((graphql_type.name, name), [""])))
        target = _named(graphql_type.fields[name].type)
        if isinstance(target, GraphQLScalarType | GraphQLEnumType):
            parts.append(f"{alias}{name}{arguments}{directive}")
            continue
        if depth == 0:
            continue
        inner = draw(selections(target, depth - 1, fragments))
        if isinstance(target, GraphQLObjectType) and draw(st.integers(0, 4)) == 0:
            fragment = f"F{len(fragments)}"
            fragments.append(f"fragment {fragment} on {target.name} {{ {inner} }}")
            inner = f"...{fragment} {inner}"
        parts.append(f"{alias}{name}{arguments}{directive} {{ {inner} }}")
    return " ".join(parts) or "__typename"


@st.composite
def documents(draw: st.DrawFn) -> str:
    fragments: list[str] = []
    body = draw(selections(GRAPHQL.query_type, 4, fragments))
    declared = {"p": "ID!", "ids": "[ID!]!", "id": "ID!", "first": "Int", "yes": "Boolean!",
                "no": "Boolean!"}  # fmt: skip
    used = [
        f"${name}: {kind}"
        for name, kind in declared.items()
        if f"${name}" in body + "".join(fragments)
    ]
    head = f"query({', '.join(used)})" if used else "query"
    return " ".join([f"{head} {{ {body} }}", *fragments])


@pytest.mark.slow  # drawn documents
@settings(
    max_examples=examples(50),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    query=documents(),
    variations=st.lists(st.sampled_from(list(VARIATIONS)), min_size=1, max_size=4),
)
def test_drawn_documents_answer_what_graphql_core_answers(
    query: str, variations: list[str]
) -> None:
    from hypothesis import assume

    assume(not validate(GRAPHQL, parse(query)))
    runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)
    try:
        plan, (planned, reference) = runner.run(both(query, variations))
    finally:
        runner.close()
    assert plan.covered
    assert planned == reference, query


def test_the_one_pass_is_taken_by_a_plain_page() -> None:
    """A page of plain payments is completed in one pass: its connection is a plain object."""
    selected = PAGE_SELECTIONS["edges-and-page-info"]
    query = f'query {{ loan(userId: "u", loanId: "l") {{ payments {{ {selected} }} }} }}'
    plan = compile_operation(SCHEMA, parse(query), None)
    (loan,) = plan.variant(()).fields
    payments = loan.complete.inner.fields[0]  # type: ignore[attr-defined]
    connection = payments.complete.inner
    assert isinstance(connection, completion.ObjectCompleter) and connection.plain is not None
