"""Lookups by key, coalesced across requests.

A `Coalescer` sends the lookups that reach the store within two turns of the event loop together
(one `GetItem` for one key, one `BatchGetItem` for up to 100) and hands each caller its own keys'
items. Each caller keeps what a call of its own would give it: its deadline (it stops waiting
when its budget runs out; the call is cancelled once nobody waits), a breaker failure when its
budget ran out unanswered, the call counted as one of its own with a share of the capacity in
proportion to its keys, the call's error, and with a tracer a span linked to the shared call's.
Strong and eventual reads never share a call.

Why: docs/performance.md#what-makes-the-service-fast ("Lookups coalesced across requests").
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace

from datasource import accounting, breaker, deadline, permissions, tracing
from domain.errors import StorageUnavailable

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext, Tracer

__all__ = ["Coalescer"]

# DynamoDB's limit of keys per BatchGetItem request.
BATCH_SIZE = 100
# Turns of the event loop a batch takes keys for. Requests that arrive together reach the store
# a turn or so apart: with the service on DynamoDB Local under the bench's load generator (one
# payment, 16 connections, interleaved runs), 2 turns spent a quarter less CPU per request than
# 1, and 3 no less than 2. A turn of an idle loop is microseconds.
TURNS = 2

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Reads the distinct keys at the consistency asked, and returns what it found by key.
Fetch = Callable[[list[K], bool], Awaitable[dict[K, V]]]


class _Batch(Generic[K, V]):
    """The keys of one shared call, and its callers' futures."""

    __slots__ = (
        "asked",
        "callers",
        "calls",
        "consistent",
        "context",
        "keys",
        "links",
        "span",
        "task",
        "waiters",
    )

    def __init__(self, consistent: bool) -> None:
        self.consistent = consistent
        self.keys: dict[K, None] = {}
        # Keys asked by its callers, a key asked by two counted twice: the shares' denominator.
        self.asked = 0
        # One future per caller, so that a caller who stops waiting cancels its own alone.
        self.waiters: list[asyncio.Future[dict[K, V]]] = []
        self.callers = 0
        # The call runs in a context of its own: not any one caller's deadline or accounting,
        # but made as the role its callers act as (one per process: the service, or a job).
        self.context = contextvars.Context()
        permissions.carry_role(self.context)
        self.calls = accounting.CallCount()
        self.task: asyncio.Task[None] | None = None
        # Traced: the callers' current spans, and the shared call's own.
        self.links: list[SpanContext] = []
        self.span: trace.Span | None = None


class Coalescer(Generic[K, V]):
    def __init__(self, fetch: Fetch[K, V], *, tracer: Tracer | None = None) -> None:
        self._fetch = fetch
        self._tracer = tracer
        # The batch still taking keys, per consistency.
        self._open: dict[bool, _Batch[K, V]] = {}

    async def lookup(self, keys: Sequence[K], *, consistent: bool) -> dict[K, V]:
        """What is stored under `keys` (the found ones), read in one call with the lookups other
        requests make within the next turns of the event loop."""
        distinct = dict.fromkeys(keys)
        if len(distinct) > BATCH_SIZE:  # a request of its own size: nothing to share
            return await self._fetch(list(distinct), consistent)
        loop = asyncio.get_running_loop()
        batch = self._open.get(consistent)
        if batch is None or len(batch.keys) + len(distinct) > BATCH_SIZE:
            batch = _Batch(consistent)
            self._open[consistent] = batch
            loop.call_soon(self._send_later, batch, TURNS)
        batch.keys.update(distinct)
        batch.asked += len(distinct)
        waiter: asyncio.Future[dict[K, V]] = loop.create_future()
        batch.waiters.append(waiter)
        batch.callers += 1
        if self._tracer is not None:
            batch.links.append(trace.get_current_span().get_span_context())
        try:
            found = await self._wait(batch, waiter)
        finally:
            batch.callers -= 1
            if batch.span is not None:
                trace.get_current_span().add_link(batch.span.get_span_context())
            if batch.task is not None and batch.task.done():
                self._account(batch, len(distinct))
            elif batch.callers == 0 and batch.task is not None:
                batch.task.cancel()  # nobody waits for it any more
        return found

    def _send_later(self, batch: _Batch[K, V], turns: int) -> None:
        if turns > 1:
            asyncio.get_running_loop().call_soon(self._send_later, batch, turns - 1)
        else:
            self._send(batch)

    def _send(self, batch: _Batch[K, V]) -> None:
        if self._open.get(batch.consistent) is batch:
            del self._open[batch.consistent]
        if batch.callers == 0:  # every caller left before it went out
            return
        if self._tracer is not None:
            batch.span = self._group_span(batch)
            if batch.span is None and batch.links:  # one caller: the call is its own
                parent = trace.NonRecordingSpan(batch.links[0])
                batch.context.run(otel_context.attach, trace.set_span_in_context(parent))
        batch.task = asyncio.get_running_loop().create_task(
            self._call(batch), context=batch.context
        )

    def _group_span(self, batch: _Batch[K, V]) -> trace.Span | None:
        """The shared call's span, if it is shared and any of its callers is traced."""
        assert self._tracer is not None
        callers = [link for link in batch.links if link.is_valid and link.trace_flags.sampled]
        if len(batch.links) < 2 or not callers:
            return None
        return self._tracer.start_span(
            "coalesced lookup",
            context=trace.set_span_in_context(trace.NonRecordingSpan(callers[0])),
            links=[trace.Link(caller) for caller in callers],
            attributes={
                "loc.coalesce.callers": batch.callers,
                "loc.coalesce.keys": len(batch.keys),
                "aws.dynamodb.consistent_read": batch.consistent,
            },
        )

    async def _call(self, batch: _Batch[K, V]) -> None:
        with accounting.counting(batch.calls), tracing.CurrentSpan(batch.span):
            try:
                found = await self._fetch(list(batch.keys), batch.consistent)
            except asyncio.CancelledError:
                for waiter in batch.waiters:
                    waiter.cancel()
                raise
            except Exception as error:  # handed to every caller, who raises it
                tracing.record_error(error)
                for waiter in batch.waiters:
                    if not waiter.done():
                        waiter.set_exception(error)
            else:
                for waiter in batch.waiters:
                    if not waiter.done():
                        waiter.set_result(found)

    async def _wait(self, batch: _Batch[K, V], waiter: asyncio.Future[dict[K, V]]) -> dict[K, V]:
        at = deadline.current_deadline()
        if at is None:
            return await waiter
        # A timer on the caller's own future, lighter than `asyncio.timeout_at` (a context
        # manager that would cancel the whole task), on every lookup.
        expiry = asyncio.get_running_loop().call_at(at, _run_out, waiter)
        try:
            return await waiter
        except _OutOfTime:
            if batch.task is not None:
                # Counted against the call's attempts, as the caller's own call would be.
                batch.context.run(breaker.budget_ran_out)
            raise StorageUnavailable(deadline.OUT_OF_TIME) from None
        finally:
            expiry.cancel()

    def _account(self, batch: _Batch[K, V], keys: int) -> None:
        count = accounting.current()
        if count is not None:
            count.add_share(batch.calls, keys / batch.asked)


class _OutOfTime(Exception):
    """A caller's budget ran out before the shared call answered it."""


def _run_out(waiter: asyncio.Future[Any]) -> None:
    if not waiter.done():
        waiter.set_exception(_OutOfTime())
