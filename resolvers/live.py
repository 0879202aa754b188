"""Live updates: the events of this instance's change feed, fanned out to its subscribers.

Every instance reads the table's change feed (`datasource.streams`) and publishes each stored
event here; each subscription holds a bounded queue of the events that match its filter (user,
loan, payment). A subscriber that falls `queue_size` events behind is dropped, never allowed to
grow memory: its connection is closed with `SLOW_CONSUMER` (`Subscriber.close`), and a client
resubscribes with `afterVersion` to pick up where it was.

`payment_events` is what the GraphQL subscription yields, and where it starts (SPEC §10):

    afterVersion     the payment's stored events after that version (its history, strongly
                     consistent), then the live ones, deduplicated by version: nothing is missed
                     or repeated across the switch
    a user named     (every customer's; a service's with `userId`) the events stored after the
                     subscription was accepted: it registers with the hub, then reads the
                     versions stored of the payments its filter covers (strongly consistent),
                     and skips every live event at or below its payment's version there
    no user          (a service's, every user's) the events the change feed reads after it was
                     accepted: it registers pending, and takes events once the feed has finished
                     a round of reads begun after it registered (`EventHub.round_finished`), so
                     what the stream held when it subscribed is behind it

The feed reads late (up to its poll interval), so events stored just before a subscription are
still to come when it registers: these are what the versions, or the round, leave out. With a
user named this is exact; with none it is exact where the stream shows a write once it is
stored, as DynamoDB Local's does (DynamoDB's shows it in near-real time).
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
    """This instance's subscribers, and the publishing of each event to those it matches.

    The feed tells it when each round of reads begins and when a round has published all it
    read up to the stream's head (`round_started`, `round_finished`): a subscriber that starts
    at the stream's head is pending until a round begun after it registered has finished."""

    def __init__(self, *, queue_size: int) -> None:
        self._queue_size = queue_size
        self._subscribers: set[Subscriber] = set()
        # Pending subscribers, with the number of rounds begun when each registered.
        self._pending: dict[Subscriber, int] = {}
        self._rounds_started = 0

    def publish(self, event: PaymentEvent) -> None:
        for subscriber in tuple(self._subscribers):
            subscriber.offer(event)

    def subscribe(
        self,
        wanted: EventFilter,
        close: Callable[[int, str], Awaitable[None]] | None = None,
        *,
        at_stream_head: bool = False,
    ) -> Subscriber:
        """A subscriber of the events published from now on; `at_stream_head`: of those the
        feed reads in rounds begun from now on."""
        subscriber = Subscriber(wanted, queue_size=self._queue_size, close=close)
        if at_stream_head:
            self._pending[subscriber] = self._rounds_started
        else:
            self._subscribers.add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.discard(subscriber)
        self._pending.pop(subscriber, None)

    def round_started(self) -> None:
        self._rounds_started += 1

    def round_finished(self) -> None:
        """The round last started has published everything the stream held when it began."""
        for subscriber, registered in tuple(self._pending.items()):
            if registered < self._rounds_started:
                del self._pending[subscriber]
                self._subscribers.add(subscriber)

    def close_all(self) -> None:
        """End every subscription: each sends `complete` (the service is stopping)."""
        for subscriber in (*self._subscribers, *self._pending):
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
    at_stream_head = replay_from is None and wanted.user_id is None
    subscriber = hub.subscribe(wanted, context.close_connection, at_stream_head=at_stream_head)
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
