"""The fan-out of this instance's live events to its subscribers (SPEC §10).

Every instance's feed (`server.live_feed`: the table's stream, or a fleet's broker) publishes each
stored event to its `EventHub`; each subscription holds a bounded queue of the events that match its
filter (user, loan, payment). A subscriber that falls `queue_size` events behind is dropped,
never allowed to grow memory: its connection is closed with `SLOW_CONSUMER_CODE`, its operation
not completed first (`Subscriber.interrupt`), and a client resubscribes with `afterVersion` to
pick up where it was.
Where a subscription starts is `resolvers.live`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from domain.history import PaymentEvent

__all__ = [
    "FEED_GAP_REASON",
    "SLOW_CONSUMER_CODE",
    "SLOW_CONSUMER_REASON",
    "EventFilter",
    "EventHub",
    "Subscriber",
]

logger = logging.getLogger("loc_payments.live")

# The WebSocket close code of a subscriber that fell too far behind (an application code, in
# graphql-transport-ws's 4000-4999 range, unused by the protocol itself).
SLOW_CONSUMER_CODE = 4413
SLOW_CONSUMER_REASON = "subscriber too slow: resubscribe with afterVersion"
# The same code when this instance's feed had a gap (SPEC §17: the broker restarted, failed over
# or trimmed what this instance had not read): what a subscriber missed is in DynamoDB.
FEED_GAP_REASON = "live updates were interrupted: resubscribe with afterVersion"


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
        logger.warning("dropped a subscriber %s events behind", self._queue.maxsize)
        self.interrupt(SLOW_CONSUMER_REASON)

    def interrupt(self, reason: str) -> None:
        """Stop it after the events queued before (as many as leave room for the end marker),
        and close its connection with `SLOW_CONSUMER_CODE`: the client resubscribes with
        `afterVersion` from the last version it got, so what it gets has no hole. It is not
        completed (`next`)."""
        if self.dropped:
            return
        self.dropped = True
        queued = [self._queue.get_nowait() for _ in range(self._queue.qsize())]
        for kept in queued[: self._queue.maxsize - 1]:
            self._queue.put_nowait(kept)
        self._queue.put_nowait(None)
        if self._close is not None:
            self._closing = asyncio.ensure_future(self._close(SLOW_CONSUMER_CODE, reason))

    def end(self) -> None:
        """No more events: the subscription completes once it has sent those queued."""
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(None)

    async def next(self) -> PaymentEvent | None:
        """The next event, or None once the subscription is over (the service is stopping).

        One interrupted with a connection to close is never over by itself: once its queued
        events are taken this waits until the connection's close cancels the operation. Were
        it over, the operation would send `complete` before the close, which tells graphql-ws
        and Apollo Client the stream ended normally: they would not resubscribe (SPEC §17)."""
        event = await self._queue.get()
        if event is None and self._closing is not None:
            await asyncio.Event().wait()
        return event


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
        # The subscriptions' own (`resolvers.live`, not the webhook dispatcher's): those still
        # finding where they start, those that have, and the quiet ones (`subscriptions`).
        self._starting: set[Subscriber] = set()
        self._started: set[Subscriber] = set()
        self.quiet = 0

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

    def opened(self, subscriber: Subscriber) -> None:
        """`subscriber` is a subscription's, finding where it starts (replaying, reading the
        stored versions)."""
        self._starting.add(subscriber)

    def started(self, subscriber: Subscriber) -> None:
        """`subscriber`'s subscription sends each event published to it from now on."""
        self._starting.discard(subscriber)
        self._started.add(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.discard(subscriber)
        self._pending.pop(subscriber, None)
        self._starting.discard(subscriber)
        self._started.discard(subscriber)

    def subscriptions(self) -> dict[str, int]:
        """This instance's open subscriptions by state (the metrics' gauge): `live` (each event
        stored from now on is sent), `starting` (replaying, reading where it starts, or at the
        stream's head until a round of the feed finishes), `quiet` (another user's events: none
        is sent); one dropped, its connection closing, is counted no more. graphql-transport-ws
        acknowledges a connection, never a subscription: this says when one is under way."""
        started = [subscriber for subscriber in self._started if not subscriber.dropped]
        waiting = sum(1 for subscriber in started if subscriber in self._pending)
        return {
            "live": len(started) - waiting,
            "starting": sum(1 for subscriber in self._starting if not subscriber.dropped) + waiting,
            "quiet": self.quiet,
        }

    def round_started(self) -> None:
        self._rounds_started += 1

    def round_finished(self) -> None:
        """The round last started has published everything the stream held when it began."""
        for subscriber, registered in tuple(self._pending.items()):
            if registered < self._rounds_started:
                del self._pending[subscriber]
                self._subscribers.add(subscriber)

    @property
    def waiting(self) -> bool:
        """Whether a subscriber at the stream's head waits for a round to finish."""
        return bool(self._pending)

    def interrupt_all(self, reason: str) -> None:
        """Close every subscription with `SLOW_CONSUMER_CODE` (the feed had a gap)."""
        for subscriber in (*self._subscribers, *self._pending):
            subscriber.interrupt(reason)
        if self._subscribers or self._pending:
            logger.warning(
                "closed %d subscriptions: %s", len(self._subscribers) + len(self._pending), reason
            )
        self._subscribers.clear()
        self._pending.clear()

    def close_all(self) -> None:
        """End every subscription: each sends `complete` (the service is stopping)."""
        for subscriber in (*self._subscribers, *self._pending):
            subscriber.end()
