"""The loans service of the federation tests, as small as it can be: a Strawberry subgraph that
owns `Loan.balanceCents` and `Installment.dueDate`, and names the payments applied to each
installment by their ids (as the loans service would hold them), for the payments subgraph to
resolve. Served by uvicorn: `python -m tests.federation.loans_subgraph PORT`."""

from __future__ import annotations

import sys
from collections import defaultdict
from datetime import date, timedelta

import strawberry
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route
from strawberry.asgi import GraphQL
from strawberry.federation.schema_directives import Key
from strawberry.federation.types import FieldSet

# Every loan's balance, and every installment's due date, follow from their ids.
BALANCE_CENTS = 125_000
FIRST_DUE = date(2026, 4, 1)
# The payments applied to each installment, by installment id (`recordPayment`).
APPLIED: defaultdict[str, list[strawberry.ID]] = defaultdict(list)


@strawberry.federation.type(keys=["userId loanId"])
class Loan:
    user_id: strawberry.ID
    loan_id: strawberry.ID
    balance_cents: int

    # Strawberry passes a representation's fields as they are named in it (`userId`).
    @classmethod
    def resolve_reference(cls, **key: str) -> Loan:
        return cls(
            user_id=strawberry.ID(key["userId"]),
            loan_id=strawberry.ID(key["loanId"]),
            balance_cents=BALANCE_CENTS,
        )


@strawberry.federation.type(keys=[Key(fields=FieldSet("id"), resolvable=False)])
class Payment:
    id: strawberry.ID


@strawberry.federation.type(keys=["installmentId"])
class Installment:
    installment_id: strawberry.ID
    due_date: date

    # Strawberry passes a representation's fields as they are named in it (`installmentId`).
    @classmethod
    def resolve_reference(cls, **key: str) -> Installment:
        installment_id = strawberry.ID(key["installmentId"])
        return cls(installment_id=installment_id, due_date=due_date(installment_id))

    @strawberry.field
    def payments(self) -> list[Payment | None]:
        return [Payment(id=payment_id) for payment_id in APPLIED[self.installment_id]]


def due_date(installment_id: str) -> date:
    """`inst-3` (or `inst-3-<suffix>`, as tests make unique ids) falls due two months after
    `inst-1`: the ordinal follows `inst-`, and a suffix of hex digits that happen to be all
    decimal is not taken for it (it named a date centuries out of range)."""
    parts = installment_id.split("-")
    number = parts[1] if len(parts) > 1 else ""
    return FIRST_DUE + timedelta(days=30 * (int(number) - 1 if number.isdigit() else 0))


@strawberry.type
class Query:
    @strawberry.field
    def installment(self, installment_id: strawberry.ID) -> Installment:
        return Installment.resolve_reference(installmentId=installment_id)


@strawberry.type
class Mutation:
    @strawberry.mutation
    def record_payment(self, installment_id: strawberry.ID, payment_id: strawberry.ID) -> bool:
        APPLIED[installment_id].append(payment_id)
        return True


schema = strawberry.federation.Schema(
    query=Query, mutation=Mutation, types=[Loan], federation_version="2.9"
)
app = Starlette(routes=[Route("/graphql", GraphQL(schema))])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
