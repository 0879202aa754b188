"""Real server processes (`python -m cli serve`) for the tests that need a network peer: a
WebSocket client, a second instance, a browser. They are `harness.processes.Service`s: a free
port, the table and endpoint given, `local` settings plus the test's, output kept for the
failure message."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from harness.processes import children, serving

__all__ = ["java_child", "java_children", "served", "serving"]


@asynccontextmanager
async def served(
    endpoint: str, table_name: str, count: int = 1, **settings: str
) -> AsyncIterator[list[str]]:
    """`count` servers on one table, each ready with its live updates reading; their URLs."""
    async with serving(endpoint, table_name, count, **settings) as services:
        yield [service.url for service in services]


def java_children(parent: int) -> set[int]:
    """The pids of the `java` children (DynamoDB Local) of process `parent`."""
    return set(children("java", parent))


def java_child(parent: int) -> int:
    """The pid of the one DynamoDB Local that process `parent` (a server) runs."""
    [pid] = java_children(parent)
    return pid
