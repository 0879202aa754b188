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
from bench.processes import children


@asynccontextmanager
async def served(
    endpoint: str, table_name: str, count: int = 1, **settings: str
) -> AsyncIterator[list[str]]:
    """`count` servers on one table, each ready with its live updates reading; their URLs."""
    async with serving(endpoint, table_name, count, **settings) as instances:
        yield [instance.url for instance in instances]


@asynccontextmanager
async def serving(
    endpoint: str | None, table_name: str, count: int = 1, **settings: str
) -> AsyncIterator[list[Instance]]:
    """The servers of `served` themselves (their processes, their output); without an endpoint
    each starts its own DynamoDB Local (give it a `data_dir`)."""
    instances = [Instance(endpoint, table_name, settings) for _ in range(count)]
    try:
        for instance in instances:
            instance.start()
        async with httpx.AsyncClient() as http:
            await asyncio.gather(*(instance.wait_ready(http) for instance in instances))
        yield instances
    finally:
        for instance in instances:
            instance.stop()


def java_children(parent: int) -> set[int]:
    """The pids of the `java` children (DynamoDB Local) of process `parent`."""
    return set(children("java", parent))


def java_child(parent: int) -> int:
    """The pid of the one DynamoDB Local that process `parent` (a server) runs."""
    [pid] = java_children(parent)
    return pid
