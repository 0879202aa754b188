"""`python -m bench.budget_fleet [--quick]`: per-client budgets in a fleet (SPEC §21), the figures
`make test` does not assert (a loaded machine misses them): `harness.budget_fleet`'s scenario on
three instances sharing a Redis broker on one DynamoDB Local table, at the service's own broker
timeout. The quiet client's p99 alone and beside the noisy one; the noisy client's admitted cost
against 0.9 x rate x time and rate x time + burst, shared and with the broker killed (the time
each phase took, from its first request to its last answer).

Then what a refusal costs the servers: their CPU (/proc, the three processes) over phases of only
refused one-payment lookups (a client whose budget is spent) and of only admitted ones (the
bench's `payment` workload), at the same rate, less their CPU when idle over as long; rounds in
rotating order, medians. Target (SPEC §21): a refusal at most a quarter of an admitted lookup."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from bench import data, local_database
from bench.report import Target
from datasource import create_table_if_missing
from harness import budget_fleet
from harness.budget_fleet import BURST, COST, INSTANCES, RATE, Contention, Tally
from harness.processes import Service, serving
from harness.redis_server import RedisServer

__all__ = ["DEFAULT", "QUICK", "Options", "measure", "render", "targets"]

REFUSED_CLIENT = "refused-client"  # a budget that refills a unit in about 17 minutes
REFUSAL_TARGET = 0.25  # a refusal's CPU over an admitted one-payment lookup's, at most
LEAST_SHARE = 0.9  # the noisy client's admissions against its rate x time: a figure, no target


@dataclasses.dataclass(frozen=True)
class Options:
    alone_seconds: float = 3.0
    seconds: float = 6.0
    outage: float = 3.0
    cpu_seconds: float = 3.0  # each phase of the CPU comparison
    cpu_rounds: int = 3
    cpu_per_second: float = 150.0  # one-payment lookups offered a second in those phases


DEFAULT = Options()
QUICK = Options(alone_seconds=1.0, seconds=2.0, outage=1.0, cpu_seconds=1.0, cpu_rounds=1)


async def measure(
    options: Options, *, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    started, table = time.monotonic(), f"budgets-bench-{uuid.uuid4().hex[:12]}"
    stored = list(data.items(users=range(1), loans_per_user=1, payments_per_loan=1))
    lookup = data.workloads(stored)["payment"]
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(local_database.dynamodb())
        broker = RedisServer()
        broker.start()
        stack.callback(broker.stop)
        settings = budget_fleet.fleet_settings(broker.redis_url, f"{REFUSED_CLIENT}=0.001/{BURST}")
        async with data.raw_client(endpoint) as client:
            await create_table_if_missing(client, table)
            try:
                await data.load(client, table, iter(stored))
                async with serving(endpoint, table, INSTANCES, **settings) as fleet:
                    log(f"budgets: {INSTANCES} instances sharing a broker; a refusal's CPU")
                    body = {"query": lookup.query, "variables": lookup.variables}
                    refusal = await _refusal_cpu(fleet, body, options)
                    log("budgets: a noisy client beside a quiet one, then the broker killed")
                    contention = await budget_fleet.contend(
                        [service.url for service in fleet],
                        broker,
                        alone_seconds=options.alone_seconds,
                        seconds=options.seconds,
                        outage=options.outage,
                    )
            finally:
                with contextlib.suppress(Exception):
                    await client.delete_table(TableName=table)
    return _record(options, contention) | {
        "refusal": refusal,
        "seconds": round(time.monotonic() - started, 1),
    }


async def _refusal_cpu(
    fleet: list[Service], body: dict[str, Any], options: Options
) -> dict[str, Any]:
    urls = [service.url for service in fleet]
    admitted = budget_fleet.service_token(budget_fleet.QUIET_CLIENT)
    refused = budget_fleet.service_token(REFUSED_CLIENT)
    phases: dict[str, str | None] = {"idle": None, "refused": refused, "admitted": admitted}
    rate, seconds = options.cpu_per_second, options.cpu_seconds
    by_round: list[dict[str, float]] = []
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=400)) as http:
        # Every instance's connections warm and the lookup's document parsed; the refused
        # client's burst spent, through every instance (one that never charged it would hold
        # a full share of it, should the broker be slow).
        await budget_fleet.offer(http, urls, admitted, rate, 1.0, body)
        await budget_fleet.offer(http, urls, refused, 4.0 * INSTANCES, 1.0, body)
        for turn in range(options.cpu_rounds):
            first = turn % len(phases)
            order = list(phases)[first:] + list(phases)[:first]
            spent: dict[str, tuple[float, float, Tally | None]] = {}
            for name in order:
                bearer = phases[name]
                cpu, wall = _cpu(fleet), time.monotonic()
                tally = None
                if bearer is None:
                    await asyncio.sleep(seconds)
                else:
                    tally = await budget_fleet.offer(http, urls, bearer, rate, seconds, body)
                spent[name] = (_cpu(fleet) - cpu, time.monotonic() - wall, tally)
            by_round.append(_per_request(spent))
    refused_ms = statistics.median(r["refused_ms"] for r in by_round)
    admitted_ms = statistics.median(r["admitted_ms"] for r in by_round)
    ratios = [r["refused_ms"] / r["admitted_ms"] for r in by_round]
    ratio = refused_ms / admitted_ms
    return {
        "refused_cpu_ms": round(refused_ms, 3),
        "admitted_cpu_ms": round(admitted_ms, 3),
        "ratio": round(ratio, 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        "idle_cpu_ms_per_second": round(statistics.median(r["idle_ms_s"] for r in by_round), 2),
        "refused_but_admitted": sum(int(r["refused_but_admitted"]) for r in by_round),
        "admitted_but_refused": sum(int(r["admitted_but_refused"]) for r in by_round),
        "rounds": by_round,
        "target": REFUSAL_TARGET,
        "met": ratio <= REFUSAL_TARGET,
    }


def _cpu(fleet: list[Service]) -> float:
    return sum(service.cpu_seconds() for service in fleet)


def _per_request(spent: dict[str, tuple[float, float, Tally | None]]) -> dict[str, float]:
    """A round's CPU per request of each phase, the idle CPU over as long taken off; and how
    many of the refused client's lookups were admitted all the same (none unless the broker was
    too slow and an instance charged its own share)."""
    idle_cpu, idle_wall, _ = spent["idle"]
    idle = idle_cpu / idle_wall
    found = {"idle_ms_s": idle * 1000}
    for name in ("refused", "admitted"):
        cpu, wall, tally = spent[name]
        assert tally is not None
        if tally.failed or tally.admitted + tally.throttled != tally.offered:
            raise RuntimeError(f"a phase of {name} lookups failed: {tally.failed[:3]}")
        found[f"{name}_ms"] = (cpu - idle * wall) / tally.offered * 1000
    refused, admitted = spent["refused"][2], spent["admitted"][2]
    assert refused is not None and admitted is not None
    found["refused_but_admitted"] = refused.admitted
    found["admitted_but_refused"] = admitted.throttled
    return found


def _ms(latencies: list[float], q: float) -> float | None:
    """The nearest-rank quantile in milliseconds; None when nothing was measured."""
    ordered = sorted(latencies)
    if not ordered:
        return None
    return round(ordered[max(1, math.ceil(q * len(ordered))) - 1] * 1000, 1)


def _phase(tally: Tally, bursts: int) -> dict[str, Any]:
    """The noisy client's admitted cost against its rate over the time the phase took."""
    return {
        "offered": tally.offered,
        "admitted_cost": tally.admitted * COST,
        "throttled": tally.throttled,
        "seconds": round(tally.seconds, 2),
        "least": round(LEAST_SHARE * RATE * tally.seconds, 1),
        "most": round(RATE * tally.seconds + bursts * BURST, 1),
    }


