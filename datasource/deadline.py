"""The time budget of one GraphQL operation's DynamoDB work, across every call and every retry.

`storage_budget(seconds)` sets a deadline for the block (and the tasks it starts, such as DataLoader
batches, which copy the context); every DynamoDB call runs inside `storage_call()`, which stops
it (botocore's retries and backoff included) when the deadline passes and raises
`StorageUnavailable`, so an operation answers UNAVAILABLE at once instead of waiting out every
retry of every call. Outside a budget (the collection job, tools) calls are bounded by the
client's own timeouts and retries alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, asynccontextmanager
from contextvars import ContextVar

from datasource import breaker, tracing
from datasource.errors import storage_errors
from datasource.scoped import Scoped
from domain.errors import StorageUnavailable

__all__ = [
    "OUT_OF_TIME",
    "current_deadline",
    "leaves_time_for",
    "pause",
    "storage_budget",
    "storage_call",
]

_deadline: ContextVar[float | None] = ContextVar("dynamodb_deadline", default=None)

OUT_OF_TIME = "the payments store did not answer within the request's time budget; retry shortly"


def storage_budget(seconds: float | None) -> AbstractContextManager[float | None]:
    """The DynamoDB calls made inside the block must finish within `seconds` (None: no limit);
    `with` gives the deadline, on the event loop's clock."""
    deadline = None if seconds is None else asyncio.get_running_loop().time() + seconds
    return Scoped(_deadline, deadline)


def current_deadline() -> float | None:
    """The deadline of the calls made here (the event loop's clock), if any."""
    return _deadline.get()


@asynccontextmanager
async def storage_call() -> AsyncIterator[None]:
    """One DynamoDB call: its errors become domain errors, and it ends by the deadline. A call
    that ends without an answer ends its span here (`tracing.abandoned`)."""
    timeout = asyncio.timeout_at(_deadline.get())  # no deadline: no limit of ours
    try:
        try:
            async with timeout:
                with storage_errors():
                    yield
        except TimeoutError:
            if not timeout.expired():
                raise
            breaker.budget_ran_out()
            raise StorageUnavailable(OUT_OF_TIME) from None
    except BaseException as error:
        tracing.abandoned(error)
        raise


def leaves_time_for(seconds: float) -> bool:
    """Whether `seconds` from now is still before the deadline (always, without one)."""
    deadline = _deadline.get()
    return deadline is None or asyncio.get_running_loop().time() + seconds < deadline


async def pause(seconds: float, *, then: float = 0.0) -> None:
    """A wait before trying again, refused (StorageUnavailable, at once) when the wait and `then`
    seconds more (the attempt it leads to) would not end before the deadline."""
    if not leaves_time_for(seconds + then):
        raise StorageUnavailable(OUT_OF_TIME)
    await asyncio.sleep(seconds)
