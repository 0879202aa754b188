"""The Redis broker's client (the live updates', SPEC §17; the shared budgets', §21), built here
as DynamoDB's is in `datasource.client`: timeouts explicit, closed at the end. Its callers wrap
each command in `datasource.errors.broker_errors`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.asyncio import Redis

__all__ = ["open_broker_client"]


@asynccontextmanager
async def open_broker_client(
    url: str, *, connect_timeout: float, read_timeout: float | None = None
) -> AsyncIterator[Redis]:
    """A client of the broker at `url` (`redis://`, `rediss://`) answering bytes; `read_timeout`
    None leaves a command's wait to the caller's own timeout."""
    client = Redis.from_url(
        url, socket_connect_timeout=connect_timeout, socket_timeout=read_timeout
    )
    try:
        yield client
    finally:
        await client.aclose()
