"""Webhook delivery (SPEC §18): every instance runs a dispatcher; each endpoint is delivered by
the one instance that holds its lease (a conditional write on the endpoint's item).

Deliveries derive from the stored events, never from a stream that forgets: an endpoint keeps its
position in the events feed (GSI4). The dispatcher reads the feed once per poll interval for all
the endpoints it delivers (sooner when its live feed carried an event: when that event settles)
and hands each endpoint's window (`server.webhook_worker.window`) the events after its position; the
window keeps several attempts in flight and moves the position past what is stored. Each endpoint
has its own window: a slow receiver delays its own events only.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import ipaddress
import logging
import math
import random
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import aiohttp
import orjson
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from datasource import GSI4SK, settled_before
from domain.errors import InvalidInput, PaymentsError
from domain.hosts import Address
from domain.webhooks import (
    ENDPOINT_DISABLED,
    AddressLookup,
    EndpointStatus,
    RetrySchedule,
    WebhookEndpoint,
    checked_url,
    endpoint_disabled_event,
    forbidden_address,
)
from resolvers.event_hub import EventFilter, EventHub
from server.background import running
from server.webhook_worker.window import EndpointWindow

if TYPE_CHECKING:
    from datasource import PaymentStore
    from process.settings import Settings

__all__ = [
    "KEPT_ANSWER_BYTES",
    "Answer",
    "GuardedResolver",
    "Receivers",
    "WebhookDispatcher",
    "address_lookup",
    "webhook_delivery",
]

log = logging.getLogger("loc_payments.webhooks")

# The first bytes of an answer kept with its attempt.
KEPT_ANSWER_BYTES = 2048
# Events one read of the feed asks for.
FEED_PAGE = 100
USER_AGENT = "loc-payments-webhooks/1"


class GuardedResolver(AbstractResolver):
    """Name resolution that refuses a host resolving to an address a receiver may not have
    (`forbidden_address`): checked at each connection, so a name that once resolved to a public
    address cannot be turned to an internal one later (DNS rebinding)."""

    def __init__(self, inner: AbstractResolver | None = None) -> None:
        self._inner = inner or DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        for result in results:
            reason = forbidden_address(ipaddress.ip_address(result["host"]))
            if reason is not None:
                # With a strerror, which aiohttp's connection error quotes (the attempt's error).
                raise OSError(errno.EACCES, f"refused: {host} resolves to {reason}")
        return results

    async def close(self) -> None:
        await self._inner.close()


@dataclass(frozen=True, slots=True)
class Answer:
    status_code: int | None
    error: str | None
    body: str | None
    duration_ms: int


def address_lookup(dns: AbstractResolver | None = None) -> AddressLookup:
    """A receiver's name resolved at registration (`domain.webhooks.checked_receiver`) by the
    DNS deliveries use (`dns`, or the system's)."""

    async def lookup(host: str, port: int) -> list[Address]:
        resolver = dns or DefaultResolver()
        try:
            results = await resolver.resolve(host, port, socket.AF_UNSPEC)
        finally:
            if dns is None:
                await resolver.close()
        return [ipaddress.ip_address(result["host"]) for result in results]

    return lookup


class Receivers:
    """POSTs to receivers: one connection pool, no redirects followed, a timeout per attempt;
    with `public_only` (the guard) only https to public addresses, a name checked by
    `GuardedResolver` over `dns` (the system's by default) at each connection."""

    def __init__(
        self,
        *,
        public_only: bool,
        timeout: float,
        dns: AbstractResolver | None = None,
        connections: int = 32,
    ) -> None:
        self._public_only = public_only
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        resolver = GuardedResolver(dns) if public_only else dns
        self._session = aiohttp.ClientSession(
            # A connection per attempt an endpoint may have in flight.
            connector=aiohttp.TCPConnector(
                resolver=resolver, limit=max(200, connections), limit_per_host=connections
            ),
            headers={"User-Agent": USER_AGENT},
        )

    async def close(self) -> None:
        await self._session.close()

    async def post(self, url: str, *, body: bytes, headers: dict[str, str]) -> Answer:
        started = time.perf_counter()

        def took() -> int:
            return round((time.perf_counter() - started) * 1000)

        refusal = self._refusal(url)
        if refusal is not None:
            return Answer(None, refusal, None, took())
        try:
            async with self._session.post(
                url, data=body, headers=headers, allow_redirects=False, timeout=self._timeout
            ) as response:
                kept = await response.content.read(KEPT_ANSWER_BYTES)
                return Answer(
                    response.status, None, kept.decode("utf-8", "replace") or None, took()
                )
        except TimeoutError:
            return Answer(None, f"timeout: no answer within {self._timeout.total} s", None, took())
        except (aiohttp.ClientError, OSError) as error:
            return Answer(None, f"{type(error).__name__}: {error}"[:500], None, took())

    def _refusal(self, url: str) -> str | None:
        """Why `url` may not be reached now: its scheme, or an address in any spelling (the
        HTTP client connects to an address without resolving it); a name is checked when it is
        resolved (`GuardedResolver`)."""
        try:
            checked_url(url, public_only=self._public_only)
        except InvalidInput as refused:
            return f"refused: {refused.message}"
        return None


class WebhookDispatcher:
    """This instance's share of the deliveries: the endpoints whose lease it holds, each with
    its window (`server.webhook_worker.window`), all fed by one merged read of the feed."""

    def __init__(
        self,
        store: PaymentStore,
        receivers: Receivers,
        *,
        schedule: RetrySchedule,
        poll_interval: float,
        lease_seconds: float,
        attempt_timeout: float,
        settle_seconds: float,
        max_in_flight: int,
        clock: Callable[[], datetime],
        hub: EventHub | None = None,
        owner: str | None = None,
        rng: random.Random | None = None,
        observe: Callable[[str], None] = lambda outcome: None,
    ) -> None:
        self._store = store
        self._webhooks = store.webhooks
        self._receivers = receivers
        self._schedule = schedule
        self._poll = poll_interval
        # Endpoints are listed (taken, renewed, their changes seen) this often, whatever the poll.
        self._listing = lease_seconds / 4
        self._lease_ms = round(lease_seconds * 1000)
        # An attempt starts only with this much of the lease left: it ends before the lease does.
        self._margin_ms = round((attempt_timeout + 1) * 1000)
        self._settle = settle_seconds
        self._max_in_flight = max_in_flight
        self._clock = clock
        self._hub = hub
        self.owner = owner or uuid.uuid4().hex
        self._rng = rng or random.Random()  # jitter, not a secret
        # Each attempt's outcome, for the metrics: delivered, retrying or given_up.
        self._observe = observe
        self._windows: dict[str, EndpointWindow] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._lease_until: dict[str, int] = {}
        self._renewing: dict[str, asyncio.Future[bool]] = {}
        # Monotonic times at which a read of the feed is due: events the live feed carried,
        # settled then.
        self._reads_due: list[float] = []
        # A read wanted now: a new window's first, or a window's read-ahead running low.
        self._read_wanted = False
        self._woken = asyncio.Event()

    @property
    def delivering(self) -> list[str]:
        """The endpoints this instance delivers now."""
        return [endpoint for endpoint, task in self._tasks.items() if not task.done()]

    async def run(self) -> None:
        listen = None if self._hub is None else asyncio.create_task(self._listen(self._hub))
        try:
            listed_at = polled_at = -math.inf
            while True:
                now = time.monotonic()
                if now - listed_at >= self._listing:
                    listed_at = now
                    try:
                        await self._take_free_endpoints()
                    except PaymentsError as error:
                        log.warning("webhook endpoints could not be read: %s", error)
                due = [at for at in self._reads_due if at <= now]
                more = False
                if now - polled_at >= self._poll or due or self._read_wanted:
                    polled_at, self._read_wanted = now, False
                    self._reads_due = [at for at in self._reads_due if at > now]
                    try:
                        more = await self._read_feed()
                    except PaymentsError as error:
                        log.warning("the events feed could not be read: %s", error)
                if not more:
                    await self._until_next_read(
                        min(polled_at + self._poll, listed_at + self._listing)
                    )
        finally:
            if listen is not None:
                listen.cancel()
            tasks = list(self._tasks.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, *([listen] if listen else []), return_exceptions=True)
            # An orderly stop hands the endpoints over at once, not when the leases run out.
            for endpoint_id in list(self._tasks):
                with contextlib.suppress(PaymentsError, OSError):
                    await self._webhooks.release_lease(endpoint_id, owner=self.owner)

    async def _until_next_read(self, deadline: float) -> None:
        """Until the next poll or listing (`deadline`), or sooner: an event the live feed
        carried has settled, or a window wants events now."""
        now = time.monotonic()
        wait = max(0.0, min([deadline - now, *(due - now for due in self._reads_due)]))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await self._woken.wait()
        self._woken.clear()

    async def _listen(self, hub: EventHub) -> None:
        """Each event this instance's live feed carries schedules a read for when it settles
        (the settle time after its own time), instead of the next poll."""
        while True:
            subscriber = hub.subscribe(EventFilter())
            try:
                while (event := await subscriber.next()) is not None:
                    settled = (event.at - self._clock()).total_seconds() + self._settle + 0.01
                    due = time.monotonic() + max(settled, 0.0)
                    if not self._reads_due or due - max(self._reads_due) > 0.05:
                        self._reads_due.append(due)
                        self._woken.set()
            finally:
                hub.unsubscribe(subscriber)
            # Dropped (too many events at once) or the hub closing: a poll covers the gap.
            await asyncio.sleep(self._poll)

    async def _read_feed(self) -> bool:
        """One merged read of the feed for every window with room, from the lowest position
        among them (a window far behind another is read for again in the same round); whether
        a page came back full (read again at once)."""
        windows = [window for window in self._windows.values() if window.wants_events]
        full = False
        upper = settled_before(self._clock(), self._settle)
        while windows:
            lowest = min(windows, key=lambda window: window.fetched)
            lower, key = lowest.read_from()
            events = await self._store.feed_after(
                lower=lower, key=key, upper=upper, limit=FEED_PAGE
            )
            for window in windows:
                window.offer(events)
            if len(events) < FEED_PAGE:
                return full
            full = True
            last = events[-1][0][GSI4SK]["S"]
            windows = [window for window in windows if window.fetched > last]
        return full

    async def _take_free_endpoints(self) -> None:
        now_ms = _now_ms()
        listed = {state.endpoint.endpoint_id: state for state in await self._webhooks.endpoints()}
        for endpoint_id in list(self._windows):
            state = listed.get(endpoint_id)
            window = self._windows[endpoint_id]
            if state is None:  # deleted
                window.stop()
            else:
                window.update(state)
            if window.stopped or not await self._keep_lease(endpoint_id):
                window.stop()
                del self._windows[endpoint_id]
        for endpoint_id, state in listed.items():
            task = self._tasks.get(endpoint_id)
            if task is not None and not task.done():
                continue
            if state.endpoint.status is EndpointStatus.DISABLED:
                continue
            held = state.lease_owner not in (None, self.owner) and state.lease_until_ms >= now_ms
            if held or not await self._renew(endpoint_id):
                continue
            window = EndpointWindow(
                state,
                store=self._store,
                receivers=self._receivers,
                schedule=self._schedule,
                max_in_flight=self._max_in_flight,
                clock=self._clock,
                owner=self.owner,
                lease=functools.partial(self._lease_for_an_attempt, endpoint_id),
                on_disabled=self._disabled,
                rng=self._rng,
                observe=self._observe,
                read_more=self._want_read,
            )
            self._windows[endpoint_id] = window
            self._tasks[endpoint_id] = asyncio.create_task(
                self._deliver(window), name=f"webhooks {endpoint_id}"
            )
            self._want_read()

    def _want_read(self) -> None:
        self._read_wanted = True
        self._woken.set()

    async def _deliver(self, window: EndpointWindow) -> None:
        try:
            await window.run()
        finally:
            if self._windows.get(window.endpoint_id) is window:
                del self._windows[window.endpoint_id]

    async def _renew(self, endpoint_id: str) -> bool:
        """One renewal at a time per endpoint, however many attempts ask for it."""
        running = self._renewing.get(endpoint_id)
        if running is not None:
            return await running
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._renewing[endpoint_id] = future
        try:
            now_ms = _now_ms()
            until = now_ms + self._lease_ms
            held = await self._webhooks.take_lease(
                endpoint_id, owner=self.owner, now_ms=now_ms, until_ms=until
            )
            if held:
                self._lease_until[endpoint_id] = until
            else:
                self._lease_until.pop(endpoint_id, None)
            future.set_result(held)
            return held
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: those waiting get it, no warning if none do
            raise
        finally:
            del self._renewing[endpoint_id]

    async def _keep_lease(self, endpoint_id: str) -> bool:
        """Renewed once half of it has run: an idle endpoint's lease costs a write every half
        lease, not every poll."""
        if self._lease_until.get(endpoint_id, 0) - _now_ms() > self._lease_ms // 2:
            return True
        return await self._renew(endpoint_id)

    async def _lease_for_an_attempt(self, endpoint_id: str) -> bool:
        if self._lease_until.get(endpoint_id, 0) - _now_ms() > self._margin_ms:
            return True
        return await self._renew(endpoint_id)

    async def _disabled(self, endpoint: WebhookEndpoint, at: datetime, reason: str) -> None:
        """The operational event to the owner's other endpoints that list its type (not to those
        that take every type: their consumers parse payment events; never to another client's,
        which must not learn this one's URL; an endpoint of no client's tells none); the lease
        let go."""
        log.warning("webhook endpoint %s disabled: %s", endpoint.endpoint_id, reason)
        identifier, body = endpoint_disabled_event(endpoint, at=at, reason=reason)
        text = orjson.dumps(body).decode()
        for state in await self._webhooks.endpoints():
            other = state.endpoint
            if endpoint.owner is None or other.owner != endpoint.owner:
                continue
            if other.endpoint_id == endpoint.endpoint_id or not other.wants(ENDPOINT_DISABLED):
                continue
            if other.status is EndpointStatus.DISABLED:
                continue
            await self._webhooks.schedule(
                other.endpoint_id, event_id=identifier, due=at, attempt=1, body=text
            )
        await self._webhooks.release_lease(endpoint.endpoint_id, owner=self.owner)


def _now_ms() -> int:
    return round(time.time() * 1000)


@contextlib.asynccontextmanager
async def webhook_delivery(
    settings: Settings,
    store: PaymentStore,
    *,
    clock: Callable[[], datetime],
    enabled: bool = True,
    observe: Callable[[str], None] = lambda outcome: None,
    dns: AbstractResolver | None = None,
    hub: EventHub | None = None,
) -> AsyncIterator[WebhookDispatcher | None]:
    """This instance's dispatcher for the block's life (None when `LOC_WEBHOOKS` is off);
    receivers' names resolved by `dns` (the system's by default); reads of the feed brought
    forward by the events `hub` (this instance's live feed) carries."""
    if not (settings.webhooks and enabled):
        yield None
        return
    receivers = Receivers(
        public_only=settings.public_webhook_targets_only,
        timeout=settings.webhook_timeout,
        dns=dns,
        connections=settings.webhook_max_in_flight,
    )
    dispatcher = WebhookDispatcher(
        store,
        receivers,
        schedule=RetrySchedule(settings.webhook_retry_schedule),
        poll_interval=settings.webhook_poll_interval,
        lease_seconds=settings.webhook_lease_seconds,
        attempt_timeout=settings.webhook_timeout,
        settle_seconds=settings.events_settle_seconds,
        max_in_flight=settings.webhook_max_in_flight,
        clock=clock,
        hub=hub,
        observe=observe,
    )
    try:
        async with running(dispatcher.run(), name="webhook dispatcher"):
            yield dispatcher
    finally:
        await receivers.close()
