"""Real server processes (`python -m server serve`) for the tests that need a network peer: a
WebSocket client, a second instance, a browser. The benchmark's own (`bench.live.Instance`): a
free port, the table and endpoint given, `local` settings plus the test's, output kept for the
failure message."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from bench.live import Instance


@asynccontextmanager
async def served(
    endpoint: str, table_name: str, count: int = 1, **settings: str
) -> AsyncIterator[list[str]]:
    """`count` servers on one table, each ready with its live updates reading; their URLs."""
    instances = [Instance(endpoint, table_name, settings) for _ in range(count)]
    try:
        for instance in instances:
            instance.start()
        async with httpx.AsyncClient() as http:
            await asyncio.gather(*(instance.wait_ready(http) for instance in instances))
        yield [instance.url for instance in instances]
    finally:
        for instance in instances:
            instance.stop()
