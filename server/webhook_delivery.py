"""Webhook delivery (SPEC §18): every instance runs a dispatcher; each endpoint is delivered by
the one instance that holds its lease (a conditional write on the endpoint's item).

Deliveries derive from the stored events, never from a stream that forgets: an endpoint keeps its
position in the events feed (GSI4), and each handled event moves it in the same transaction that
records the attempt and schedules the retry (`datasource.webhooks`). An instance killed in the
middle of an attempt leaves the position before that event, so the next holder of the lease
tries it again: at least once, with the same `webhook-id`. Due retries are items of their own, so
one failing event never holds back the events after it. Each endpoint has its own task: a slow
receiver delays its own events only.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import ipaddress
import logging
import random
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import aiohttp
import orjson
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from datasource.events import settled_before
from datasource.webhooks import EndpointState, Progress
from domain.errors import InvalidInput, PaymentsError
from domain.history import PaymentEvent
from domain.hosts import Address
from domain.webhooks import (
    AddressLookup,
    EndpointStatus,
    RetrySchedule,
    WebhookDelivery,
    checked_url,
    event_id,
    event_of_id,
    event_type,
    forbidden_address,
    signature,
)
from resolvers.webhooks import event_body
from server.background import running

if TYPE_CHECKING:
    from datasource import PaymentStore
    from server.settings import Settings

__all__ = [
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
# Events (and due retries) one round of an endpoint reads at a time.
ROUND_SIZE = 25
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
        self, *, public_only: bool, timeout: float, dns: AbstractResolver | None = None
    ) -> None:
        self._public_only = public_only
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        resolver = GuardedResolver(dns) if public_only else dns
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(resolver=resolver, limit=200, limit_per_host=10),
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
    """This instance's share of the deliveries: the endpoints whose lease it holds."""

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
        clock: Callable[[], datetime],
        owner: str | None = None,
        rng: random.Random | None = None,
        observe: Callable[[str], None] = lambda outcome: None,
    ) -> None:
        self._store = store
        self._webhooks = store.webhooks
        self._receivers = receivers
        self._schedule = schedule
        self._poll = poll_interval
        self._lease_ms = round(lease_seconds * 1000)
        # An attempt starts only with this much of the lease left: it ends before the lease does.
        self._margin_ms = round((attempt_timeout + 2) * 1000)
        self._settle = settle_seconds
        self._clock = clock
        self.owner = owner or uuid.uuid4().hex
        self._rng = rng or random.Random()  # jitter, not a secret
        # Each attempt's outcome, for the metrics: delivered, retrying or given_up.
        self._observe = observe
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._lease_until: dict[str, int] = {}

    @property
    def delivering(self) -> list[str]:
        """The endpoints this instance delivers now."""
        return [endpoint for endpoint, task in self._tasks.items() if not task.done()]

    async def run(self) -> None:
        try:
            while True:
                try:
                    await self._take_free_endpoints()
                except PaymentsError as error:
                    log.warning("webhook endpoints could not be read: %s", error)
                await asyncio.sleep(self._poll)
        finally:
            tasks = list(self._tasks.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            # An orderly stop hands the endpoints over at once, not when the leases run out.
            for endpoint_id in list(self._tasks):
                with contextlib.suppress(PaymentsError, OSError):
                    await self._webhooks.release_lease(endpoint_id, owner=self.owner)

    async def _take_free_endpoints(self) -> None:
        now_ms = _now_ms()
        for state in await self._webhooks.endpoints():
            endpoint_id = state.endpoint.endpoint_id
            task = self._tasks.get(endpoint_id)
            if task is not None and not task.done():
                continue
            held = state.lease_owner not in (None, self.owner) and state.lease_until_ms >= now_ms
            if held or not await self._renew(endpoint_id):
                continue
            self._tasks[endpoint_id] = asyncio.create_task(
                self._deliver(endpoint_id), name=f"webhooks {endpoint_id}"
            )

    async def _renew(self, endpoint_id: str) -> bool:
        now_ms = _now_ms()
        until = now_ms + self._lease_ms
        if not await self._webhooks.take_lease(
            endpoint_id, owner=self.owner, now_ms=now_ms, until_ms=until
        ):
            self._lease_until.pop(endpoint_id, None)
            return False
        self._lease_until[endpoint_id] = until
        return True

    async def _keep_lease(self, endpoint_id: str) -> bool:
        """Renewed once half of it has run: an idle endpoint's lease costs a write every half
        lease, not every round."""
        if self._lease_until.get(endpoint_id, 0) - _now_ms() > self._lease_ms // 2:
            return True
        return await self._renew(endpoint_id)

    async def _lease_for_an_attempt(self, endpoint_id: str) -> bool:
        if self._lease_until.get(endpoint_id, 0) - _now_ms() > self._margin_ms:
            return True
        return await self._renew(endpoint_id)

    async def _deliver(self, endpoint_id: str) -> None:
        """One endpoint's deliveries, for as long as this instance holds its lease."""
        try:
            while await self._keep_lease(endpoint_id):
                state = await self._webhooks.endpoint(endpoint_id)
                if state is None:  # deleted
                    return
                busy = await self._round(state)
                if busy is None:  # the lease was lost
                    return
                if not busy:
                    await asyncio.sleep(self._poll)
        except PaymentsError as error:
            # The dispatcher takes the endpoint again on its next look, from the stored position.
            log.warning("webhook endpoint %s paused: %s", endpoint_id, error)

    async def _round(self, state: EndpointState) -> bool | None:
        """Due retries, then new events; whether there was work (None: the lease was lost)."""
        endpoint_id = state.endpoint.endpoint_id
        status = state.endpoint.status
        now = self._clock()
        retries = await self._webhooks.due_retries(endpoint_id, now=now, limit=ROUND_SIZE)
        for retry in retries:
            ref, version = event_of_id("eventId", retry.event_id)
            event = await self._with_payment(await self._store.event(ref, version))
            if event is None:
                progress = Progress(retry_done=retry.sort_key)
            else:
                if not await self._lease_for_an_attempt(endpoint_id):
                    return None
                progress = await self._attempt(state, event, retry.attempt, status)
                progress = Progress(
                    delivery=progress.delivery,
                    retry_done=retry.sort_key,
                    retry_next=progress.retry_next,
                    status=progress.status,
                )
            status = progress.status or status
            if not await self._webhooks.record(endpoint_id, owner=self.owner, progress=progress):
                return None
        events = await self._store.feed_after(
            lower=state.feed_from,
            key=state.feed_key,
            upper=settled_before(now, self._settle),
            limit=ROUND_SIZE,
        )
        skipped = None
        for key, listed in events:
            event = await self._with_payment(listed)
            if event is None or not state.endpoint.wants(
                event_type(event.from_status, event.to_status)
            ):
                skipped = key
                continue
            skipped = None
            if not await self._lease_for_an_attempt(endpoint_id):
                return None
            attempted = await self._attempt(state, event, 1, status)
            progress = Progress(
                delivery=attempted.delivery,
                retry_next=attempted.retry_next,
                feed_key=key,
                status=attempted.status,
            )
            status = progress.status or status
            if not await self._webhooks.record(endpoint_id, owner=self.owner, progress=progress):
                return None
        if skipped is not None:
            progress = Progress(feed_key=skipped)
            if not await self._webhooks.record(endpoint_id, owner=self.owner, progress=progress):
                return None
        return bool(retries or events)

    async def _with_payment(self, event: PaymentEvent | None) -> PaymentEvent | None:
        """The event with the payment its body carries: as its write left it, or (an event
        stored before events held it) as it is now."""
        if event is None or event.payment is not None:
            return event
        payment = await self._store.get(event.ref)
        return None if payment is None else dataclasses.replace(event, payment=payment)

    async def _attempt(
        self, state: EndpointState, event: PaymentEvent, attempt: int, status: EndpointStatus
    ) -> Progress:
        """POST the event once; the attempt, and the retry or status it leads to."""
        identifier = event_id(event.ref, event.version)
        body = orjson.dumps(event_body(event))
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
            event_type=event_type(event.from_status, event.to_status),
            attempt=attempt,
            at=at,
            duration_ms=answer.duration_ms,
            status_code=answer.status_code,
            error=answer.error,
            response_body=answer.body,
        )
        if delivery.succeeded:
            self._observe("delivered")
            return Progress(
                delivery=delivery,
                status=EndpointStatus.ENABLED if status is EndpointStatus.FAILING else None,
            )
        delay = self._schedule.delay_after(attempt, self._rng)
        log.info(
            "webhook attempt %d of %s to endpoint %s failed: %s",
            attempt,
            identifier,
            state.endpoint.endpoint_id,
            answer.error or answer.status_code,
        )
        self._observe("retrying" if delay is not None else "given_up")
        if delay is None:
            log.warning(
                "webhook event %s given up for endpoint %s", identifier, state.endpoint.endpoint_id
            )
            return Progress(delivery=delivery, status=EndpointStatus.FAILING)
        return Progress(delivery=delivery, retry_next=(at + timedelta(seconds=delay), attempt + 1))


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
) -> AsyncIterator[WebhookDispatcher | None]:
    """This instance's dispatcher for the block's life (None when `LOC_WEBHOOKS` is off);
    receivers' names resolved by `dns` (the system's by default)."""
    if not (settings.webhooks and enabled):
        yield None
        return
    receivers = Receivers(
        public_only=settings.public_webhook_targets_only, timeout=settings.webhook_timeout, dns=dns
    )
    dispatcher = WebhookDispatcher(
        store,
        receivers,
        schedule=RetrySchedule(settings.webhook_retry_schedule),
        poll_interval=settings.webhook_poll_interval,
        lease_seconds=settings.webhook_lease_seconds,
        attempt_timeout=settings.webhook_timeout,
        settle_seconds=settings.events_settle_seconds,
        clock=clock,
        observe=observe,
    )
    try:
        async with running(dispatcher.run(), name="webhook dispatcher"):
            yield dispatcher
    finally:
        await receivers.close()
