"""Live updates: where a subscription starts, and what it yields (the fan-out of this
instance's events to its subscribers is `resolvers.event_hub`).

`payment_events` is what the GraphQL subscription yields (SPEC §10). With `afterVersion`, the
payment's stored events after it, then the live ones, deduplicated by version. Otherwise, the
events stored after the subscription was accepted: with a user named it registers with the hub,
reads the stored versions of the payments it covers (strongly consistent) and skips every event
at or below them; with none (a service's, every user's) it waits until the change feed finishes
a round begun after it registered (`EventHub.round_finished`).

Why, and where it is exact: docs/live-updates.md ("From now, exactly").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from domain import validation
from domain.errors import InvalidInput
from domain.history import PaymentEvent
from domain.payment import PaymentRef
from resolvers.context import Context
from resolvers.event_hub import EventFilter

__all__ = ["payment_events"]

# One history page per read while replaying.
REPLAY_PAGE = 100


async def payment_events(
    context: Context,
    *,
    user_id: str | None,
    loan_id: str | None,
    payment_id: str | None,
    after_version: int | None,
) -> AsyncIterator[PaymentEvent]:
    """The events a caller may see, as they are stored; first the history after `after_version`
    (which needs a payment), then the live ones."""
    caller = context.caller()
    hub = context.live
    if hub is None:
        raise InvalidInput("paymentEvents", "live updates are off on this instance")
    wanted, replay_from = _checked(context, user_id, loan_id, payment_id, after_version)
    if wanted.user_id is not None and not caller.sees(wanted.user_id):
        # Another user's events read as a quiet stream, like another user's payment as null.
        hub.quiet += 1
        try:
            await asyncio.Event().wait()
        finally:
            hub.quiet -= 1
    at_stream_head = replay_from is None and wanted.user_id is None
    subscriber = hub.subscribe(wanted, context.close_connection, at_stream_head=at_stream_head)
    hub.opened(subscriber)
    try:
        # The last version sent of each payment, or stored when the subscription was accepted:
        # a live event at or below it is a repeat, or was stored before.
        sent: dict[str, int] = {}
        if replay_from is not None:
            ref, version = replay_from
            sent[ref.payment_id] = version
            async for stored in _stored_after(context, ref, version):
                sent[ref.payment_id] = stored.version
                yield stored
        elif wanted.user_id is not None:
            sent = await _stored_versions(context, wanted)
        hub.started(subscriber)
        while (live := await subscriber.next()) is not None:
            if live.version <= sent.get(live.payment_id, 0):
                continue
            if replay_from is not None:
                sent[live.payment_id] = live.version
            yield live
    finally:
        hub.unsubscribe(subscriber)


def _checked(
    context: Context,
    user_id: str | None,
    loan_id: str | None,
    payment_id: str | None,
    after_version: int | None,
) -> tuple[EventFilter, tuple[PaymentRef, int] | None]:
    caller = context.caller()
    if user_id is None and not caller.is_service:
        user_id = caller.user_id
    if after_version is None:
        if payment_id is not None and (user_id is None or loan_id is None):
            raise InvalidInput("paymentId", "needs userId and loanId")
        return _filter(user_id, loan_id, payment_id), None
    if after_version < 0:
        raise InvalidInput("afterVersion", "must be 0 or more")
    if payment_id is None or loan_id is None or user_id is None:
        raise InvalidInput("afterVersion", "needs userId, loanId and paymentId")
    ref = PaymentRef.checked(user_id, loan_id, payment_id)
    return EventFilter(ref.user_id, ref.loan_id, ref.payment_id), (ref, after_version)


def _filter(user_id: str | None, loan_id: str | None, payment_id: str | None) -> EventFilter:
    return EventFilter(
        None if user_id is None else validation.identifier("userId", user_id),
        None if loan_id is None else validation.identifier("loanId", loan_id),
        None if payment_id is None else validation.payment_id("paymentId", payment_id),
    )


async def _stored_versions(context: Context, wanted: EventFilter) -> dict[str, int]:
    """The versions stored now of the payments `wanted` covers (it names a user)."""
    assert wanted.user_id is not None
    if wanted.payment_id is not None:
        assert wanted.loan_id is not None  # `_checked`: a payment needs its loan
        ref = PaymentRef(wanted.user_id, wanted.loan_id, wanted.payment_id)
        payment = await context.store.get(ref, consistent=True)
        return {} if payment is None else {ref.payment_id: payment.version}
    return await context.store.stored_versions(user_id=wanted.user_id, loan_id=wanted.loan_id)


async def _stored_after(
    context: Context, ref: PaymentRef, version: int
) -> AsyncIterator[PaymentEvent]:
    after: str | None = None
    while True:
        page = await context.store.history(ref, first=REPLAY_PAGE, after=after, consistent=True)
        for edge in page.edges:
            if edge.node.version > version:
                yield edge.node
        if not page.has_next_page:
            return
        after = page.end_cursor
