"""The shortcuts (plain leaves, resolvers with leaf arguments) answer exactly what graphql-core's
and Strawberry's ordinary paths answer."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.payment import Payment, PaymentRef, new_payment
from resolvers.callers import Caller
from resolvers.context import Context
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
}


@pytest.mark.parametrize("case", RESOLVED, ids=list(RESOLVED))
async def test_the_short_resolvers_answer_what_strawberrys_wrapper_answers(case: str) -> None:
    stored = payment()
    query, variables = RESOLVED[case]
    variables = dict(variables)
    if "p" in query:
        variables.setdefault("p", stored.payment_id)
    if variables.get("ids") == "both":
        variables["ids"] = [payment_node_id(stored.ref), loan_node_id(stored.loan)]
    if variables.get("id") == "loan":
        variables["id"] = loan_node_id(stored.loan)
    short = await execute(stored, shortcut=True, query=query, variables=variables)
    assert short == await execute(stored, shortcut=False, query=query, variables=variables)
    assert short["data"] is not None or short["errors"]


def test_fields_with_input_objects_keep_strawberrys_wrapper() -> None:
    shortened = build_schema().shortened_fields
    assert {"Query.payment", "Query.nodes", "Loan.payments", "Payment.history"} <= set(shortened)
    assert not [name for name in shortened if name.startswith(("Mutation.", "Subscription."))]
    assert build_schema(shortcuts=False).shortened_fields == []


class ByRef:
    """A store whose payments are given per ref, in the order asked."""

    def __init__(self, payments: list[Payment]) -> None:
        self.payments = {stored.ref: stored for stored in payments}

    async def batch_get(self, refs: list[PaymentRef], *, consistent: bool = True) -> list[Any]:
        return [self.payments.get(ref) for ref in refs]


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
    selection: str, page: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list of objects whose fields are all plain leaves is completed in one pass per object;
    the answers, errors and their paths included, are the ordinary path's."""
    one_pass: list[object] = []
    complete = execution._complete_leaves

    def counted(*args: Any) -> Any:
        one_pass.append(args)
        return complete(*args)

    monkeypatch.setattr(execution, "_complete_leaves", counted)
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
