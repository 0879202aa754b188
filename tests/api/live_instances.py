"""Servers that share one new table and read its stream (`python -m cli serve`, as instances
behind a load balancer), and a subscription's events gathered in the background: for the tests
of live updates (tests/api/test_live_updates.py) and of their traces (test_live_traces.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from harness.processes import HOST, free_port
from tests.api.conftest import RESULT_FIELDS, SERVICE
from tests.api.metrics import metric
from tests.backends import Backend, fresh_table
from tests.eventually import eventually
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
# LOC_METRICS: `/metrics` on the API's port (`local`): the gauge of open subscriptions tells when
# the server has taken one up, which graphql-transport-ws never acknowledges.
METRICS = "app"
SUBSCRIPTIONS = "loc_payments_live_subscriptions"


@dataclass(frozen=True)
class Instance:
    url: str
    # Where its `/metrics` are: the operators' port outside `local`, else the API's.
    metrics_url: str = ""

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

    async def subscriptions(self, state: str = "live") -> int:
        """Its open subscriptions in `state` (`live`: sent each event stored from now on;
        `starting`; `quiet`: another user's events), as its metrics count them."""
        async with httpx.AsyncClient(base_url=self.metrics_url or self.url, timeout=10) as http:
            text = (await http.get("/metrics")).text
        return int(metric(text, SUBSCRIPTIONS, state=state))

    async def until_subscriptions(self, state: str, accepts: Callable[[int], bool]) -> None:
        """Until its count of subscriptions in `state` is one `accepts`."""
        counted: list[int] = []

        async def accepted() -> bool:
            counted.append(await self.subscriptions(state))
            return accepts(counted[-1])

        await eventually(
            accepted, what=lambda: f"{state} subscriptions: {counted[-1:]}", within=WAIT
        )


@asynccontextmanager
async def instances(backend: Backend, count: int, **settings: str) -> AsyncIterator[list[Instance]]:
    """`count` servers on one new table, each reading its stream (outside `local`, one)."""
    table_name = await fresh_table(backend)
    metrics, metrics_url = {"metrics": METRICS}, ""
    if settings.get("env", "local") != "local":
        assert count == 1, "an operators' port for one instance"
        port = free_port()
        metrics, metrics_url = (
            {"metrics": "port", "metrics_port": str(port)},
            f"http://{HOST}:{port}",
        )
    options = {
        "stream_poll_interval": POLL_SECONDS,
        "max_attempts": MAX_ATTEMPTS,
        **metrics,
        **settings,
    }
    async with served(backend.endpoint_url, table_name, count, **options) as urls:
        yield [Instance(url, metrics_url) for url in urls]
    await backend.client.delete_table(TableName=table_name)


class Subscription:
    """A subscription's events, gathered in the background."""

    def __init__(self, events: list[dict[str, Any]], task: asyncio.Task[None]) -> None:
        self.events = events
        self.task = task

    async def wait_for(self, count: int) -> list[dict[str, Any]]:
        await self.until(
            lambda: len(self.events) >= count, lambda: f"got {len(self.events)} events of {count}"
        )
        return self.events

    async def wait_for_version(self, payment_id: str, version: int) -> list[dict[str, Any]]:
        """The events, once the one of `payment_id`'s `version` is among them."""
        await self.until(
            lambda: any(
                event["payment"]["paymentId"] == payment_id and event["version"] == version
                for event in self.events
            ),
            lambda: f"no version {version} of {payment_id} in {self.events}",
        )
        return self.events

    async def until(self, done: Callable[[], bool], what: Callable[[], object]) -> None:
        """Until `done()`; what ended the subscription, if it did."""

        def checked() -> bool:
            if self.task.done():
                self.task.result()  # raises what ended it
            return done()

        await eventually(checked, what=what, within=WAIT, every=0.02)
