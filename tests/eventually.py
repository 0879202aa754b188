"""Waiting for what a test waits for, never for a length of time: `eventually(check)` asks again
until `check()` holds and fails the test only once `within` seconds have passed. The deadline is
not a pause: a quiet machine goes on as soon as the thing happened, a loaded one gets the time it
needs. tests/test_fixed_waits.py keeps fixed sleeps out of the tests."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable

__all__ = ["WITHIN", "eventually"]

# Seconds: only a test that fails waits this long.
WITHIN = 30.0
# Seconds between two asks: a check may be a request to a server process, which costs CPU.
EVERY = 0.05


async def eventually(
    check: Callable[[], object],
    *,
    what: str | Callable[[], object] = "",
    within: float = WITHIN,
    every: float = EVERY,
) -> None:
    """Until `check()` (awaited when it returns an awaitable) is truthy; an AssertionError
    naming `what` (or what `what()` says then) once `within` seconds pass without it."""
    deadline = time.monotonic() + within
    while True:
        answer = check()
        if inspect.isawaitable(answer):
            answer = await answer
        if answer:
            return
        if time.monotonic() > deadline:
            told = what() if callable(what) else what
            raise AssertionError(f"not within {within} s: {told}")
        await asyncio.sleep(every)
