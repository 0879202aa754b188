"""The shortcuts (plain leaves, resolvers with leaf arguments) answer exactly what graphql-core's
and Strawberry's ordinary paths answer."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
import strawberry
from strawberry.extensions import FieldExtension
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from datasource.pages import EdgeOf, Page, PageOf
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.payment import Application, Payment, PaymentRef, new_payment
from resolvers.callers import Caller
from resolvers.context import Context
from resolvers.loaders import BatchReads
from resolvers.node_ids import loan_node_id, payment_node_id
from schema import build_schema, execution

NOW = datetime(2026, 3, 2, 15, 30, tzinfo=UTC)
QUERY = """query($p: ID!) { payment(userId: "u", loanId: "l", paymentId: $p) {
  paymentId status amountCents method confirmationId createdAt attempts } }"""


class OneAnswer:
    """A store that holds one payment, whatever it is."""

    def __init__(self, payment: Any) -> None:
        self.payment = payment

    async def batch_get(self, refs: list[PaymentRef], *, consistent: bool = True) -> list[Any]:
        return [self.payment for _ in refs]


def payment() -> Payment:
    return new_payment(
        user_id="u",
        loan_id="l",
        amount_cents=500,
        method=PaymentMethod.ACH,
        process=PaymentProcess.AUTO,
        reason="r",
        now=NOW,
    )


async def execute(
    stored: Any,
    *,
    shortcut: bool,
    query: str = QUERY,
    variables: dict[str, Any] | None = None,
    store: Any = None,
) -> dict[str, Any]:
    schema = build_schema(shortcuts=shortcut)
    context = Context(
        store=store or OneAnswer(stored),  # type: ignore[arg-type]
        max_attempts=3,
        clock=lambda: NOW,
        authenticated=Caller("svc", is_service=True),
    )
    if variables is None:
        variables = {"p": stored.payment_id}
    result = await schema.execute(query, variables, context_value=context)
    return {
        "data": result.data,
        "errors": [(e.message, e.path) for e in result.errors or []],
    }


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"confirmation_id": "c-1"},
        {"status": None},  # non-null leaf is null
        {"amount_cents": "many"},  # a value that cannot be coerced
        {"amount_cents": 2**40},  # beyond GraphQL's Int
        {"method": "cheque"},  # not an enum value
    ],
    ids=["plain", "optional-set", "null-non-null", "bad-int", "int-overflow", "bad-enum"],
)
async def test_the_shortcut_answers_what_the_ordinary_path_answers(
    changes: dict[str, Any],
) -> None:
    stored = dataclasses.replace(payment(), **changes)
    assert await execute(stored, shortcut=True) == await execute(stored, shortcut=False)


async def test_every_enum_member_is_named_as_the_ordinary_path_names_it() -> None:
    for status in PaymentStatus:
        for method in PaymentMethod:
            stored = dataclasses.replace(payment(), status=status, method=method)
            short = await execute(stored, shortcut=True)
            assert short == await execute(stored, shortcut=False)
            assert short["data"]["payment"]["status"] == status.name


FIELDS = "paymentId status allowedTransitions loan { id loanId }"
RESOLVED: dict[str, tuple[str, dict[str, Any]]] = {
    "variables": (
        f"query($u: ID, $l: ID!, $p: ID!) {{ payment(userId: $u, loanId: $l, paymentId: $p) "
        f"{{ {FIELDS} }} }}",
        {"u": "u", "l": "l"},
    ),
    "literals-and-a-missing-optional": (
        f'query($p: ID!) {{ payment(loanId: "l", paymentId: $p) {{ {FIELDS} }} }}',
        {},
    ),
    "a-list-argument": (
        f"query($ids: [ID!]!) {{ nodes(ids: $ids) {{ id ... on Payment {{ {FIELDS} }} }} }}",
        {"ids": "both"},
    ),
    "an-invalid-id-in-the-list": (
        "query($ids: [ID!]!) { nodes(ids: $ids) { id } }",
        {"ids": ["not-a-node-id"]},
    ),
    "a-refused-argument": (
        'query { payment(userId: "u", loanId: "l", paymentId: "") { paymentId } }',
        {},
    ),
    "node": ("query($id: ID!) { node(id: $id) { id ... on Loan { loanId } } }", {"id": "loan"}),
    "entities-with-a-malformed-one": (
        "query($reps: [_Any!]!) { _entities(representations: $reps) { __typename "
        f"... on Payment {{ {FIELDS} }} ... on Loan {{ loanId }} }} }}",
        {"reps": "entities"},
    ),
    "an-installment": (
        'query($p: ID!) { payment(userId: "u", loanId: "l", paymentId: $p) '
        "{ applications { installmentId installment { __typename id } } } }",
        {},
    ),
}


@pytest.mark.parametrize("case", RESOLVED, ids=list(RESOLVED))
async def test_the_short_resolvers_answer_what_strawberrys_wrapper_answers(case: str) -> None:
    stored = payment()
    stored = dataclasses.replace(
        stored, applications=(Application(stored.payment_id, "inst-1", 500, NOW),)
    )
    query, variables = RESOLVED[case]
    variables = dict(variables)
    if "p" in query:
        variables.setdefault("p", stored.payment_id)
    if variables.get("ids") == "both":
        variables["ids"] = [payment_node_id(stored.ref), loan_node_id(stored.loan)]
    if variables.get("id") == "loan":
        variables["id"] = loan_node_id(stored.loan)
    if variables.get("reps") == "entities":
        variables["reps"] = [
            {"__typename": "Payment", "id": payment_node_id(stored.ref)},
            {"__typename": "Loan", "userId": "u", "loanId": "l"},
            {"__typename": "Payment", "id": "not-a-node-id"},
            "not an object",
        ]
    short = await execute(stored, shortcut=True, query=query, variables=variables)
    assert short == await execute(stored, shortcut=False, query=query, variables=variables)
    assert short["data"] is not None or short["errors"]


def test_fields_with_input_objects_keep_strawberrys_wrapper() -> None:
    shortened = build_schema().shortened_fields
    assert {"Query.payment", "Query.nodes", "Loan.payments", "Payment.history"} <= set(shortened)
    assert {"Query._entities", "PaymentApplication.installment"} <= set(shortened)
    assert not [name for name in shortened if name.startswith(("Mutation.", "Subscription."))]
    assert build_schema(shortcuts=False).shortened_fields == []


class ByRef:
    """A store whose payments are given per ref, in the order asked."""

    def __init__(self, payments: list[Payment]) -> None:
        self.payments = {stored.ref: stored for stored in payments}

    async def batch_get(self, refs: list[PaymentRef], *, consistent: bool = True) -> list[Any]:
        return [self.payments.get(ref) for ref in refs]


@pytest.fixture
def one_pass(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each object completed in one pass (its plan and source), in order."""
    completed: list[object] = []
    complete = execution._complete_object

    def counted(*args: Any) -> Any:
        completed.append(args)
        return complete(*args)

    monkeypatch.setattr(execution, "_complete_object", counted)
    return completed


