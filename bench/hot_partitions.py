"""`python -m bench.hot_partitions`: the proof by simulation of SPEC §20 (issue 56), since this
machine cannot write 10,000 payments a second.

It measures R, the payment writes a second an autopay burst (`harness.autopay`) gets through
`python -m cli serve` on DynamoDB Local behind the tests' proxy; sets L = 1,000 x R / 10,000 write
units a second per partition key (each key's bucket `BUCKET_SECONDS` of L, at least
`BUCKET_UNITS`); and runs the burst at R with the proxy throttling every partition key at L
(`Proxy.throttle_partitions`), once with one shard and once at the defaults. For each run: the
throttles by index (the proxy's and the service's count), the writes done and refused, and each
index's busiest key with its share of the units.

Why the bucket is not a real second's: docs/scale-and-cost.md#a-capacity-model.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections import Counter
from dataclasses import dataclass, field

from bench.load import service_headers
from harness.autopay import BurstFigures, burst, throttles_counted
from harness.partitions import PARTITION_WRITE_UNITS, Limits
from harness.processes import serving
from harness.proxy import proxy_to
from process.embedded_dynamodb import EmbeddedDynamoDB

__all__ = ["Outcome", "Simulation", "simulate"]

TARGET = 10_000
BUCKET_SECONDS = 10.0
BUCKET_UNITS = 20.0
ONE_SHARD = {"gsi2_shards": "1", "events_shards": "1"}
# The measuring run: at least this many writes to take the rate from, in at most so many tries.
MEASURED_WRITES = 20
MEASURE_TRIES = 3


@dataclass(frozen=True, slots=True)
class Outcome:
    layout: str
    burst: BurstFigures
    # Throttles the proxy answered, by index; the service's count of throttled attempts.
    throttled: dict[str, int]
    throttles_counted: float
    # index -> (its busiest partition key, that key's share of the index's units).
    busiest: dict[str, tuple[str, float]] = field(default_factory=dict)

    @property
    def throttles(self) -> int:
        return sum(self.throttled.values())


@dataclass(frozen=True, slots=True)
class Simulation:
    rate: float  # R, payment writes a second
    limit: float  # L, write units a second per partition key
    one_shard: Outcome
    defaults: Outcome


def _busiest(limits: Limits) -> dict[str, tuple[str, float]]:
    by_index: dict[str, Counter[str]] = {}
    for (index, key), units in limits.admitted.items():
        by_index.setdefault(index, Counter())[key] += units
    return {
        index: (key, units / sum(counts.values()))
        for index, counts in sorted(by_index.items())
        for key, units in counts.most_common(1)
    }


async def _run(
    endpoint: str, table: str, layout: str, settings: dict[str, str], *, seconds: float,
    clients: int, limit: float | None, rate: float | None,
) -> Outcome:  # fmt: skip
    token = service_headers()["Authorization"].removeprefix("Bearer ")
    async with (
        proxy_to(endpoint) as proxy,
        serving(proxy.url, table, 1, metrics="app", **settings) as [service],
    ):
        if limit is None:
            limits = proxy.throttle_partitions(float("inf"))
        else:
            limits = proxy.throttle_partitions(limit, burst_units=bucket(limit))
        assert limits is not None
        figures = await burst(service.url, token=token, seconds=seconds, clients=clients, rate=rate)
        counted = await throttles_counted(f"{service.url}/metrics")
    throttled: Counter[str] = Counter()
    for (index, _), count in limits.throttled.items():
        throttled[index] += count
    return Outcome(layout, figures, dict(throttled), counted, _busiest(limits))


def bucket(limit: float) -> float:
    """The units a key's bucket holds at a limit of `limit` units a second."""
    return max(BUCKET_SECONDS * limit, BUCKET_UNITS)


async def simulate(
    endpoint: str, *, measure_seconds: float = 5.0, burst_seconds: float = 15.0, clients: int = 8
) -> Simulation:
    """R measured, then the burst at R with one shard and at the defaults (each on a table of
    its own at `endpoint`)."""
    run = uuid.uuid4().hex[:8]
    seconds = measure_seconds
    for attempt in range(MEASURE_TRIES):
        # A machine loaded by other work may finish few writes in the time: measured again,
        # longer, until there are enough to take a rate from.
        measured = await _run(
            endpoint, f"hot-measure-{run}-{attempt}", "defaults", {}, seconds=seconds,
            clients=clients, limit=None, rate=None,
        )  # fmt: skip
        if measured.burst.writes >= MEASURED_WRITES:
            break
        seconds *= 2
    else:
        raise RuntimeError(f"fewer than {MEASURED_WRITES} writes in {seconds / 2:g} s: no rate")
    rate = measured.burst.writes_per_second
    limit = PARTITION_WRITE_UNITS * rate / TARGET
    outcomes = []
    for layout, table, settings in [
        ("one shard", f"hot-one-shard-{run}", ONE_SHARD),
        ("defaults", f"hot-defaults-{run}", {}),
    ]:
        # Twice the clients: the pace, not the clients' round trips, sets the rate.
        outcome = await _run(
            endpoint, table, layout, settings, seconds=burst_seconds,
            clients=2 * clients, limit=limit, rate=rate,
        )  # fmt: skip
        outcomes.append(outcome)
    one_shard, defaults = outcomes
    return Simulation(rate, limit, one_shard, defaults)


def render(simulation: Simulation) -> str:
    lines = [
        f"R = {simulation.rate:.1f} payment writes/s; "
        f"L = 1,000 x R / 10,000 = {simulation.limit:.2f} write units/s per partition key "
        f"(a bucket of {bucket(simulation.limit):.1f} units)",
        "",
        "| layout | seconds | payment writes done (/s) | refused | throttles (proxy) "
        "| by index | throttles counted by the service | busiest key per index (share of units) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for outcome in (simulation.one_shard, simulation.defaults):
        figures = outcome.burst
        by_index = ", ".join(f"{index} {count}" for index, count in outcome.throttled.items())
        busiest = ", ".join(
            f"{index} {key} {share:.1%}" for index, (key, share) in outcome.busiest.items()
        )
        lines.append(
            f"| {outcome.layout} | {figures.seconds:.1f} | {figures.writes} "
            f"({figures.writes_per_second:.1f}) | {figures.refused} | {outcome.throttles} "
            f"| {by_index or 'none'} | {outcome.throttles_counted:g} | {busiest} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    with EmbeddedDynamoDB(data_dir=None) as database:
        result = asyncio.run(simulate(database.endpoint_url))
    print(render(result))
    sys.exit(0 if result.one_shard.throttles > 0 and result.defaults.throttles == 0 else 1)
