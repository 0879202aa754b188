"""The shortcut for plain leaves answers exactly what graphql-core's ordinary path answers."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from domain.enums import PaymentMethod, PaymentProcess
from domain.payment import Payment, PaymentRef, new_payment
from resolvers.callers import Caller
from resolvers.context import Context
from schema import build_schema

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


async def execute(stored: Any, *, shortcut: bool) -> dict[str, Any]:
    schema = build_schema()
    if not shortcut:
        schema.execution_context_class = StrawberryGraphQLCoreExecutionContext
    context = Context(
        store=OneAnswer(stored),  # type: ignore[arg-type]
        max_attempts=3,
        clock=lambda: NOW,
        authenticated=Caller("svc", is_service=True),
    )
    result = await schema.execute(QUERY, {"p": stored.payment_id}, context_value=context)
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
