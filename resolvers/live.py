"""Live updates: the events of this instance's change feed, fanned out to its subscribers.

Every instance reads the table's change feed (`datasource.streams`) and publishes each stored
event here; each subscription holds a bounded queue of the events that match its filter (user,
loan, payment). A subscriber that falls `queue_size` events behind is dropped, never allowed to
grow memory: its connection is closed with `SLOW_CONSUMER` (`Subscriber.close`), and a client
resubscribes with `afterVersion` to pick up where it was.

`payment_events` is what the GraphQL subscription yields: with a payment and `afterVersion`, the
stored events after that version first (from the history, strongly consistent), then the live
ones, deduplicated by version, so nothing is missed or repeated across the switch. The
subscription registers with the hub before it reads the history: an event stored meanwhile is
either in the history read or in the queue, and a version already sent is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from domain import validation
from domain.errors import InvalidInput
from domain.history import PaymentEvent
from domain.payment import PaymentRef
from resolvers.context import Context

logger = logging.getLogger("loc_payments.live")

# The WebSocket close code of a subscriber that fell too far behind (an application code, in
# graphql-transport-ws's 4000-4999 range, unused by the protocol itself).
SLOW_CONSUMER_CODE = 4413
SLOW_CONSUMER_REASON = "subscriber too slow: resubscribe with afterVersion"
# One history page per read while replaying.
REPLAY_PAGE = 100


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Which events a subscription wants; None matches any value."""

    user_id: str | None = None
    loan_id: str | None = None
    payment_id: str | None = None

    def matches(self, event: PaymentEvent) -> bool:
        return (
            (self.user_id is None or self.user_id == event.user_id)
            and (self.loan_id is None or self.loan_id == event.loan_id)
            and (self.payment_id is None or self.payment_id == event.payment_id)
        )


class Subscriber:
    """One subscription's queue of matching events."""

    def __init__(
        self,
        wanted: EventFilter,
        *,
        queue_size: int,
        close: Callable[[int, str], Awaitable[None]] | None,
    ) -> None:
        self.wanted = wanted
        self._queue: asyncio.Queue[PaymentEvent | None] = asyncio.Queue(maxsize=queue_size)
        self._close = close
        self._closing: asyncio.Future[None] | None = None
        self.dropped = False

    def offer(self, event: PaymentEvent) -> None:
        if self.dropped or not self.wanted.matches(event):
            return
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self._drop()

    def _drop(self) -> None:
        self.dropped = True
        # Wake the reader, whose queue is full: the end marker replaces the oldest event.
        self._queue.get_nowait()
        self._queue.put_nowait(None)
        logger.warning("dropped a subscriber %s events behind", self._queue.maxsize)
        if self._close is not None:
            self._closing = asyncio.ensure_future(
                self._close(SLOW_CONSUMER_CODE, SLOW_CONSUMER_REASON)
            )

    def end(self) -> None:
        """No more events: the subscription completes once it has sent those queued."""
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(None)

    async def next(self) -> PaymentEvent | None:
        """The next event, or None once the subscriber was dropped."""
        return await self._queue.get()


class EventHub:
    """This instance's subscribers, and the publishing of each event to those it matches."""

    def __init__(self, *, queue_size: int) -> None:
        self._queue_size = queue_size
        self._subscribers: set[Subscriber] = set()

    def publish(self, event: PaymentEvent) -> None:
        for subscriber in tuple(self._subscribers):
            subscriber.offer(event)

    def subscribe(
        self, wanted: EventFilter, close: Callable[[int, str], Awaitable[None]] | None = None
    ) -> Subscriber:
        subscriber = Subscriber(wanted, queue_size=self._queue_size, close=close)
        self._subscribers.add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.discard(subscriber)

    def close_all(self) -> None:
        """End every subscription: each sends `complete` (the service is stopping)."""
        for subscriber in tuple(self._subscribers):
            subscriber.end()


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
        await asyncio.Event().wait()
    subscriber = hub.subscribe(wanted, context.close_connection)
    try:
        # The last version sent of each payment: a live event at or below it is a repeat.
        sent: dict[str, int] = {}
        if replay_from is not None:
            ref, version = replay_from
            sent[ref.payment_id] = version
            async for stored in _stored_after(context, ref, version):
                sent[ref.payment_id] = stored.version
                yield stored
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
