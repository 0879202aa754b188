"""Work an app runs in the background for as long as a block lasts (the live feed's readers,
the identity provider's keys): started on entry, cancelled and awaited on exit."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any

__all__ = ["running"]


@contextlib.asynccontextmanager
async def running(
    work: Coroutine[Any, Any, None], *, name: str | None = None
) -> AsyncIterator[None]:
    task = asyncio.create_task(work, name=name)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
