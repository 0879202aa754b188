"""P2: Strawberry with default settings, the query side of the same schema as a user would first
write it: types with plain fields filled from the domain payment, async resolvers for the fields
that read DynamoDB (through the same `PaymentStore`), no caches, no extensions, Strawberry's own
ASGI view. `nodes` reads its payments in one batch because it receives them as one list."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.schema.config import StrawberryConfig

from datasource import Page, PaymentStore
from domain import validation
from domain.ach_returns import retry_eligibility
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.payment import LoanRef, Payment, PaymentRef
from domain.transitions import allowed_targets
from resolvers.node_ids import decode_node_id, loan_node_id, payment_node_id

MAX_ATTEMPTS = 3

strawberry.enum(PaymentStatus)
strawberry.enum(PaymentMethod)
strawberry.enum(PaymentProcess)

DateTime = strawberry.scalar(
    name="DateTime",
    serialize=validation.format_timestamp,
    parse_value=lambda value: validation.parse_timestamp("DateTime", value),
)


@strawberry.interface
class Node:
    id: strawberry.ID


@strawberry.type
class PaymentApplication:
    payment_id: strawberry.ID
    installment_id: strawberry.ID
    amount_cents: int
    payment_date: datetime


@strawberry.type
class RetryEligibility:
    eligible: bool
    attempts_remaining: int
    deadline: datetime | None
    reason: str | None


@strawberry.type
class Loan(Node):
    loan_id: strawberry.ID
    user_id: strawberry.ID

    @strawberry.field
    async def payments(
        self,
        info: strawberry.Info,
        status: PaymentStatus | None = None,
        first: int | None = None,
        after: str | None = None,
    ) -> PaymentConnection:
        page = await info.context["store"].loan_payments(
            LoanRef(self.user_id, self.loan_id),
            status=status,
            first=20 if first is None else first,
            after=after,
        )
        return PaymentConnection.from_page(page)

    @staticmethod
    def of(ref: LoanRef) -> Loan:
        return Loan(
            id=strawberry.ID(loan_node_id(ref)),
            loan_id=strawberry.ID(ref.loan_id),
            user_id=strawberry.ID(ref.user_id),
        )


@strawberry.type(name="Payment")
class PaymentType(Node):
    payment_id: strawberry.ID
    user_id: strawberry.ID
    loan_id: strawberry.ID
    amount_cents: int
    status: PaymentStatus
    method: PaymentMethod
    process: PaymentProcess
    confirmation_id: str | None
    account_last_four: str | None
    intended_installment_id: strawberry.ID | None
    attempts: int
    applications: list[PaymentApplication]
    update_reason: str | None
    return_code: str | None
    version: int
    created_at: datetime
    updated_at: datetime
    first_presented_at: datetime | None
    completed_at: datetime | None
    payment: strawberry.Private[Payment]

    @strawberry.field
    def loan(self) -> Loan:
        return Loan.of(LoanRef(self.user_id, self.loan_id))

    @strawberry.field
    def allowed_transitions(self) -> list[PaymentStatus]:
        return allowed_targets(
            self.payment, max_attempts=MAX_ATTEMPTS, now=datetime.now().astimezone()
        )

    @strawberry.field
    def retry_eligibility(self) -> RetryEligibility:
        found = retry_eligibility(
            self.payment, max_attempts=MAX_ATTEMPTS, now=datetime.now().astimezone()
        )
        return RetryEligibility(
            eligible=found.eligible,
            attempts_remaining=found.attempts_remaining,
            deadline=found.deadline,
            reason=found.reason,
        )

    @staticmethod
    def of(payment: Payment) -> PaymentType:
        ref = PaymentRef(payment.user_id, payment.loan_id, payment.payment_id)
        return PaymentType(
            id=strawberry.ID(payment_node_id(ref)),
            payment_id=strawberry.ID(payment.payment_id),
            user_id=strawberry.ID(payment.user_id),
            loan_id=strawberry.ID(payment.loan_id),
            amount_cents=payment.amount_cents,
            status=payment.status,
            method=payment.method,
            process=payment.process,
            confirmation_id=payment.confirmation_id,
            account_last_four=payment.account_last_four,
            intended_installment_id=(
                None
                if payment.intended_installment_id is None
                else strawberry.ID(payment.intended_installment_id)
            ),
            attempts=payment.attempts,
            applications=[
                PaymentApplication(
                    payment_id=strawberry.ID(a.payment_id),
                    installment_id=strawberry.ID(a.installment_id),
                    amount_cents=a.amount_cents,
                    payment_date=a.payment_date,
                )
                for a in payment.applications
            ],
            update_reason=payment.update_reason,
            return_code=payment.return_code,
            version=payment.version,
            created_at=payment.created_at,
            updated_at=payment.updated_at,
            first_presented_at=payment.first_presented_at,
            completed_at=payment.completed_at,
            payment=payment,
        )


@strawberry.type
class PageInfo:
    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None
    end_cursor: str | None


@strawberry.type
class PaymentEdge:
    cursor: str
    node: PaymentType


@strawberry.type
class PaymentConnection:
    edges: list[PaymentEdge]
    page_info: PageInfo

    @staticmethod
    def from_page(page: Page) -> PaymentConnection:
        edges = [PaymentEdge(cursor=e.cursor, node=PaymentType.of(e.node)) for e in page.edges]
        return PaymentConnection(
            edges=edges,
            page_info=PageInfo(
                has_next_page=page.has_next_page,
                has_previous_page=page.has_previous_page,
                start_cursor=edges[0].cursor if edges else None,
                end_cursor=page.end_cursor,
            ),
        )


@strawberry.type
class Query:
    @strawberry.field
    async def payment(
        self,
        info: strawberry.Info,
        loan_id: strawberry.ID,
        payment_id: strawberry.ID,
        user_id: strawberry.ID,
    ) -> PaymentType | None:
        found = await info.context["store"].get(PaymentRef(user_id, loan_id, payment_id))
        return None if found is None else PaymentType.of(found)

    @strawberry.field
    def loan(self, loan_id: strawberry.ID, user_id: strawberry.ID) -> Loan:
        return Loan.of(LoanRef(user_id, loan_id))

    @strawberry.field
    async def payments_by_status(
        self,
        info: strawberry.Info,
        status: PaymentStatus,
        first: int | None = None,
        after: str | None = None,
    ) -> PaymentConnection:
        page = await info.context["store"].payments_by_status(
            status=status, first=20 if first is None else first, after=after
        )
        return PaymentConnection.from_page(page)

    @strawberry.field
    async def nodes(self, info: strawberry.Info, ids: list[strawberry.ID]) -> list[Node | None]:
        refs = [decode_node_id(node_id) for node_id in ids]
        payments = [ref for ref in refs if isinstance(ref, PaymentRef)]
        found = dict(zip(payments, await info.context["store"].batch_get(payments), strict=True))
        result: list[Node | None] = []
        for ref in refs:
            if isinstance(ref, LoanRef):
                result.append(Loan.of(ref))
            else:
                payment = found[ref]
                result.append(None if payment is None else PaymentType.of(payment))
        return result


class PaymentsGraphQL(GraphQL):
    def __init__(self, schema: strawberry.Schema, store: PaymentStore) -> None:
        super().__init__(schema)
        self.store = store

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> Any:
        return {"request": request, "response": response, "store": self.store}


def create_app(store: PaymentStore) -> Starlette:
    schema = strawberry.Schema(
        query=Query,
        types=[PaymentType, Loan],
        config=StrawberryConfig(scalar_map={datetime: DateTime}),
    )
    return Starlette(routes=[Route("/graphql", PaymentsGraphQL(schema, store))])