LEAVES = "paymentId status amountCents method createdAt confirmationId loanId"
OBJECTS: dict[str, str] = {
    "leaves": f"... on Payment {{ {LEAVES} }}",
    "typename-and-aliases": f"__typename ... on Payment {{ a: paymentId b: paymentId {LEAVES} }}",
    "skip-and-include": (
        "... on Payment { paymentId status @include(if: $yes) "
        "amountCents @skip(if: $no) method @include(if: false) loanId @skip(if: true) }"
    ),
    "with-a-resolved-field": f"id ... on Payment {{ {LEAVES} allowedTransitions }}",
}
PAGES: dict[str, list[dict[str, Any]]] = {
    "plain": [{}, {"confirmation_id": "c-1"}, {}],
    "a-null-non-null-in-the-middle": [{}, {"status": None}, {}],
    "a-value-that-cannot-be-coerced-last": [{}, {}, {"amount_cents": 2**40}],
}


@pytest.mark.parametrize("selection", OBJECTS, ids=list(OBJECTS))
@pytest.mark.parametrize("page", PAGES, ids=list(PAGES))
async def test_objects_of_leaves_answer_what_the_ordinary_path_answers(
    selection: str, page: str, one_pass: list[object]
) -> None:
    """A list of objects whose fields are all plain leaves is completed in one pass per object;
    the answers, errors and their paths included, are the ordinary path's."""
    payments = [dataclasses.replace(payment(), **changes) for changes in PAGES[page]]
    variables: dict[str, Any] = {"ids": [payment_node_id(stored.ref) for stored in payments]}
    declared = "$ids: [ID!]!"
    if "$yes" in OBJECTS[selection]:
        variables |= {"yes": True, "no": False}
        declared += ", $yes: Boolean!, $no: Boolean!"
    query = f"query({declared}) {{ nodes(ids: $ids) {{ {OBJECTS[selection]} }} }}"
    answers = [
        await execute(
            None, shortcut=shortcut, query=query, variables=variables, store=ByRef(payments)
        )
        for shortcut in (True, False)
    ]
    assert answers[0] == answers[1]
    # Every payment's object took the one pass, unless a field of it has a resolver.
    assert len(one_pass) == (0 if selection == "with-a-resolved-field" else len(payments))
    if page == "plain":
        assert not answers[0]["errors"]
        assert [node["paymentId"] for node in answers[0]["data"]["nodes"]] == [
            stored.payment_id for stored in payments
        ]
    else:
        assert answers[0]["errors"]