def _record(options: Options, found: Contention) -> dict[str, Any]:
    return {
        "settings": dataclasses.asdict(options)
        | {
            "instances": INSTANCES,
            "rate": RATE,
            "burst": BURST,
            "lookup_cost": COST,
            "noisy_per_second": budget_fleet.OFFERED,
            "quiet_per_second": budget_fleet.QUIET_RATE,
        },
        "quiet": {
            "offered": found.alone.offered + found.quiet.offered,
            "served": found.alone.admitted + found.quiet.admitted,
            "throttled": found.alone.throttled + found.quiet.throttled,
            "p99_alone_ms": _ms(found.alone.latencies, 0.99),
            "p99_beside_noisy_ms": _ms(found.quiet.latencies, 0.99),
            "p50_alone_ms": _ms(found.alone.latencies, 0.5),
            "p50_beside_noisy_ms": _ms(found.quiet.latencies, 0.5),
        },
        "noisy": _phase(found.noisy, 1),
        "outage": _phase(found.during, INSTANCES)
        | {"shared_again_s": round(found.back_seconds, 2)},
        "states": {
            "before": found.before,
            "after": found.after,
            "down": found.down,
            "back": found.back,
        },
        "failed": found.failed()[:10],
    }


def targets(results: dict[str, Any]) -> list[Target]:
    refusal = results["refusal"]
    name = "budgets: a refusal's server CPU / an admitted one-payment lookup's"
    return [Target(name, {"fleet": refusal["ratio"]}, REFUSAL_TARGET, "max")]


