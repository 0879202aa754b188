"""`python -m bench.storm [--quick]`: a throttling storm (`harness.storm`) on the service, as a
server process on DynamoDB Local behind the throttling proxy, four clients reading and writing for
15 s while DynamoDB throttles. Once per retry mode: `standard`
(the service's retries alone, its default) and `adaptive` (botocore's client-side rate limiter
on top), so that the figures say which meets a storm better.

A calm run first measures the service's rate of data calls; then each mode meets two storms:
half of the calls throttled at random, and a table whose capacity is half that rate (the calls
beyond it throttled, as a table at its capacity does: slowing down is what ends it).

The targets (issue 48), on the default mode and the random storm: reads served and writes done
the first time, no 5xx, no throttle answered as anything but UNAVAILABLE, nothing written twice,
the breaker never opened, and normal answers within 2 s of the storm's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import jwt

from bench import data, load, local_database
from bench.report import Target
from datasource import create_table_if_missing
from harness.processes import serving
from harness.proxy import proxy_to
from harness.storm import StormFigures, storm
from process.settings import DEV_JWT_SECRET

__all__ = ["DEFAULT", "QUICK", "measure", "render", "targets"]

MODES = ("standard", "adaptive")
DEFAULT_MODE = "standard"
READS_SERVED = 0.99
WRITES_FIRST_TIME = 0.95
RECOVERED_WITHIN = 2.0


@dataclasses.dataclass(frozen=True)
class Options:
    seconds: float = 15.0
    fraction: float = 0.5
    clients: int = 4
    # The calm run (no throttle) that measures the service's rate of data calls, and the share
    # of that rate the capacity storm's table can take.
    calm_seconds: float = 5.0
    capacity_share: float = 0.5


DEFAULT = Options()
QUICK = Options(seconds=1.0, calm_seconds=0.5)


async def measure(
    options: Options, *, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    started = time.monotonic()
    claims = {"sub": load.BENCH_CLIENTS[2], "scope": "payments:read payments:service"}
    token = jwt.encode(claims | {"exp": int(time.time()) + 3600}, DEV_JWT_SECRET, "HS256")
    with local_database.dynamodb() as endpoint:
        async with data.raw_client(endpoint) as client:

            async def run(mode: str, seconds: float, **storm_of: Any) -> dict[str, Any]:
                table = f"storm-bench-{uuid.uuid4().hex[:12]}"
                await create_table_if_missing(client, table)
                try:
                    async with (
                        proxy_to(endpoint) as proxy,
                        serving(proxy.url, table, metrics="app", dynamodb_retry_mode=mode) as [
                            service
                        ],
                    ):
                        log(f"storm ({mode}, {storm_of}): {seconds:g} s, {options.clients} clients")
                        figures = await storm(
                            service.url,
                            proxy,
                            token=token,
                            seconds=seconds,
                            clients=options.clients,
                            metrics_url=f"{service.url}/metrics",
                            **storm_of,
                        )
                finally:
                    with contextlib.suppress(Exception):
                        await client.delete_table(TableName=table)
                return _record(figures)

            calm = await run(DEFAULT_MODE, options.calm_seconds, fraction=0.0)
            capacity = round(calm["data_calls"] / calm["seconds"] * options.capacity_share, 1)
            random_storm = {
                mode: await run(mode, options.seconds, fraction=options.fraction) for mode in MODES
            }
            capacity_storm = {
                mode: await run(mode, options.seconds, fraction=0.0, capacity=capacity)
                for mode in MODES
            }
    return {
        "default_mode": DEFAULT_MODE,
        "calm": calm,
        "modes": random_storm,
        "capacity": capacity_storm,
        "seconds": round(time.monotonic() - started, 1),
    }


def _record(figures: StormFigures) -> dict[str, Any]:
    return dataclasses.asdict(figures) | {
        "read_share": round(figures.read_share, 4),
        "write_share": round(figures.write_share, 4),
        "requests_per_second": round(figures.requests_per_second, 1),
        "calls_per_request": round(figures.data_calls / max(1, figures.reads + figures.writes), 2),
    }


def targets(results: dict[str, Any]) -> list[Target]:
    """The storm's targets, on the default mode."""
    figures = results["modes"][results["default_mode"]]
    on = "storm"
    return [
        Target("storm: reads served", {on: figures["read_share"]}, READS_SERVED, "min"),
        Target(
            "storm: writes done the first time",
            {on: figures["write_share"]},
            WRITES_FIRST_TIME,
            "min",
        ),
        Target(
            "storm: 5xx, wrong answers, payments stored wrong, breaker opens",
            {
                "5xx": figures["server_errors"],
                "wrong answers": figures["wrong_answers"],
                "stored wrong": figures["stored_wrong"],
                "breaker opens": figures["breaker_opens"] or 0,
            },
            0,
            "equal",
        ),
        Target(
            "storm: seconds to normal answers after it",
            {on: figures["recovered_seconds"]},
            RECOVERED_WITHIN,
            "max",
        ),
    ]


def _line(mode: str, figures: dict[str, Any], default: str) -> str:
    chosen = " (the default)" if mode == default else ""
    return (
        f"- `{mode}`{chosen}: reads served {figures['read_share']:.1%} "
        f"({figures['reads_served']} of {figures['reads']}), writes done the first time "
        f"{figures['write_share']:.1%} ({figures['writes_first_time']} of {figures['writes']}), "
        f"{figures['requests_per_second']:g} requests a second; p99 during the storm: reads "
        f"{figures['read_p99_ms']} ms, writes {figures['write_p99_ms']} ms; "
        f"{figures['data_calls']} DynamoDB data calls ({figures['calls_per_request']} a request), "
        f"{figures['throttled']} throttled; {figures['server_errors']} 5xx, "
        f"{figures['wrong_answers']} wrong answers, {figures['stored_wrong']} payments stored "
        f"wrong, breaker opened {figures['breaker_opens']:g} times; normal answers "
        f"{figures['recovered_seconds']:.2f} s after the storm"
    )


def render(results: dict[str, Any]) -> str:
    default, calm = results["default_mode"], results["calm"]
    some = results["modes"][default]
    capacity = results["capacity"][default]["capacity"]
    verdicts = "; ".join(
        f"{target.name}: {'met' if target.met else 'NOT met'}" for target in targets(results)
    )
    return "\n".join(
        [
            f"Throttling storms, {some['clients']} clients on a server process on DynamoDB Local "
            f"(calm, without throttles: {calm['requests_per_second']:g} requests a second, "
            f"{calm['calls_per_request']} DynamoDB data calls a request).",
            f"{some['fraction']:.0%} of the data calls throttled at random for "
            f"{some['seconds']:g} s:",
            *(_line(mode, figures, default) for mode, figures in results["modes"].items()),
            f"A table whose capacity is {capacity:g} data calls a second (half the calm rate) "
            f"for {some['seconds']:g} s:",
            *(_line(mode, figures, default) for mode, figures in results["capacity"].items()),
            f"Targets (random storm, `{default}`): {verdicts}.",
        ]
    )


if __name__ == "__main__":
    options = QUICK if "--quick" in sys.argv else DEFAULT
    found = asyncio.run(measure(options, log=lambda line: print(line, file=sys.stderr)))
    print(render(found))
