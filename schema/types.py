"""The GraphQL object types.

Payments, applications and loans are served as the domain objects themselves: each type's
fields carry the domain attribute names, so graphql-core reads them directly and no copy is made
per payment. `is_type_of` tells the `Node` interface (and unions) which type a domain object is.
Computed fields (`id`, `loan`, `allowedTransitions`, ...) take the domain object as their parent.
Where a resolver hands a domain object on, `cast` says which GraphQL type serves it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, cast

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
from schema.descriptions import (
    AMOUNT,
    CENTS,
    CURSOR,
    EDGES,
    EVENT_ID,
    GLOBAL_ID,
    INSTALLMENT_ID,
    LOAN_ID,
    PAGE_INFO,
    PAYMENT_ID,
    USER_ID,
    After,
    Before,
    First,
    Last,
)
from schema.enums import ActorKind, PaymentMethod, PaymentProcess, PaymentStatus

__all__ = [
    "LoanType",
    "Node",
    "PageInfo",
    "PaymentConnection",
    "PaymentEventConnection",
    "PaymentEventType",
    "PaymentType",
    "page_info",
]

Info = strawberry.Info[Context, None]


@strawberry.interface(description="An object with a globally unique, opaque id.")
class Node:
    id: strawberry.ID = strawberry.field(description=GLOBAL_ID)


@strawberry.federation.type(
    name="Installment",
    keys=[Key(fields=FieldSet("installmentId"), resolvable=False)],
    description="An installment of a loan, which the loans service resolves.",
)
class InstallmentType:
    # Not `id`: Relay takes every `id` for a global one (a Node's), and an installment's id is
    # the loans service's own.
    installment_id: strawberry.ID = strawberry.field(description=INSTALLMENT_ID)


@strawberry.type(
    name="PaymentApplication",
    description="A part of a completed payment's amount, applied to one installment of its loan.",
)
class PaymentApplicationType:
    payment_id: strawberry.ID = strawberry.field(description="The id of the payment applied.")
    installment_id: strawberry.ID = strawberry.field(description=INSTALLMENT_ID)
    amount_cents: int = strawberry.field(
        description=f"The part of the payment's amount applied to the installment, {CENTS}."
    )
    payment_date: datetime = strawberry.field(
        description="When it was applied: the payment's completion time."
    )

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
    id: strawberry.ID = strawberry.field(resolver=_loan_id, description=GLOBAL_ID)
    loan_id: strawberry.ID = strawberry.field(description=LOAN_ID)
    user_id: strawberry.ID = strawberry.field(description=USER_ID)

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return isinstance(obj, LoanRef)

    @strawberry.field(description="The loan's payments, newest first.")
    async def payments(
        self,
        root: strawberry.Parent[LoanRef],
        info: Info,
        status: Annotated[
            PaymentStatus | None,
            strawberry.argument(description="Only the payments in this status; omitted, all."),
        ] = None,
        first: First = None,
        after: After = None,
        last: Last = None,
        before: Before = None,
    ) -> PaymentConnection:
        page = await queries.loan_payments(
            info.context, root, status=status, first=first, after=after, last=last, before=before
        )
        return PaymentConnection.from_page(page)


@strawberry.type(
    name="RetryEligibility",
    description=(
        "Whether a payment in RETRY may be presented again now, how many presentments are "
        "left, and (ACH) until when."
    ),
)
class RetryEligibilityType:
    eligible: bool = strawberry.field(
        description="Whether it may be presented again now (only a payment in RETRY may)."
    )
    attempts_remaining: int = strawberry.field(description="Presentments left of the maximum.")
    deadline: datetime | None = strawberry.field(
        description="ACH: the end of the 180-day re-presentment window; null before one."
    )
    reason: str | None = strawberry.field(description="Why the payment is not eligible.")


@strawberry.federation.type(name="Payment", keys=["id"], description="A payment against a loan.")
class PaymentType(Node):
    id: strawberry.ID = strawberry.field(resolver=_payment_id, description=GLOBAL_ID)
    payment_id: strawberry.ID = strawberry.field(description=PAYMENT_ID)
    user_id: strawberry.ID = strawberry.field(description=USER_ID)
    loan_id: strawberry.ID = strawberry.field(description=LOAN_ID)
    amount_cents: int = strawberry.field(description=AMOUNT)
    status: PaymentStatus = strawberry.field(
        description="Where it is in its lifecycle; `allowedTransitions` says where it may go."
    )
    method: PaymentMethod = strawberry.field(
        description="How the money moves; it decides which statuses the payment may reach."
    )
    process: PaymentProcess = strawberry.field(
        description="What started it: the user, autopay, or a retry."
    )
    confirmation_id: str | None = strawberry.field(
        description=(
            "The payments service's id for its presentment; null until presented. No two "
            "payments of a user hold the same one."
        )
    )
    account_last_four: str | None = strawberry.field(
        description="The last four digits of the paying account or card; never more of it."
    )
    intended_installment_id: strawberry.ID | None = strawberry.field(
        description=(
            "The installment it is meant for: completed without `applications`, it pays this one."
        )
    )
    attempts: int = strawberry.field(
        description="Times the payment was presented to the payments service."
    )
    applications: list[PaymentApplicationType] = strawberry.field(
        description=(
            "How its amount was applied to installments (at most 12), at completion; empty before."
        )
    )
    update_reason: str | None = strawberry.field(description="Why the last write happened.")
    return_code: str | None = strawberry.field(description="The ACH return code, once returned.")
    version: int = strawberry.field(description="Rises by one with every write.")
    created_at: datetime = strawberry.field(description="When it was created.")
    updated_at: datetime = strawberry.field(description="When it was last written.")
    first_presented_at: datetime | None = strawberry.field(
        description="When the payment was first presented to the payments service."
    )
    completed_at: datetime | None = strawberry.field(
        description="When it was completed; null until then."
    )

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return isinstance(obj, Payment)

    @strawberry.field(description="The loan it is a payment against.")
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
        first: First = None,
        after: After = None,
        last: Last = None,
        before: Before = None,
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
    to_status: PaymentStatus = strawberry.field(description="The status the write left it in.")
    at: datetime = strawberry.field(description="When the write happened.")
    reason: str = strawberry.field(description="Why the write happened: the move's `reason`.")
    return_code: str | None = strawberry.field(description="The ACH return this write recorded.")
    confirmation_id: str | None = strawberry.field(
        description="The confirmation id this write gave the payment."
    )
    actor_kind: ActorKind = strawberry.field(
        description="Who wrote: a customer, a service, or one of the service's jobs."
    )
    actor_id: strawberry.ID | None = strawberry.field(
        resolver=_event_actor_id,
        description=(
            "Who wrote (a token's subject, or a job's name); null when a customer reads it "
            "(who inside the lender acted is internal)."
        ),
    )
    request_id: str | None = strawberry.field(description="The API request that wrote, if any.")

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return isinstance(obj, PaymentEvent)

    @strawberry.field(description=EVENT_ID)
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


@strawberry.type(description="Where a page is in its list, and the cursors to page on from it.")
class PageInfo:
    has_next_page: bool = strawberry.field(
        description=(
            "Paging forward (`first`, `after`): whether edges come after this page. Paging "
            "backward (`last`, `before`): whether `before` was given, since the edge it names "
            "came after this page. `hasPreviousPage` is its mirror."
        )
    )
    has_previous_page: bool = strawberry.field(
        description=(
            "Paging backward (`last`, `before`): whether edges come before this page. Paging "
            "forward (`first`, `after`): whether `after` was given, since the edge it names came "
            "before this page. `hasNextPage` is its mirror: exact forward; backward, whether "
            "`before` was given."
        )
    )
    start_cursor: str | None = strawberry.field(
        description=(
            "The first edge's cursor, to page backward with `before`; null on no edges. A "
            "backward page cut short by its read limit (fewer edges than `last`, "
            "`hasPreviousPage` true): where the read stopped, which resumes exactly."
        )
    )
    end_cursor: str | None = strawberry.field(
        description=(
            "The last edge's cursor, to page forward with `after`; null on no edges. A page cut "
            "short by its read limit (fewer edges than `first`, `hasNextPage` true, as a filter "
            "that leaves most items out can make it): where the read stopped, which resumes "
            "exactly."
        )
    )


def page_info(page: PageOf[Any]) -> PageInfo:
    start = page.start_cursor
    return PageInfo(
        has_next_page=page.has_next_page,
        has_previous_page=page.has_previous_page,
        start_cursor=start if start is not None else page.edges[0].cursor if page.edges else None,
        end_cursor=page.end_cursor,
    )


# Edges are served as the datasource's edges themselves: a cursor is signed only if asked for.
@strawberry.type(name="PaymentEdge", description="A payment in a page, with its cursor.")
class PaymentEdge:
    cursor: str = strawberry.field(description=CURSOR)
    node: PaymentType = strawberry.field(description="The payment.")


@strawberry.type(name="PaymentConnection", description="A page of payments.")
class PaymentConnection:
    edges: list[PaymentEdge] = strawberry.field(description=EDGES)
    page_info: PageInfo = strawberry.field(description=PAGE_INFO)

    @classmethod
    def from_page(cls, page: Page) -> PaymentConnection:
        return cls(edges=cast(list[PaymentEdge], page.edges), page_info=page_info(page))


@strawberry.type(name="PaymentEventEdge", description="A payment event in a page, with its cursor.")
class PaymentEventEdge:
    cursor: str = strawberry.field(description=CURSOR)
    node: PaymentEventType = strawberry.field(description="The event.")


@strawberry.type(name="PaymentEventConnection", description="A page of payment events.")
class PaymentEventConnection:
    edges: list[PaymentEventEdge] = strawberry.field(description=EDGES)
    page_info: PageInfo = strawberry.field(description=PAGE_INFO)
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