class OnePage:
    """A store whose every loan holds one page: these payments, with the edges' cursors."""

    def __init__(self, nodes: list[Any], cursors: list[Any]) -> None:
        self.nodes = nodes
        self.cursors = cursors

    async def loan_payments(self, loan: Any, **_: Any) -> Page:
        edges = [EdgeOf(node, sign) for node, sign in zip(self.nodes, self.cursors, strict=True)]
        return PageOf(edges=edges, has_next_page=True, end_cursor="end")


def _cursor(n: int) -> Any:
    return lambda: f"cursor-{n}"


def _refused() -> str:
    raise ValueError("the cursor cannot be signed")


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
    "with-a-resolved-field": f"edges {{ node {{ {LEAVES} allowedTransitions }} }}",
}
PAGE_CHANGES: dict[str, list[Any]] = {
    "plain": [{}, {"confirmation_id": "c-1"}, {}],
    "a-null-non-null-in-the-middle": [{}, {"status": None}, {}],
    "a-value-that-cannot-be-coerced-last": [{}, {}, {"amount_cents": 2**40}],
    "a-null-node": [{}, None, {}],
    "a-node-of-another-type": [{}, "look-alike", {}],
    "a-cursor-that-fails": [{}, "no-cursor", {}],
}


@pytest.mark.parametrize("selection", PAGE_SELECTIONS, ids=list(PAGE_SELECTIONS))
@pytest.mark.parametrize("page", PAGE_CHANGES, ids=list(PAGE_CHANGES))
async def test_pages_answer_what_the_ordinary_path_answers(
    selection: str, page: str, one_pass: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page (its edges, each edge's payment, its page info) is completed in one pass, as a
    tree; the answers, errors and their paths included, are the ordinary path's."""
    # The loaders remember a page's payments by ref; these pages also hold what is not one.
    monkeypatch.setattr(BatchReads, "remember", lambda self, payments: None)
    nodes: list[Any] = []
    cursors: list[Any] = []
    for n, changes in enumerate(PAGE_CHANGES[page]):
        cursors.append(_refused if changes == "no-cursor" else _cursor(n))
        if changes is None:
            nodes.append(None)
        elif changes == "look-alike":  # every attribute of a payment, but not a Payment
            nodes.append(SimpleNamespace(**dataclasses.asdict(payment()), ref=payment().ref))
        else:
            nodes.append(
                dataclasses.replace(payment(), **({} if changes == "no-cursor" else changes))
            )
    selected = PAGE_SELECTIONS[selection]
    declared = "($yes: Boolean!, $no: Boolean!)" if "$yes" in selected else ""
    fragment = ""
    if " fragment " in selected:
        selected, fragment = selected.split(" fragment ", 1)
        fragment = f"fragment {fragment}"
    query = (
        f'query{declared} {{ loan(userId: "u", loanId: "l") {{ payments {{ {selected} }} }} }} '
        f"{fragment}"
    )
    answers = [
        await execute(
            None,
            shortcut=shortcut,
            query=query,
            variables={"yes": True, "no": False} if declared else {},
            store=OnePage(nodes, cursors),
        )
        for shortcut in (True, False)
    ]
    assert answers[0] == answers[1]
    unread = page == "a-cursor-that-fails" and not re.search(r"\bcursor\b", selected)
    if page == "plain" or unread:
        assert not answers[0]["errors"]
        # The page, each edge and each payment, and the page info if asked: one pass each.
        if selection == "edges-and-page-info":
            assert len(one_pass) == 2 + 2 * len(nodes)
        elif selection == "with-a-resolved-field":
            assert not one_pass
    else:
        assert answers[0]["errors"]
        assert all(len(path) > 3 for _, path in answers[0]["errors"])


class Shout(FieldExtension):
    def resolve(self, next_: Any, source: Any, info: Any, **kwargs: Any) -> Any:
        return str(next_(source, info, **kwargs)).upper()


@strawberry.type
class Word:
    text: str = strawberry.field(extensions=[Shout()])
    plain: str


@strawberry.type
class Words:
    word: Word
    words: list[Word]


@strawberry.type
class WordsQuery:
    @strawberry.field
    def words(self) -> Words:
        return Words(word=Word(text="one", plain="one"), words=[Word(text="two", plain="two")])


async def test_a_field_with_an_extension_is_not_a_plain_leaf() -> None:
    """A field without a resolver but with a field extension is answered by the extension, on
    the shortcut's path as on the ordinary one."""
    query = "{ words { word { text plain } words { text plain } } }"
    answers = []
    for executor in (execution.PaymentsExecutionContext, StrawberryGraphQLCoreExecutionContext):
        schema = strawberry.Schema(query=WordsQuery, execution_context_class=executor)
        answers.append((await schema.execute(query)).data)
    assert answers[0] == answers[1]
    assert answers[0] == {
        "words": {
            "word": {"text": "ONE", "plain": "one"},
            "words": [{"text": "TWO", "plain": "two"}],
        }
    }


async def _doubled(number: int) -> int:
    await asyncio.sleep(0)
    return 2 * number


@strawberry.type
class HelpersQuery:
    @strawberry.field
    async def doubled(self, info: strawberry.Info) -> list[int]:
        """graphql-core's helpers, which the execution context holds weakly."""
        info._raw_info.async_helpers.track([asyncio.sleep(0)])
        results: list[int] = await info._raw_info.async_helpers.gather([_doubled(1), _doubled(2)])
        return results


async def test_resolvers_keep_graphql_cores_helpers() -> None:
    """The helpers for resolvers (`info.async_helpers`) work on the shortcut's path as on the
    ordinary one, though the shortcut's hold the execution weakly (no cycle per request)."""
    for executor in (execution.PaymentsExecutionContext, StrawberryGraphQLCoreExecutionContext):
        schema = strawberry.Schema(query=HelpersQuery, execution_context_class=executor)
        result = await schema.execute("{ doubled }")
        assert result.errors is None
        assert result.data == {"doubled": [2, 4]}
