"""What each query field does: check the caller, then read through the request's loaders."""

from __future__ import annotations

import asyncio

from datasource import BATCH_SIZE, HistoryPage, Page, PageOf
from domain.enums import PaymentStatus
from domain.errors import InvalidInput, NotFound
from domain.history import PaymentEvent
from domain.payment import LoanRef, Payment, PaymentRef
from resolvers.context import Context
from resolvers.loaders import ConfirmationKey, HistoryKey, LoanPageKey
from resolvers.node_ids import decode_node_id

__all__ = [
    "event_actor_id",
    "event_payment",
    "loan",
    "loan_payments",
    "node",
    "node_by_ref",
    "nodes",
    "payment",
    "payment_by_confirmation",
    "payment_history",
    "payments_by_status",
]

# One BatchGetItem's worth.
MAX_NODES = BATCH_SIZE
# Another user's list reads as an empty one: the same answer as a loan with no payments.
EMPTY_PAGE: Page = PageOf(edges=[], has_next_page=False, end_cursor=None)
EMPTY_HISTORY: HistoryPage = PageOf(edges=[], has_next_page=False, end_cursor=None)


async def payment(
    context: Context, *, user_id: str | None, loan_id: str, payment_id: str
) -> Payment | None:
    ref = PaymentRef.checked(context.owner(user_id), loan_id, payment_id)
    if not context.caller().sees(ref.user_id):
        return None
    return await context.loaders.payment(ref)


def loan(context: Context, *, user_id: str | None, loan_id: str) -> LoanRef:
    return LoanRef.checked(context.owner(user_id), loan_id)


async def loan_payments(
    context: Context,
    loan: LoanRef,
    *,
    status: PaymentStatus | None,
    first: int | None,
    after: str | None,
    last: int | None = None,
    before: str | None = None,
) -> Page:
    if not context.caller().sees(loan.user_id):
        return EMPTY_PAGE
    key = LoanPageKey(loan, status, first, after, last, before)
    return await context.loaders.loan_pages.load(key)


async def payment_history(
    context: Context,
    payment: Payment,
    *,
    first: int | None,
    after: str | None,
    last: int | None = None,
    before: str | None = None,
) -> HistoryPage:
    # The payment was reached through a field that checked the caller; checked again here, so
    # that no path to a payment can ever reach another user's history.
    if not context.caller().sees(payment.user_id):
        return EMPTY_HISTORY
    key = HistoryKey(payment.ref, first, after, last, before)
    return await context.loaders.histories.load(key)


async def event_payment(context: Context, event: PaymentEvent) -> Payment:
    """An event's payment, as stored now (an event only reaches a caller who sees it)."""
    payment = await context.loaders.payment(event.ref)
    if payment is None:  # payments are never deleted
        raise NotFound()
    return payment


def event_actor_id(context: Context, event: PaymentEvent) -> str | None:
    """Who inside the lender acted is internal: a customer sees the kind of actor, not its id."""
    return event.actor_id if context.caller().is_service else None


async def payment_by_confirmation(
    context: Context, *, user_id: str | None, confirmation_id: str
) -> Payment | None:
    key = ConfirmationKey.checked(context.owner(user_id), confirmation_id)
    if not context.caller().sees(key.user_id):
        return None
    return await context.loaders.confirmations.load(key)


async def payments_by_status(
    context: Context,
    *,
    status: PaymentStatus,
    first: int | None,
    after: str | None,
    last: int | None = None,
    before: str | None = None,
) -> Page:
    context.service()
    page = await context.store.payments_by_status(
        status=status,
        first=first,
        after=after,
        last=last,
        before=before,
        fields=context.loaders.payment_fields,
    )
    context.loaders.remember([edge.node for edge in page.edges])
    return page


async def nodes(context: Context, *, node_ids: list[str]) -> list[Payment | LoanRef | None]:
    """Many nodes at once; their payments are read in one batch by the request's loader."""
    context.caller()
    if len(node_ids) > MAX_NODES:
        raise InvalidInput("ids", f"at most {MAX_NODES} ids in one request")
    refs = []
    for index, node_id in enumerate(node_ids):
        try:
            refs.append(decode_node_id(node_id))
        except InvalidInput as error:
            raise InvalidInput(f"ids[{index}]", error.message.removeprefix("id: ")) from None
    return list(await asyncio.gather(*(node_by_ref(context, ref) for ref in refs)))


async def node(context: Context, *, node_id: str) -> Payment | LoanRef | None:
    context.caller()
    return await node_by_ref(context, decode_node_id(node_id))


async def node_by_ref(context: Context, ref: PaymentRef | LoanRef) -> Payment | LoanRef | None:
    """What `ref` names, if the caller sees it: another user's reads as one that is missing."""
    if not context.caller().sees(ref.user_id):
        return None
    if isinstance(ref, LoanRef):
        return ref
    return await context.loaders.payment(ref)
