"""The GraphQL object types, and their making from domain objects."""

from __future__ import annotations

from datetime import datetime

import strawberry

from datasource import Page
from domain.ach_returns import retry_eligibility
from domain.payment import Application, LoanRef, Payment, PaymentRef
from domain.transitions import allowed_targets
from resolvers import queries
from resolvers.context import Context
from resolvers.node_ids import loan_node_id, payment_node_id
from schema.enums import PaymentMethod, PaymentProcess, PaymentStatus


@strawberry.interface(description="An object with a globally unique, opaque id.")
class Node:
    id: strawberry.ID


@strawberry.type(name="PaymentApplication")
class PaymentApplicationType:
    payment_id: strawberry.ID
    installment_id: strawberry.ID
    amount_cents: int
    payment_date: datetime

    @classmethod
    def from_domain(cls, application: Application) -> PaymentApplicationType:
        return cls(
            payment_id=strawberry.ID(application.payment_id),
            installment_id=strawberry.ID(application.installment_id),
            amount_cents=application.amount_cents,
            payment_date=application.payment_date,
        )


@strawberry.type(name="Loan", description="A loan of a user, with its payments.")
class LoanType(Node):
    loan_id: strawberry.ID
    user_id: strawberry.ID
    ref: strawberry.Private[LoanRef]

    @classmethod
    def from_domain(cls, ref: LoanRef) -> LoanType:
        return cls(
            id=strawberry.ID(loan_node_id(ref)),
            loan_id=strawberry.ID(ref.loan_id),
            user_id=strawberry.ID(ref.user_id),
            ref=ref,
        )

    @strawberry.field(description="The loan's payments, newest first.")
    async def payments(
        self,
        info: strawberry.Info[Context, None],
        status: PaymentStatus | None = None,
        first: int | None = None,
        after: str | None = None,
    ) -> PaymentConnection:
        page = await queries.loan_payments(
            info.context, self.ref, status=status, first=first, after=after
        )
        return PaymentConnection.from_page(page)


@strawberry.type(name="Payment", description="A payment against a loan.")
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
    attempts: int = strawberry.field(
        description="Times the payment was presented to the payments service."
    )
    applications: list[PaymentApplicationType]
    update_reason: str | None = strawberry.field(description="Why the last write happened.")
    return_code: str | None = strawberry.field(description="The ACH return code, once returned.")
    version: int = strawberry.field(description="Rises by one with every write.")
    created_at: datetime
    updated_at: datetime
    first_presented_at: datetime | None = strawberry.field(
        description="When the payment was first presented to the payments service."
    )
    completed_at: datetime | None
    payment: strawberry.Private[Payment]

    @classmethod
    def from_domain(cls, payment: Payment) -> PaymentType:
        return cls(
            id=strawberry.ID(
                payment_node_id(PaymentRef(payment.user_id, payment.loan_id, payment.payment_id))
            ),
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
            applications=[PaymentApplicationType.from_domain(a) for a in payment.applications],
            update_reason=payment.update_reason,
            return_code=payment.return_code,
            version=payment.version,
            created_at=payment.created_at,
            updated_at=payment.updated_at,
            first_presented_at=payment.first_presented_at,
            completed_at=payment.completed_at,
            payment=payment,
        )

    @strawberry.field
    def loan(self) -> LoanType:
        return LoanType.from_domain(LoanRef(self.payment.user_id, self.payment.loan_id))

    @strawberry.field(description="The statuses this payment may move to now.")
    def allowed_transitions(self, info: strawberry.Info[Context, None]) -> list[PaymentStatus]:
        context = info.context
        return allowed_targets(self.payment, max_attempts=context.max_attempts, now=context.clock())

    @strawberry.field(description="Whether the payment may be presented again, and until when.")
    def retry_eligibility(self, info: strawberry.Info[Context, None]) -> RetryEligibilityType:
        context = info.context
        found = retry_eligibility(
            self.payment, max_attempts=context.max_attempts, now=context.clock()
        )
        return RetryEligibilityType(
            eligible=found.eligible,
            attempts_remaining=found.attempts_remaining,
            deadline=found.deadline,
            reason=found.reason,
        )


@strawberry.type(name="RetryEligibility")
class RetryEligibilityType:
    eligible: bool
    attempts_remaining: int = strawberry.field(description="Presentments left of the maximum.")
    deadline: datetime | None = strawberry.field(
        description="ACH: the end of the 180-day re-presentment window; null before one."
    )
    reason: str | None = strawberry.field(description="Why the payment is not eligible.")


@strawberry.type
class PageInfo:
    has_next_page: bool
    has_previous_page: bool = strawberry.field(
        description="Always false: lists page forward only, from `after`."
    )
    start_cursor: str | None
    end_cursor: str | None


@strawberry.type(name="PaymentEdge")
class PaymentEdge:
    cursor: str
    node: PaymentType


@strawberry.type(name="PaymentConnection")
class PaymentConnection:
    edges: list[PaymentEdge]
    page_info: PageInfo

    @classmethod
    def from_page(cls, page: Page) -> PaymentConnection:
        edges = [
            PaymentEdge(cursor=edge.cursor, node=PaymentType.from_domain(edge.payment))
            for edge in page.edges
        ]
        return cls(
            edges=edges,
            page_info=PageInfo(
                has_next_page=page.has_next_page,
                has_previous_page=False,
                start_cursor=edges[0].cursor if edges else None,
                end_cursor=page.end_cursor,
            ),
        )


def node_from_domain(found: Payment | LoanRef | None) -> Node | None:
    if found is None:
        return None
    if isinstance(found, LoanRef):
        return LoanType.from_domain(found)
    return PaymentType.from_domain(found)
