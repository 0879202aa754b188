"""Servers that share one new table and read its stream (`python -m cli serve`, as instances
behind a load balancer), and a subscription's events gathered in the background: for the tests
of live updates (tests/api/test_live_updates.py) and of their traces (test_live_traces.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from tests.api.conftest import RESULT_FIELDS, SERVICE
from tests.backends import Backend, fresh_table
from tests.servers import served

# A short poll, so that the tests wait little; the default is the README's.
POLL_SECONDS = "0.1"
# Enough presentments for a long chain of versions (PINless RETRY -> RETRY).
MAX_ATTEMPTS = "40"
EVENTS = """
subscription($u: ID, $l: ID, $p: ID, $after: Int) {
  paymentEvents(userId: $u, loanId: $l, paymentId: $p, afterVersion: $after) {
    version fromStatus toStatus reason actorKind actorId
    payment { paymentId userId status version }
  }
}
"""
WAIT = 15.0  # seconds an expected event may take, at most


@dataclass(frozen=True)
class Instance:
    url: str

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/graphql"

    async def mutate(
        self, mutation: str, input: dict[str, Any], *, as_: str = SERVICE
    ) -> dict[str, Any]:
        type_name = mutation[0].upper() + mutation[1:] + "Input"
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as http:
            response = await http.post(
                "/graphql",
                json={
                    "query": f"mutation($input: {type_name}!) {{ {mutation}(input: $input) "
                    f"{{ {RESULT_FIELDS} }} }}",
                    "variables": {"input": input},
                },
                headers={"Authorization": f"Bearer {as_}"},
            )
        body = response.json()
        assert "errors" not in body, body
        result: dict[str, Any] = body["data"][mutation]
        assert result["__typename"] == "PaymentPayload", result
        payment: dict[str, Any] = result["payment"]
        return payment


@asynccontextmanager
async def instances(backend: Backend, count: int, **settings: str) -> AsyncIterator[list[Instance]]:
    """`count` servers on one new table, each reading its stream."""
    table_name = await fresh_table(backend)
    options = {"stream_poll_interval": POLL_SECONDS, "max_attempts": MAX_ATTEMPTS, **settings}
    async with served(backend.endpoint_url, table_name, count, **options) as urls:
        yield [Instance(url) for url in urls]
    await backend.client.delete_table(TableName=table_name)


class Subscription:
    """A subscription's events, gathered in the background."""

    def __init__(self, events: list[dict[str, Any]], task: asyncio.Task[None]) -> None:
        self.events = events
        self.task = task

    async def wait_for(self, count: int) -> list[dict[str, Any]]:
        deadline = time.monotonic() + WAIT
        while len(self.events) < count:
            if self.task.done():
                self.task.result()  # raises what ended it
            assert time.monotonic() < deadline, f"got {len(self.events)} events of {count}"
            await asyncio.sleep(0.02)
        return self.events
