"""Budgets shared by a fleet (SPEC §21): the scenario that `tests/api/test_budgets_fleet.py`
asserts on and `bench.budget_fleet` reports. Instances sharing a broker (`fleet_settings`); a
quiet service client asks alone, then beside a noisy one offering ten times its budget round the
instances (from a process of its own); then the broker is killed for an outage, the noisy client
still asking, and started again until the budgets are shared once more.

Small rates keep it to about 15 s: the noisy client's budget is 60 a second (20 lookups of 3) with
a burst of 30, offered 200 lookups a second. A phase's bounds are on the seconds it took, from its
first request sent to its last answer: a loaded machine stretches them, and the budget refills
meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt

from harness.redis_server import RedisServer
from process.settings import DEV_JWT_SECRET

__all__ = [
    "BURST",
    "COST",
    "INSTANCES",
    "LOOKUP",
    "NOISY_CLIENT",
    "OFFERED",
    "QUIET_CLIENT",
    "QUIET_RATE",
    "RATE",
    "Contention",
    "Tally",
    "contend",
    "fleet_settings",
    "offer",
    "service_token",
    "states",
]

INSTANCES = 3
RATE = 60.0  # the noisy client's budget a second
BURST = 30  # the query cost limit here, which the burst may not be below
LOOKUP = {"query": '{ loan(userId: "u-1", loanId: "loan-1") { loanId userId } }'}  # 3, all used
COST = 3
OFFERED = 10 * RATE / COST  # lookups a second: ten times the budget
QUIET_RATE = 30.0  # the quiet client's lookups a second
NOISY_CLIENT, QUIET_CLIENT = "noisy-client", "quiet-client"
SHARED = ["shared"] * INSTANCES
BACK_WITHIN = 10.0  # seconds the budgets may take to be shared again once the broker is back


def service_token(client: str) -> str:
    """A development token of a service client (`azp`), valid for three hours."""
    claims = {"sub": f"{client}-job", "azp": client, "scope": "payments:read payments:service"}
    return jwt.encode(claims | {"exp": int(time.time()) + 10800}, DEV_JWT_SECRET, "HS256")


def fleet_settings(broker_url: str, *overrides: str, **settings: str) -> dict[str, str]:
    """The instances' settings (`harness.processes.serving`): the broker, the noisy client's
    budget and `overrides` (`client=rate/burst`), and `settings`."""
    budgets = ",".join([f"{NOISY_CLIENT}={RATE}/{BURST}", *overrides])
    return {
        "live_broker_url": broker_url,
        "max_query_cost": str(BURST),
        "budget_overrides": budgets,
        "budget_expected_instances": str(INSTANCES),
        # Each instance's first parse of the lookup costs what the lookup does: its budgets are
        # the point, not the first parse's (tests/api/test_budgets.py).
        "budget_new_document_cost": "1",
        **settings,
    }


@dataclass
class Tally:
    """What came back of the requests offered, and when the first was sent and the last
    answered (`time.monotonic`)."""

    offered: int = 0
    admitted: int = 0
    throttled: int = 0
    failed: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0

    @property
    def seconds(self) -> float:
        return self.ended - self.started


async def offer(
    http: httpx.AsyncClient,
    urls: list[str],
    bearer: str,
    per_second: float,
    seconds: float,
    body: dict[str, Any] = LOOKUP,
) -> Tally:
    """`body` POSTed at a fixed rate (not waiting for answers), round the instances: what came
    back."""
    tally = Tally()
    headers = {"authorization": f"Bearer {bearer}"}

    async def one(url: str) -> None:
        started = time.perf_counter()
        try:
            answer = await http.post(f"{url}/graphql", json=body, headers=headers)
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
    tally.offered = int(per_second * seconds)
    tally.started = start = time.monotonic()
    for n in range(tally.offered):
        await asyncio.sleep(max(0.0, start + n / per_second - time.monotonic()))
        tasks.append(asyncio.create_task(one(urls[n % len(urls)])))
    await asyncio.gather(*tasks)
    tally.ended = time.monotonic()
    return tally


def offered_apart(urls: list[str], bearer: str, per_second: float, seconds: float) -> Tally:
    """`offer` from a process of its own, so that the noisy client's sending takes no time from
    the quiet one's measurements (one process's loop would delay the quiet answers' reading)."""

    async def run() -> Tally:
        limits = httpx.Limits(max_connections=400)
        async with httpx.AsyncClient(timeout=30, limits=limits) as http:
            return await offer(http, urls, bearer, per_second, seconds)

    return asyncio.run(run())


