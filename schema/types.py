"""The GraphQL object types.

Payments, applications and loans are served as the domain objects themselves: each type's
fields carry the domain attribute names, so graphql-core reads them directly and no copy is made
per payment. `is_type_of` tells the `Node` interface (and unions) which type a domain object is.
Computed fields (`id`, `loan`, `allowedTransitions`, ...) take the domain object as their parent.
Where a resolver hands a domain object on, `cast` says which GraphQL type serves it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import strawberry
from strawberry.federation.schema_directives import Key
from strawberry.federation.types import FieldSet

from datasource import HistoryPage, Page, PageOf
from domain.ach_returns import retry_eligibility
from domain.history import PaymentEvent
from domain.payment import Application, LoanRef, Payment
from domain.transitions import allowed_targets
from domain.webhooks import event_id, event_type
from resolvers import queries
from resolvers.context import Context
from resolvers.node_ids import loan_node_id, payment_node_id
from schema.enums import ActorKind, PaymentMethod, PaymentProcess, PaymentStatus

Info = strawberry.Info[Context, None]


@strawberry.interface(description="An object with a globally unique, opaque id.")
class Node:
    id: strawberry.ID


@strawberry.federation.type(
    name="Installment",
    keys=[Key(fields=FieldSet("installmentId"), resolvable=False)],
    description="An installment of a loan, which the loans service resolves.",
)
class InstallmentType:
    # Not `id`: Relay takes every `id` for a global one (a Node's), and an installment's id is
    # the loans service's own.
    installment_id: strawberry.ID


@strawberry.type(name="PaymentApplication")
class PaymentApplicationType:
    payment_id: strawberry.ID
    installment_id: strawberry.ID
    amount_cents: int
    payment_date: datetime

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return isinstance(obj, Application)

    @strawberry.field(description="The installment paid; through a gateway, with its fields.")
    def installment(self, root: strawberry.Parent[Application]) -> InstallmentType:
        return InstallmentType(installment_id=strawberry.ID(root.installment_id))


def _loan_id(root: strawberry.Parent[LoanRef]) -> strawberry.ID:
    return strawberry.ID(loan_node_id(root))


def _payment_id(root: strawberry.Parent[Payment]) -> strawberry.ID:
    return strawberry.ID(payment_node_id(root.ref))


@strawberry.federation.type(
    name="Loan", keys=["userId loanId"], description="A loan of a user, with its payments."
)
class LoanType(Node):
    id: strawberry.ID = strawberry.field(resolver=_loan_id)
    loan_id: strawberry.ID
    user_id: strawberry.ID

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return isinstance(obj, LoanRef)

    @strawberry.field(description="The loan's payments, newest first.")
    async def payments(
        self,
        root: strawberry.Parent[LoanRef],
        info: Info,
        status: PaymentStatus | None = None,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> PaymentConnection:
        page = await queries.loan_payments(
            info.context, root, status=status, first=first, after=after, last=last, before=before
        )
        return PaymentConnection.from_page(page)


@strawberry.type(name="RetryEligibility")
class RetryEligibilityType:
    eligible: bool
    attempts_remaining: int = strawberry.field(description="Presentments left of the maximum.")
    deadline: datetime | None = strawberry.field(
        description="ACH: the end of the 180-day re-presentment window; null before one."
    )
    reason: str | None = strawberry.field(description="Why the payment is not eligible.")


@strawberry.federation.type(name="Payment", keys=["id"], description="A payment against a loan.")
class PaymentType(Node):
    id: strawberry.ID = strawberry.field(resolver=_payment_id)
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

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return isinstance(obj, Payment)

    @strawberry.field
    def loan(self, root: strawberry.Parent[Payment]) -> LoanType:
        return cast(LoanType, root.loan)

    @strawberry.field(description="The statuses this payment may move to now.")
    def allowed_transitions(
        self, root: strawberry.Parent[Payment], info: Info
    ) -> list[PaymentStatus]:
        context = info.context
        return allowed_targets(root, max_attempts=context.max_attempts, now=context.clock())

    @strawberry.field(description="Whether the payment may be presented again, and until when.")
    def retry_eligibility(
        self, root: strawberry.Parent[Payment], info: Info
    ) -> RetryEligibilityType:
        context = info.context
        found = retry_eligibility(root, max_attempts=context.max_attempts, now=context.clock())
        return cast(RetryEligibilityType, found)

    @strawberry.field(description="Every write of the payment, oldest first.")
    async def history(
        self,
        root: strawberry.Parent[Payment],
        info: Info,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> PaymentEventConnection:
        page = await queries.payment_history(
            info.context, root, first=first, after=after, last=last, before=before
        )
        return PaymentEventConnection.from_page(page, complete=root.history_from == 1)


def _event_actor_id(root: strawberry.Parent[PaymentEvent], info: Info) -> strawberry.ID | None:
    actor_id = queries.event_actor_id(info.context, root)
    return None if actor_id is None else strawberry.ID(actor_id)


@strawberry.type(name="PaymentEvent", description="One write of a payment, as it was stored.")
class PaymentEventType:
    version: int = strawberry.field(description="The payment's version this write produced.")
    from_status: PaymentStatus | None = strawberry.field(
        description="The status before the write; null for the creation."
    )
    to_status: PaymentStatus
    at: datetime
    reason: str
    return_code: str | None = strawberry.field(description="The ACH return this write recorded.")
    confirmation_id: str | None = strawberry.field(
        description="The confirmation id this write gave the payment."
    )
    actor_kind: ActorKind
    actor_id: strawberry.ID | None = strawberry.field(
        resolver=_event_actor_id,
        description="Who wrote (a token's subject, or a job's name); null for customers.",
    )
    request_id: str | None = strawberry.field(description="The API request that wrote, if any.")

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return isinstance(obj, PaymentEvent)

    @strawberry.field(
        description=(
            "The event's id: a webhook's `webhook-id` and JSON `id`, the same on every delivery."
        )
    )
    def event_id(self, root: strawberry.Parent[PaymentEvent]) -> strawberry.ID:
        return strawberry.ID(event_id(root.ref, root.version))

    @strawberry.field(
        description="`payment.created`, or `payment.<the status moved to, in lower case>`."
    )
    def type(self, root: strawberry.Parent[PaymentEvent]) -> str:
        return event_type(root.from_status, root.to_status)

    @strawberry.field(description="The payment as it is stored now.")
    async def payment(self, root: strawberry.Parent[PaymentEvent], info: Info) -> PaymentType:
        return cast(PaymentType, await queries.event_payment(info.context, root))


@strawberry.type
class PageInfo:
    has_next_page: bool
    has_previous_page: bool = strawberry.field(
        description=(
            "Paging backward (`last`, `before`): whether edges come before this page. Paging "
            "forward (`first`, `after`): whether `after` was given, since the edge it names came "
            "before this page. `hasNextPage` is its mirror: exact forward; backward, whether "
            "`before` was given."
        )
    )
    start_cursor: str | None
    end_cursor: str | None


def page_info(page: PageOf[Any]) -> PageInfo:
    return PageInfo(
        has_next_page=page.has_next_page,
        has_previous_page=page.has_previous_page,
        start_cursor=page.edges[0].cursor if page.edges else None,
        end_cursor=page.end_cursor,
    )


# Edges are served as the datasource's edges themselves: a cursor is signed only if asked for.
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
        return cls(edges=cast(list[PaymentEdge], page.edges), page_info=page_info(page))


@strawberry.type(name="PaymentEventEdge")
class PaymentEventEdge:
    cursor: str
    node: PaymentEventType


@strawberry.type(name="PaymentEventConnection")
class PaymentEventConnection:
    edges: list[PaymentEventEdge]
    page_info: PageInfo
    complete: bool = strawberry.field(
        description=(
            "Whether the history goes back to the payment's creation; false for a payment "
            "written before payment history was kept (its history begins at its next move). "
            "The events feed: always true (it holds every event stored since it exists)."
        )
    )

    @classmethod
    def from_page(cls, page: HistoryPage, *, complete: bool) -> PaymentEventConnection:
        edges = cast(list[PaymentEventEdge], page.edges)
        return cls(edges=edges, page_info=page_info(page), complete=complete)
