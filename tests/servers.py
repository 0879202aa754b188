"""Real server processes (`python -m cli serve`) for the tests that need a network peer: a
WebSocket client, a second instance, a browser. They are `harness.processes.Service`s: a free
port, the table and endpoint given, `local` settings plus the test's, output kept for the
failure message. Their DynamoDB budget is ten times the service's default, so that a machine
the parallel run keeps busy does not turn a slow answer into UNAVAILABLE; a test of the budget
itself sets its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from harness.processes import Service, children
from harness.processes import serving as harness_serving

__all__ = ["DYNAMODB_BUDGET", "java_child", "java_children", "served", "serving"]

# Seconds; the service's default is 3 (`LOC_DYNAMODB_BUDGET`).
DYNAMODB_BUDGET = "30"


@asynccontextmanager
async def serving(
    endpoint: str | None, table_name: str, count: int = 1, **settings: str
) -> AsyncIterator[list[Service]]:
    """`harness.processes.serving`, with the tests' DynamoDB budget unless `settings` give one."""
    async with harness_serving(
        endpoint, table_name, count, **{"dynamodb_budget": DYNAMODB_BUDGET, **settings}
    ) as services:
        yield services


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
