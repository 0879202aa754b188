"""Retries of DynamoDB calls fit for DynamoDB: a throttle or a 5xx is tried again after tens of
milliseconds, never past the operation's time budget.

`RetryPolicy.attach` turns botocore's own retries off on a client and puts one `needs-retry`
handler in their place: a throttle (`THROTTLE_CODES`), a 5xx, `TransactionInProgressException` or
an attempt without an answer is tried again after a wait drawn with full jitter (`Backoff`), at
most `attempts` attempts in all, and never when the wait and another attempt as long as the last
would not end within the operation's deadline (`datasource.deadline`): the call then fails at once
with the answer it has. Each throttled attempt is counted in the client's `Throttles`
(`throttles_of`) and in the request's count (`datasource.accounting`).

Why not botocore's modes: docs/reliability.md ("Throttles absorbed").
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.exceptions import HTTPClientError

from datasource import accounting, deadline
from datasource.batch import Backoff

__all__ = ["THROTTLE_CODES", "RetryPolicy", "Throttles", "throttles_of"]

THROTTLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "ThrottlingException",
    }
)
# Answered with a 4xx, yet worth another attempt: the same request may well succeed.
TRANSIENT_CODES = frozenset({"TransactionInProgressException"})
# Where a call keeps what the handlers learn of it: botocore's request context, one per call.
_INDEX = "loc_payments_index"
_ATTEMPT_STARTED = "loc_payments_attempt_started"
_HOOK_ID = "loc-payments-retries"


@dataclass(slots=True)
class Throttles:
    """The attempts a client's calls met throttled since it opened: (API, index name or
    `accounting.TABLE`) -> attempts."""

    counts: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, api: str, index: str | None = None) -> None:
        """Count a throttled attempt, here and in the request's count."""
        key = (api, index or accounting.TABLE)
        self.counts[key] = self.counts.get(key, 0) + 1
        accounting.throttled(api, index)


_throttles: weakref.WeakKeyDictionary[Any, Throttles] = weakref.WeakKeyDictionary()


def throttles_of(client: Any) -> Throttles:
    """The throttles `client`'s calls met."""
    throttles = _throttles.get(client)
    if throttles is None:
        throttles = _throttles[client] = Throttles()
    return throttles


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """At most `attempts` attempts a call, the waits between them drawn with full jitter from
    `base` seconds, doubling, at most `cap`."""

    attempts: int = 16
    base: float = 0.025
    cap: float = 0.25

    @property
    def backoff(self) -> Backoff:
        """The same plan for the service's own retries (transactions, batches' unprocessed keys)."""
        return Backoff(base=self.base, cap=self.cap, retries=self.attempts - 1)

    def attach(self, client: Any) -> None:
        """Retry `client`'s calls by this policy (its own botocore retries must be off)."""
        service = client.meta.service_model.service_id.hyphenize()
        events = client.meta.events
        events.register(
            f"before-parameter-build.{service}", _note_index, unique_id=f"{_HOOK_ID}-index"
        )
        events.register(
            f"request-created.{service}", _note_attempt, unique_id=f"{_HOOK_ID}-attempt"
        )
        handler = functools.partial(self.needs_retry, throttles=throttles_of(client))
        events.register(f"needs-retry.{service}", handler, unique_id=_HOOK_ID)

    def needs_retry(
        self,
        *,
        response: Any = None,
        operation: Any = None,
        attempts: int = 1,
        caught_exception: BaseException | None = None,
        request_dict: dict[str, Any] | None = None,
        throttles: Throttles | None = None,
        **_: Any,
    ) -> float | None:
        """botocore's `needs-retry` handler: the seconds to wait before the next attempt, or None
        for no retry (the call ends with this attempt's answer or error)."""
        context = request_dict.get("context", {}) if request_dict is not None else {}
        if caught_exception is not None:
            if not isinstance(caught_exception, BotoConnectionError | HTTPClientError):
                return None
        elif response is None:
            return None
        else:
            http_response, parsed = response
            code = parsed.get("Error", {}).get("Code", "") if isinstance(parsed, dict) else ""
            if code in THROTTLE_CODES:
                (throttles or Throttles()).add(getattr(operation, "name", ""), context.get(_INDEX))
            elif http_response.status_code < 500 and code not in TRANSIENT_CODES:
                return None
        if attempts >= self.attempts:
            return None
        wait = self.backoff.delay(attempts - 1)
        started = context.get(_ATTEMPT_STARTED)
        took = 0.0 if started is None else asyncio.get_running_loop().time() - started
        return wait if deadline.leaves_time_for(wait + took) else None


def _note_index(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    index = params.get("IndexName")
    if index is not None:
        context[_INDEX] = index


def _note_attempt(request: Any, **_: Any) -> None:
    request.context[_ATTEMPT_STARTED] = asyncio.get_running_loop().time()
