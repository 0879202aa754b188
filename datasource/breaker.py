"""The circuit breaker of the store's client: while DynamoDB does not answer, fail at once.

`attach` watches every attempt botocore makes: `failures` attempts in a row without an answer
(refused, reset, timed out), or a call that waited out its whole budget without one, open it;
any answer, even an error, is a success, and one slow call alone does not open it. While open,
every call is refused before it is sent (`StorageUnavailable`, within microseconds), and a probe
asks DynamoDB for the table every `probe_interval` seconds; the first answer closes it.

Why our own and not pybreaker's: docs/reliability.md ("A circuit breaker").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.exceptions import HTTPClientError

from domain.errors import StorageUnavailable

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = ["OPEN_MESSAGE", "CircuitBreaker", "budget_ran_out"]

logger = logging.getLogger("loc_payments.dynamodb")

DEFAULT_FAILURES = 5
DEFAULT_PROBE_INTERVAL = 0.5
# One probe's wait for an answer; a DescribeTable answers in milliseconds when anything answers.
PROBE_TIMEOUT = 1.0
OPEN_MESSAGE = "the payments store is not answering; retry shortly"
_HOOK_ID = "loc-payments-circuit-breaker"

State = Literal["closed", "open"]

# Set while a probe's own call runs: the one call an open breaker lets through.
_probing: ContextVar[bool] = ContextVar("dynamodb_breaker_probe", default=False)


@dataclass(slots=True)
class _Call:
    """The call this task is making: the breaker of its client, and whether any attempt got an
    answer (set by the hooks, read when its operation's budget runs out).

    The breaker is held weakly: a context outlives its call in whatever was scheduled during
    the call (the HTTP pool's timers copy it), and through the breaker's probe it would keep
    the store and its client alive after the app that owned them stopped."""

    breaker: weakref.ref[CircuitBreaker]
    # An attempt went out (past any client-side rate limiter's wait), and one got an answer.
    sent: bool = False
    answered: bool = False


_call: ContextVar[_Call | None] = ContextVar("dynamodb_breaker_call", default=None)


class CircuitBreaker:
    def __init__(
        self,
        *,
        failures: int = DEFAULT_FAILURES,
        probe_interval: float = DEFAULT_PROBE_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failures < 1:
            raise ValueError("a breaker opens after at least one failure")
        self._threshold = failures
        self._probe_interval = probe_interval
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probe: Callable[[], Awaitable[object]] | None = None
        self._probe_task: asyncio.Task[None] | None = None
        # What metrics read: how often it opened, and for how long in all (closed spells).
        self.opens = 0
        self._closed_seconds_open = 0.0

    @property
    def state(self) -> State:
        return "closed" if self._opened_at is None else "open"

    @property
    def seconds_open(self) -> float:
        """Time spent open so far, the current spell included."""
        current = 0.0 if self._opened_at is None else self._clock() - self._opened_at
        return self._closed_seconds_open + current

    def attach(self, client: DynamoDBClient, probe: Callable[[], Awaitable[object]]) -> None:
        """Watch and guard `client`'s calls; `probe` (a cheap call on the same client) is what
        an open breaker tries until it answers."""
        self._probe = probe
        events = client.meta.events
        events.register(
            "before-call.dynamodb", self._refuse_when_open, unique_id=f"{_HOOK_ID}-refuse"
        )
        events.register("needs-retry.dynamodb", self._watch_attempt, unique_id=f"{_HOOK_ID}-watch")
        # The generic event, registered after botocore's adaptive rate limiter's: it runs once
        # the limiter let the attempt go.
        events.register("before-send", _note_sent, unique_id=f"{_HOOK_ID}-sent")

    async def close(self) -> None:
        """Stop probing (the store is closing)."""
        task, self._probe_task = self._probe_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def failure(self, reason: str) -> None:
        self._failures += 1
        if self._opened_at is None and self._failures >= self._threshold:
            self._open(reason)

    def success(self) -> None:
        self._failures = 0
        if self._opened_at is not None:
            self._close()

    def refuses(self) -> bool:
        """Whether a call made here now is refused: open, and not the probe's own call."""
        return self._opened_at is not None and not _probing.get()

    def _refuse_when_open(self, **_: Any) -> None:
        _call.set(_Call(weakref.ref(self)))
        if self.refuses():
            raise StorageUnavailable(OPEN_MESSAGE)

    def _watch_attempt(
        self, response: Any = None, caught_exception: BaseException | None = None, **_: Any
    ) -> None:
        if isinstance(caught_exception, BotoConnectionError | HTTPClientError):
            self.failure(f"{type(caught_exception).__name__}: {caught_exception}")
        elif response is not None:
            call = _call.get()
            if call is not None:
                call.answered = True
            self.success()

    def open(self, reason: str) -> None:
        """Open now (when closed)."""
        if self._opened_at is None:
            self._open(reason)

    def _open(self, reason: str) -> None:
        self._opened_at = self._clock()
        self.opens += 1
        logger.error(
            "DynamoDB is not answering (%s); failing requests at once until it does", reason
        )
        if self._probe is not None:
            with contextlib.suppress(RuntimeError):  # no running loop: nothing to probe from
                self._probe_task = asyncio.get_running_loop().create_task(self._probe_until_up())

    def _close(self) -> None:
        assert self._opened_at is not None
        spell = self._clock() - self._opened_at
        self._closed_seconds_open += spell
        self._opened_at = None
        self._failures = 0
        logger.warning("DynamoDB answers again after %.1f s; requests go through", spell)

    async def _probe_until_up(self) -> None:
        assert self._probe is not None
        token = _probing.set(True)
        try:
            while self._opened_at is not None:
                await asyncio.sleep(self._probe_interval)
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(PROBE_TIMEOUT):
                        await self._probe()
                    # An answer, whatever it says, is DynamoDB answering.
                    if self._opened_at is not None:
                        self._close()
        finally:
            _probing.reset(token)


def _note_sent(**_: Any) -> None:
    call = _call.get()
    if call is not None:
        call.sent = True


def budget_ran_out() -> None:
    """An operation's time budget ran out while its call waited. If an attempt of that call went
    out and none got an answer, that is a failure of the breaker of the client it went out on.
    (A call that was answered, throttled say, and ran out of time between retries says nothing
    of the kind; nor does one still waiting for a client-side rate limiter to let it go.)"""
    call = _call.get()
    breaker = None if call is None or call.answered or not call.sent else call.breaker()
    if breaker is not None:
        breaker.failure("a call got no answer within its operation's time budget")


@contextlib.contextmanager
def probing() -> Iterator[None]:
    """Calls made inside the block go out even while the breaker is open (tests, tools)."""
    token = _probing.set(True)
    try:
        yield
    finally:
        _probing.reset(token)