async def states(http: httpx.AsyncClient, urls: list[str]) -> list[str]:
    """Each instance's budgets as `/readyz`'s detail says: `shared`, `local: broker unavailable`."""
    return [(await http.get(f"{url}/readyz")).json().get("budgets") for url in urls]


@dataclass
class Contention:
    """What each phase gave: the quiet client alone and beside the noisy one, the noisy one
    beside it and while the broker was down; the instances' budgets at each step."""

    before: list[str]
    alone: Tally
    quiet: Tally
    noisy: Tally
    after: list[str]  # once the noisy phase ended
    during: Tally
    down: list[str]
    back: list[str]
    back_seconds: float

    @property
    def admitted(self) -> int:
        return self.noisy.admitted * COST

    @property
    def admitted_down(self) -> int:
        return self.during.admitted * COST

    @property
    def bound(self) -> float:
        """The most the shared budget may admit the noisy client over its phase."""
        return RATE * self.noisy.seconds + BURST

    @property
    def bound_down(self) -> float:
        """The most the instances' shares may admit it while the broker is down."""
        return RATE * self.during.seconds + INSTANCES * BURST

    def failed(self) -> list[str]:
        return [*self.alone.failed, *self.quiet.failed, *self.noisy.failed, *self.during.failed]

    def figures(self) -> dict[str, object]:
        return {
            "noisy admitted, its bound, seconds": (self.admitted, self.bound, self.noisy.seconds),
            "the same, broker down": (self.admitted_down, self.bound_down, self.during.seconds),
            "quiet throttled": (self.alone.throttled, self.quiet.throttled),
            "budgets before, after, down, back": (self.before, self.after, self.down, self.back),
            "shared again after": self.back_seconds,
        }


async def contend(
    urls: list[str],
    broker: RedisServer,
    *,
    alone_seconds: float = 3.0,
    seconds: float = 6.0,
    outage: float = 3.0,
) -> Contention:
    """The scenario on the instances at `urls`, sharing `broker`."""
    noisy, quiet = service_token(NOISY_CLIENT), service_token(QUIET_CLIENT)
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    loop = asyncio.get_running_loop()
    async with (
        httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=400)) as http,
        contextlib.AsyncExitStack() as stack,
    ):
        stack.callback(pool.shutdown)
        # Started (and its imports done) before anything is measured.
        await loop.run_in_executor(pool, offered_apart, urls, noisy, 1.0, 0.0)
        before = await states(http, urls)
        await offer(http, urls, quiet, QUIET_RATE, 1.0)  # warm the connections
        alone = await offer(http, urls, quiet, QUIET_RATE, alone_seconds)
        noisy_tally, quiet_tally = await asyncio.gather(
            loop.run_in_executor(pool, offered_apart, urls, noisy, OFFERED, seconds),
            offer(http, urls, quiet, QUIET_RATE, seconds),
        )
        after = await states(http, urls)

        # The broker killed: each instance holds its share (RATE / 3, a burst of BURST).
        broker.kill()
        during = await offer(http, urls, noisy, OFFERED, outage)
        down = await states(http, urls)
        broker.start()
        # The breaker's second, then the next request tries the broker: shared again within a
        # few seconds of traffic.
        back_from = time.monotonic()
        back = down
        while back != SHARED and time.monotonic() < back_from + BACK_WITHIN:
            await offer(http, urls, quiet, QUIET_RATE * INSTANCES, 0.5)
            back = await states(http, urls)
    return Contention(
        before=before,
        alone=alone,
        quiet=quiet_tally,
        noisy=noisy_tally,
        after=after,
        during=during,
        down=down,
        back=back,
        back_seconds=time.monotonic() - back_from,
    )
