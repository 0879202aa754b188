"""One endpoint's deliveries (SPEC §18): a window of up to `max_in_flight` attempts at once.

Events come in feed order (`server.webhook_worker.delivery` reads the feed for every endpoint at
once). Each wanted event is POSTed as soon as the window has room; what an attempt leads to (its
record, the retry it schedules) is written plainly, in batches, and only then does the endpoint's
position move, once per batch, past the contiguous prefix of events delivered or scheduled for
retry. So an instance killed at any moment leaves the position before every event whose outcome is
not stored, and what its successor sends again is at most the window (at least once, the same
`webhook-id`). Due retries are items of their own, so one failing event never holds back the rest.

An endpoint that answers no 2xx to any event for the retry schedule's whole length is disabled
(`DISABLED`), and the dispatcher tells the endpoints that asked for that operational event.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

import orjson

from datasource import (
    GSI4SK,
    Commit,
    DueRetry,
    EndpointState,
    Item,
    WrittenPlainly,
    delivery_item,
    retry_item,
)
from domain.errors import PaymentsError
from domain.history import PaymentEvent
from domain.validation import format_timestamp
from domain.webhooks import (
    EndpointStatus,
    RetrySchedule,
    WebhookDelivery,
    WebhookEndpoint,
    event_id,
    event_of_id,
    event_type,
    signature,
)
from resolvers.webhooks import event_body

if TYPE_CHECKING:
    from datasource import PaymentStore

__all__ = ["EndpointWindow"]

log = logging.getLogger("loc_payments.webhooks")

# Events an endpoint holds read ahead of its window.
READ_AHEAD = 100
# A batch's outcomes are written once this many are waiting, or this long after the first.
FLUSH_BATCH = 25
FLUSH_LINGER = 0.1
# A position moved only past events an endpoint does not want is stored at most this often.
SKIPPED_COMMIT_SECONDS = 10.0


class Answered(Protocol):
    @property
    def status_code(self) -> int | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def body(self) -> str | None: ...
    @property
    def duration_ms(self) -> int: ...


class Receivers(Protocol):
    """What POSTs to receivers (`server.webhook_worker.delivery.Receivers`)."""

    async def post(self, url: str, *, body: bytes, headers: dict[str, str]) -> Answered: ...


@dataclass(slots=True)
class _Entry:
    key: Item
    sends: bool
    written: bool = False


@dataclass(slots=True)
class _Outcome:
    entry: _Entry | None  # None: a retry's
    retry: DueRetry | None = None
    writes: WrittenPlainly = field(default_factory=WrittenPlainly)
    delivery: WebhookDelivery | None = None
    given_up: bool = False
    retry_due: datetime | None = None  # when the retry it schedules is due


class EndpointWindow:
    def __init__(
        self,
        state: EndpointState,
        *,
        store: PaymentStore,
        receivers: Receivers,
        schedule: RetrySchedule,
        max_in_flight: int,
        clock: Callable[[], datetime],
        owner: str,
        lease: Callable[[], Awaitable[bool]],
        on_disabled: Callable[[WebhookEndpoint, datetime, str], Awaitable[None]],
        rng: random.Random,
        observe: Callable[[str], None],
        read_more: Callable[[], None] = lambda: None,
    ) -> None:
        self.state = state
        self.endpoint_id = state.endpoint.endpoint_id
        self._store = store
        self._webhooks = store.webhooks
        self._receivers = receivers
        self._schedule = schedule
        self._max = max_in_flight
        self._clock = clock
        self._owner = owner
        self._lease = lease
        self._on_disabled = on_disabled
        self._rng = rng
        self._observe = observe
        # Asks the dispatcher for a read when the events read ahead run low after a full page.
        self._read_more = read_more
        self._read_ahead_full = False
        # Where the stored position starts (an enabling from now changes it: then this stops).
        self._feed_from = state.feed_from
        self.fetched = state.position
        self._fetched_key = state.feed_key
        self._queue: deque[tuple[Item, PaymentEvent]] = deque()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._open = 0  # sends and retries started and not yet stored: the window
        self._due: deque[DueRetry] = deque()
        self._retries_busy: set[str] = set()
        # Retries stored as done while a read of the retries is under way: busy until it ends,
        # for it may have found their records before they were deleted (not sent twice).
        self._reading_retries = False
        self._done_while_reading: set[str] = set()
        self._check_retries_at: datetime | None = clock()
        self._retries_seen = state.retries_changed
        self._outcomes: list[_Outcome] = []
        self._failing_since = state.failing_since
        self._last_failure = ""
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        self._flush_wanted = asyncio.Event()
        self._skipped_since: float | None = None
        # The position reached and not yet stored.
        self._reached: Item | None = None
        self.stopped = False

    @property
    def wants_events(self) -> bool:
        return not self.stopped and len(self._queue) < READ_AHEAD

    def read_from(self) -> tuple[str, Item | None]:
        """The feed's lower bound and the last event taken: where its next read starts."""
        return self._feed_from, self._fetched_key

    def offer(self, events: list[tuple[Item, PaymentEvent]]) -> None:
        """Events read from the feed: those after the last taken are queued."""
        for key, event in events:
            position = key[GSI4SK]["S"]
            if position > self.fetched:
                self._queue.append((key, event))
                self.fetched, self._fetched_key = position, key
        self._read_ahead_full = len(self._queue) >= READ_AHEAD
        self._changed.set()

    def update(self, state: EndpointState) -> None:
        """The endpoint as the dispatcher last listed it: its secrets, types and marks."""
        self.state = dataclasses.replace(state, failing_since=self._failing_since)
        if state.feed_from != self._feed_from or state.endpoint.status is EndpointStatus.DISABLED:
            self.stop()
        if state.retries_changed != self._retries_seen:
            self._retries_seen = state.retries_changed
            self._check_retries_at = self._clock()
        self._changed.set()

    def stop(self) -> None:
        self.stopped = True
        self._changed.set()

    async def run(self) -> None:
        flusher = asyncio.create_task(self._flusher(), name=f"webhooks {self.endpoint_id} flush")
        try:
            while not self.stopped and not flusher.done():
                await self._start_what_fits()
                await self._wait()
        except PaymentsError as error:
            # The dispatcher takes the endpoint again on its next look, from the stored position.
            log.warning("webhook endpoint %s paused: %s", self.endpoint_id, error)
        finally:
            self.stopped = True
            for task in (*self._tasks, flusher):
                task.cancel()
            await asyncio.gather(*self._tasks, flusher, return_exceptions=True)

    def _room(self) -> int:
        return self._max - self._open

    async def _start_what_fits(self) -> None:
        now = self._clock()
        check = self._check_retries_at
        if check is not None and now >= check and self._room() > 0 and not self._due:
            await self._load_retries(now)
        while self._room() > 0 and self._due:
            self._start(self._retry(self._due.popleft()))
        while self._room() > 0 and self._queue and not self.stopped:
            key, event = self._queue.popleft()
            wanted = self.state.endpoint.wants(event_type(event.from_status, event.to_status))
            entry = _Entry(key, sends=wanted, written=not wanted)
            self._entries[key[GSI4SK]["S"]] = entry
            if not wanted:
                if self._skipped_since is None:
                    self._skipped_since = time.monotonic()
                continue
            if not await self._lease():
                self.stop()
                return
            self._start(self._first_attempt(entry, event))
        if self._read_ahead_full and len(self._queue) < READ_AHEAD // 2:
            self._read_ahead_full = False
            self._read_more()
        skipped = self._skipped_since
        if skipped is not None and time.monotonic() - skipped >= SKIPPED_COMMIT_SECONDS:
            self._flush_wanted.set()
        if self._disabling(now) is not None:
            self._flush_wanted.set()

    def _start(self, work: Awaitable[None]) -> None:
        self._open += 1
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _wait(self) -> None:
        timeout = SKIPPED_COMMIT_SECONDS
        now = self._clock()
        if self._check_retries_at is not None:
            timeout = min(timeout, (self._check_retries_at - now).total_seconds())
        if self._failing_since is not None:
            until = self._failing_since + self._schedule.length - now
            timeout = min(timeout, until.total_seconds())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(timeout, 0.01)):
                await self._changed.wait()
        self._changed.clear()

    async def _load_retries(self, now: datetime) -> None:
        """The retries due now, and when the next is due (the first not due yet)."""
        limit = self._room() + len(self._retries_busy) + 1
        # Cleared before the read, not after: a retry whose record lands while the read is
        # under way (a batch written meanwhile) may be missing from it, and its flush sets the
        # check again, which this read must not overwrite.
        self._check_retries_at = None
        self._reading_retries = True
        try:
            found = await self._webhooks.retries(self.endpoint_id, limit=limit)
        finally:
            self._reading_retries = False
        if len(found) == limit:
            self._check_retries_by(now)
        for retry in found:
            if retry.sort_key in self._retries_busy:
                continue
            if retry.due > now:
                self._check_retries_by(retry.due)
                break
            self._retries_busy.add(retry.sort_key)
            self._due.append(retry)
        self._retries_busy -= self._done_while_reading
        self._done_while_reading.clear()

    def _retry_stored(self, sort_key: str) -> None:
        """A retry's record deleted (its attempt stored): no longer busy, but after the read of
        the retries under way, which may have found the record before it went."""
        if self._reading_retries:
            self._done_while_reading.add(sort_key)
        else:
            self._retries_busy.discard(sort_key)

    def _check_retries_by(self, at: datetime) -> None:
        """Read the stored retries again at `at` at the latest."""
        if self._check_retries_at is None or at < self._check_retries_at:
            self._check_retries_at = at

    async def _first_attempt(self, entry: _Entry, event: PaymentEvent) -> None:
        identifier = event_id(event.ref, event.version)
        kind = event_type(event.from_status, event.to_status)
        outcome = _Outcome(entry)
        await self._send(outcome, identifier, kind, orjson.dumps(event_body(event)), 1, None)
        self._done(outcome)

    async def _retry(self, retry: DueRetry) -> None:
        outcome = _Outcome(None, retry=retry)
        outcome.writes.deletes.append(retry.sort_key)
        try:
            if retry.body is not None:
                kind = orjson.loads(retry.body)["type"]
                await self._send(
                    outcome, retry.event_id, kind, retry.body.encode(), retry.attempt, retry.body
                )
            else:
                event = await self._payment_event(retry)
                if event is not None:
                    kind = event_type(event.from_status, event.to_status)
                    body = orjson.dumps(event_body(event))
                    await self._send(outcome, retry.event_id, kind, body, retry.attempt, None)
        except PaymentsError as error:
            log.warning("webhook retry of %s waits: %s", retry.event_id, error)
            self._open -= 1
            self._retries_busy.discard(retry.sort_key)
            self._check_retries_by(self._clock() + timedelta(seconds=1))
            return
        self._done(outcome)

    async def _payment_event(self, retry: DueRetry) -> PaymentEvent | None:
        """The event a retry names, with the payment its body carries; None: it is not to be
        sent (gone, or older than an enabling from now and not a resend)."""
        ref, version = event_of_id("eventId", retry.event_id)
        event = await self._store.event(ref, version)
        if event is None:
            return None
        since = self.state.delivers_from
        if since is not None and retry.attempt > 1 and event.at < since:
            return None
        if event.payment is None:
            payment = await self._store.get(event.ref)
            return None if payment is None else dataclasses.replace(event, payment=payment)
        return event

    async def _send(
        self,
        outcome: _Outcome,
        identifier: str,
        kind: str,
        body: bytes,
        attempt: int,
        kept_body: str | None,
    ) -> None:
        """POST an event once; its record, and the retry it schedules, into `outcome`."""
        state = self.state
        at = self._clock()
        timestamp = int(time.time())
        headers = {
            "content-type": "application/json",
            "webhook-id": identifier,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": signature(state.signing_secrets(at), identifier, timestamp, body),
        }
        answer = await self._receivers.post(state.endpoint.url, body=body, headers=headers)
        delivery = WebhookDelivery(
            event_id=identifier,
            event_type=kind,
            attempt=attempt,
            at=at,
            duration_ms=answer.duration_ms,
            status_code=answer.status_code,
            error=answer.error,
            response_body=answer.body,
        )
        outcome.delivery = delivery
        outcome.writes.puts.append(delivery_item(self.endpoint_id, delivery))
        if delivery.succeeded:
            self._observe("delivered")
            return
        self._last_failure = answer.error or f"HTTP {answer.status_code}"
        delay = self._schedule.delay_after(attempt, self._rng)
        self._observe("retrying" if delay is not None else "given_up")
        if delay is None:
            log.warning("webhook event %s given up for endpoint %s", identifier, self.endpoint_id)
            outcome.given_up = True
            return
        log.info(
            "webhook event %s to endpoint %s failed (attempt %d: %s); retried in %.1f s",
            identifier,
            self.endpoint_id,
            attempt,
            self._last_failure,
            delay,
        )
        due = at + timedelta(seconds=delay)
        outcome.writes.puts.append(
            retry_item(self.endpoint_id, identifier, due, attempt + 1, body=kept_body)
        )
        # The retries are read for it once its record is stored (`_flush`): a read before
        # then would not find it.
        outcome.retry_due = due

    def _done(self, outcome: _Outcome) -> None:
        self._outcomes.append(outcome)
        self._flush_wanted.set()

    async def _flusher(self) -> None:
        while True:
            await self._flush_wanted.wait()
            # Lingering gathers a bigger batch (fewer position commits), but a full window starts
            # nothing until its places are stored: then no wait.
            if len(self._outcomes) < FLUSH_BATCH and self._room() > 0:
                await asyncio.sleep(FLUSH_LINGER)
            self._flush_wanted.clear()
            try:
                flushed = await self._flush()
            except PaymentsError as error:
                # The dispatcher takes the endpoint again on its next look, from the stored
                # position: what this batch sent is sent again (at most the window).
                log.warning("webhook endpoint %s paused: %s", self.endpoint_id, error)
                flushed = False
            if not flushed:
                self.stop()
                return
            self._changed.set()

    async def _flush(self) -> bool:
        """Write the outcomes waiting, then move the position past the prefix now stored;
        False when the lease (or the position) is no longer this window's."""
        outcomes, self._outcomes = self._outcomes, []
        writes = WrittenPlainly()
        for outcome in outcomes:
            writes.puts += outcome.writes.puts
            writes.deletes += outcome.writes.deletes
        if writes.puts or writes.deletes:
            await self._webhooks.write_plainly(self.endpoint_id, writes)
        for outcome in outcomes:
            if outcome.retry_due is not None:
                self._check_retries_by(outcome.retry_due)
            if outcome.entry is not None:
                outcome.entry.written = True
            else:
                self._open -= 1
                if outcome.retry is not None:
                    self._retry_stored(outcome.retry.sort_key)
        while self._entries:
            position, entry = next(iter(self._entries.items()))
            if not entry.written:
                break
            del self._entries[position]
            self._reached = entry.key
            if entry.sends:
                self._open -= 1
        return await self._commit(outcomes)

    async def _commit(self, outcomes: list[_Outcome]) -> bool:
        last = self._reached
        deliveries = [outcome.delivery for outcome in outcomes if outcome.delivery is not None]
        succeeded = any(delivery.succeeded for delivery in deliveries)
        failures = [delivery.at for delivery in deliveries if not delivery.succeeded]
        if succeeded:
            self._failing_since = None
        elif failures and self._failing_since is None:
            self._failing_since = min(failures)
        now = self._clock()
        disabled = self._disabling(now)
        current = self.state.endpoint.status
        status: EndpointStatus | None = None
        if disabled is not None:
            status = EndpointStatus.DISABLED
        elif any(outcome.given_up for outcome in outcomes):
            status = EndpointStatus.FAILING
        elif succeeded and current is EndpointStatus.FAILING:
            status = EndpointStatus.ENABLED
        only_skipped = not outcomes and last is not None
        if last is None and status is None and not deliveries:
            return True
        skipped = self._skipped_since
        # Nothing sent: storing the position now and then is enough (a kill re-reads them).
        if (
            only_skipped
            and skipped is not None
            and time.monotonic() - skipped < SKIPPED_COMMIT_SECONDS
        ):
            return True
        commit = Commit(
            feed_key=last,
            status=status,
            failing_since=self._failing_since,
            succeeded=succeeded,
            disabled=disabled,
        )
        if not await self._webhooks.commit(
            self.endpoint_id, owner=self._owner, feed_from=self._feed_from, commit=commit
        ):
            return False
        self._skipped_since = None
        self._reached = None
        if status is not None:
            endpoint = dataclasses.replace(self.state.endpoint, status=status)
            self.state = dataclasses.replace(self.state, endpoint=endpoint)
        if disabled is not None:
            # Told before the window stops, and told whole: the dispatcher's next listing sees
            # the endpoint DISABLED and stops the window, which cancels this flush.
            await asyncio.shield(self._on_disabled(self.state.endpoint, *disabled))
            self.stop()
        return True

    def _disabling(self, now: datetime) -> tuple[datetime, str] | None:
        """When and why to disable the endpoint now: no 2xx for the schedule's length."""
        since = self._failing_since
        if since is None or now - since < self._schedule.length:
            return None
        return now, (
            f"no 2xx answer to any event since {format_timestamp(since)} "
            f"({self._schedule.length} of retries); the last attempt: {self._last_failure}"
        )
