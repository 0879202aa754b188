"""Budgets shared by a fleet (SPEC §21, issue 58's "Done when"): three `python -m cli serve`
on one DynamoDB Local table sharing Debian's redis-server. A noisy service client offering ten
times its budget, spread over the instances, is admitted its rate (within 0.9 x rate x time and
rate x time + burst), while a quiet client on the same instances meets no throttle and keeps its
p99; the broker killed mid-run fails no request, each instance holds its share meanwhile (the
admitted total bounded accordingly), and the budgets are shared again once it returns.

Small rates keep it to about 15 s: the noisy client's budget is 60 a second (20 operations of 3)
with a burst of 30, offered 200 operations a second."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import time
from collections.abc import AsyncIterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import httpx
import pytest

from harness.redis_server import RedisServer
from tests.api.conftest import token
from tests.backends import Backend, fresh_table
from tests.servers import served

pytestmark = pytest.mark.ddblocal

INSTANCES = 3
RATE = 60.0  # the noisy client's budget a second
BURST = 30  # the query cost limit here, which the burst may not be below
LOOKUP = '{ loan(userId: "u-1", loanId: "loan-1") { loanId userId } }'  # costs 3, all used
COST = 3
OFFERED = 10 * RATE / COST  # operations a second: ten times the budget
QUIET_RATE = 30.0  # the quiet client's operations a second: enough answers for a p99
NOISY = token("noisy-job", service=True, azp="noisy-client")
QUIET = token("quiet-job", service=True, azp="quiet-client")


@dataclass
class Tally:
    admitted: int = 0
    throttled: int = 0
    failed: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)


async def offer(
    http: httpx.AsyncClient, urls: list[str], bearer: str, per_second: float, seconds: float
) -> Tally:
    """Requests at a fixed rate (not waiting for answers), round the instances: what came back."""
    tally = Tally()
    headers = {"authorization": f"Bearer {bearer}"}

    async def one(url: str) -> None:
        started = time.perf_counter()
        try:
            answer = await http.post(f"{url}/graphql", json={"query": LOOKUP}, headers=headers)
        except httpx.HTTPError as error:
            tally.failed.append(repr(error))
            return
        tally.latencies.append(time.perf_counter() - started)
        if answer.status_code == 429:
            tally.throttled += 1
        elif answer.status_code == 200 and "errors" not in answer.json():
            tally.admitted += 1
        else:
            tally.failed.append(f"{answer.status_code} {answer.text[:200]}")

    tasks = []
    start = time.monotonic()
    count = int(per_second * seconds)
    for n in range(count):
        await asyncio.sleep(max(0.0, start + n / per_second - time.monotonic()))
        tasks.append(asyncio.create_task(one(urls[n % len(urls)])))
    await asyncio.gather(*tasks)
    return tally


def offered_apart(urls: list[str], bearer: str, per_second: float, seconds: float) -> Tally:
    """`offer` from a process of its own, so that the noisy client's sending takes no time from
    the quiet one's measurements (one process's loop would delay the quiet answers' reading)."""

    async def run() -> Tally:
        limits = httpx.Limits(max_connections=400)
        async with httpx.AsyncClient(timeout=30, limits=limits) as http:
            return await offer(http, urls, bearer, per_second, seconds)

    return asyncio.run(run())


async def apart(
    pool: ProcessPoolExecutor, urls: list[str], bearer: str, per_second: float, seconds: float
) -> Tally:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(pool, offered_apart, urls, bearer, per_second, seconds)


def p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def states(http: httpx.AsyncClient, urls: list[str]) -> list[str]:
    return [(await http.get(f"{url}/readyz")).json().get("budgets") for url in urls]


@pytest.fixture
async def instances(
    ddblocal_backend: Backend, redis_server: RedisServer
) -> AsyncIterator[list[str]]:
    table_name = await fresh_table(ddblocal_backend)
    try:
        async with served(
            ddblocal_backend.endpoint_url,
            table_name,
            INSTANCES,
            live_broker_url=redis_server.redis_url,
            max_query_cost=str(BURST),
            budget_overrides=f"noisy-client={RATE}/{BURST}",
            budget_expected_instances=str(INSTANCES),
        ) as urls:
            yield urls
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)


@pytest.mark.quiet
async def test_a_noisy_client_gets_its_rate_a_quiet_one_its_p99_and_an_outage_fails_nothing(
    instances: list[str], redis_server: RedisServer
) -> None:
    figures: dict[str, object] = {}
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    # Started (and its imports done) before anything is measured.
    await apart(pool, instances, NOISY, 1.0, 0.0)
    async with (
        httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=400)) as http,
        contextlib.AsyncExitStack() as stack,
    ):
        stack.callback(pool.shutdown)
        assert await states(http, instances) == ["shared"] * INSTANCES
        await offer(http, instances, QUIET, QUIET_RATE, 1.0)  # warm the connections
        alone = await offer(http, instances, QUIET, QUIET_RATE, 3.0)

        seconds = 6.0
        noisy, quiet = await asyncio.gather(
            apart(pool, instances, NOISY, OFFERED, seconds),
            offer(http, instances, QUIET, QUIET_RATE, seconds),
        )
        admitted = noisy.admitted * COST
        figures["shared"] = (admitted, 0.9 * RATE * seconds, RATE * seconds + BURST)
        figures["quiet p99 alone, beside the noisy"] = (p99(alone.latencies), p99(quiet.latencies))

        # The broker killed: each instance holds its share (RATE / 3, a burst of BURST).
        redis_server.kill()
        outage = 3.0
        during = await offer(http, instances, NOISY, OFFERED, outage)
        figures["broker down"] = (during.admitted * COST, RATE * outage + INSTANCES * BURST)
        down = await states(http, instances)
        redis_server.start()
        # The breaker's second, then the next request tries the broker: shared again within a
        # few seconds of traffic.
        deadline = time.monotonic() + 10.0
        back = down
        while back != ["shared"] * INSTANCES and time.monotonic() < deadline:
            await offer(http, instances, QUIET, QUIET_RATE * INSTANCES, 0.5)
            back = await states(http, instances)
        figures["shared again after"] = 10.0 - (deadline - time.monotonic())
    print(figures)

    assert noisy.failed == quiet.failed == alone.failed == during.failed == []
    assert quiet.throttled == 0 and alone.throttled == 0
    assert 0.9 * RATE * seconds <= admitted <= RATE * seconds + BURST, figures
    assert during.admitted * COST <= RATE * outage + INSTANCES * BURST, figures
    assert during.admitted * COST >= 0.9 * RATE * outage, figures
    assert down == ["local: broker unavailable"] * INSTANCES
    assert back == ["shared"] * INSTANCES
    assert p99(quiet.latencies) <= 1.5 * p99(alone.latencies), figures