def _against(phase: dict[str, Any], bursts: str) -> str:
    least = "reached" if phase["admitted_cost"] >= phase["least"] else "NOT reached"
    most = "within" if phase["admitted_cost"] <= phase["most"] else "NOT within"
    return (
        f"{phase['admitted_cost']:,} of cost admitted in {phase['seconds']:g} s "
        f"({phase['throttled']:,} lookups refused); 0.9 x rate x time {phase['least']:g}: "
        f"{least}; rate x time + {bursts} {phase['most']:g}: {most}"
    )


def render(results: dict[str, Any]) -> str:
    settings, quiet, refusal = results["settings"], results["quiet"], results["refusal"]
    noisy = _against(results["noisy"], "burst")
    outage = _against(results["outage"], f"{settings['instances']} bursts")
    failed = f"{len(results['failed'])} requests failed" if results["failed"] else "none failed"
    low, high = refusal["ratio_range"]
    slipped = refusal["refused_but_admitted"]
    slipped_note = f", {slipped} of the spent client's lookups admitted" if slipped else ""
    return (
        f"Budgets in a fleet: {settings['instances']} instances sharing a Redis broker on one "
        f"DynamoDB Local table. The quiet client, {settings['quiet_per_second']:g} lookups a "
        f"second: p99 {quiet['p99_alone_ms']} ms alone, {quiet['p99_beside_noisy_ms']} ms "
        f"beside the noisy one (p50 {quiet['p50_alone_ms']} and "
        f"{quiet['p50_beside_noisy_ms']} ms); {quiet['served']:,} of {quiet['offered']:,} "
        f"served, {quiet['throttled']} throttled. The noisy client, offered "
        f"{settings['noisy_per_second']:g} lookups of {settings['lookup_cost']} a second (ten "
        f"times its {settings['rate']:g} a second, burst {settings['burst']}) for "
        f"{settings['seconds']:g} s: {noisy}. The broker killed for {settings['outage']:g} s: "
        f"{outage}; shared again {results['outage']['shared_again_s']:g} s after it returned; "
        f"{failed}. A refusal costs the servers {refusal['refused_cpu_ms']:.3f} ms of CPU, an "
        f"admitted one-payment lookup {refusal['admitted_cpu_ms']:.3f} ms: "
        f"{refusal['ratio']:.2f} ({low:.2f}-{high:.2f} over {settings['cpu_rounds']} rounds of "
        f"{settings['cpu_seconds']:g} s at {settings['cpu_per_second']:g} a second, the idle "
        f"{refusal['idle_cpu_ms_per_second']:g} ms a second taken off{slipped_note}; target "
        f"at most {refusal['target']:g}: {'met' if refusal['met'] else 'NOT met'})"
    )


if __name__ == "__main__":
    options = QUICK if "--quick" in sys.argv else DEFAULT
    found = asyncio.run(measure(options, log=lambda line: print(line, file=sys.stderr)))
    print(render(found) + ".")
