"""`python -m bench.observability_cost [--quick]`: what the request log line and the metrics
cost on one payment by id, as a share of the request's CPU (issue 59: at most 5%).

The service as `make run` serves it (`local` and its defaults: the request log on, as JSON
lines on stderr, here a file; the metrics on), unpinned, on one DynamoDB Local, twice, each
through a hook of this bench's (no setting of the service) on `Metrics.observe`, the one
observer of a finished operation, which counts its metrics and writes its request line: `on`
times it (the CPU time of its thread, `time.thread_time_ns`, around each call, less what the
two readings of the clock add), `off` makes it a no-op. Live updates and webhook delivery are
off in both: they are not the request. Each round wrk sends each server the one-payment query
on 16 connections in turn, the order alternating; a server's CPU per request is read from
/proc. Three readings of the share:
- `share` (the target's): `on`'s CPU inside `Metrics.observe` and in writing the lines it left
  for the end of the loop's pass (`JsonHandler.write_pending`) over all its CPU, in each round;
- `share_on_off`: 1 - off/on of the two servers' CPU per request in each round, which also
  holds what the observer costs the rest of the request (its cache lines, its garbage), but
  moves with the machine's load between two runs;
- `py_spy_share`: py-spy's samples of `on` inside `Metrics.observe` over one more run, as the
  outside profile of issue 59 read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import runpy
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench import load
from bench.data import Workload
from bench.load import BUDGET_OVERRIDES, service_headers
from bench.profile import local_dynamodb
from harness.processes import Service

__all__ = ["QUICK", "SIDES", "TARGET", "measure", "render"]

WORKLOAD = "payment"
CONNECTIONS = 16
TARGET = 0.05  # the log and metrics' share of a one-payment request's CPU, at most
SIDES = ("on", "off")
# What `make run` would run besides the request (not measured here), and the layout of the
# bench's items (`bench.data`).
SETTINGS = {
    "metrics": "app",
    "log_level": "INFO",
    "live_updates": "false",
    "webhooks": "false",
    "gsi2_shards": "1",
    "events_shards": "1",
    "budget_overrides": BUDGET_OVERRIDES,
}
OBSERVER = "Metrics.observe (server/request_records.py:"  # how py-spy names its frames
HOOKED = "--serve-hooked"
READ_SECONDS = 10.0


@dataclass(frozen=True)
class Options:
    seconds: float  # each server's run in a round
    rounds: int
    warmup_seconds: float
    profile_seconds: int


# Short runs, many rounds: the machine's noise moves with time, and each round's on/off ratio
# is of runs seconds apart.
DEFAULT = Options(seconds=3, rounds=15, warmup_seconds=3, profile_seconds=10)
QUICK = Options(seconds=1, rounds=1, warmup_seconds=1, profile_seconds=1)


class Hooked(Service):
    """The service, run through this module, which first hooks `Metrics.observe`: `timed`
    (its CPU time written to `report` at each SIGUSR1) or `off`."""

    def __init__(self, endpoint_url: str, table_name: str, hook: str, report: Path) -> None:
        super().__init__(endpoint_url, table_name, SETTINGS)
        python, *arguments = self._command
        self.report = report
        self._command = [python, "-m", "bench.observability_cost", HOOKED, hook, str(report)]
        self._command += arguments

    async def observer_cpu(self) -> tuple[float, int]:
        """The CPU seconds spent in `Metrics.observe` so far, and its calls."""
        self.report.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + READ_SECONDS
        while not self.report.exists() or not self.report.read_text().endswith("\n"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} never wrote {self.report}:\n{self.log_tail()}")
            await asyncio.sleep(0.01)
        nanoseconds, calls = self.report.read_text().split()
        return float(nanoseconds) / 1e9, int(calls)


def serve_hooked(hook: str, report: str, arguments: list[str]) -> None:
    """`arguments` (`-m <module> serve`, as `Service` runs it) with `Metrics.observe` hooked."""
    from process.logs import JsonHandler
    from server.request_records import Metrics

    observe, write_pending, spent = Metrics.observe, JsonHandler.write_pending, [0, 0]
    # What two readings of the clock add between them (a system call each): taken off each call.
    overhead = statistics.median(
        -time.thread_time_ns() + time.thread_time_ns() for _ in range(10_000)
    )

    def timed(self: Metrics, observed: Any) -> None:
        started = time.thread_time_ns()
        observe(self, observed)
        spent[0] += time.thread_time_ns() - started
        spent[1] += 1

    def timed_writes(self: JsonHandler) -> None:
        # The request lines are written once per pass of the event loop, outside `observe`:
        # still the observer's cost (counted in its time, not as calls).
        started = time.thread_time_ns()
        write_pending(self)
        spent[0] += time.thread_time_ns() - started - int(overhead)

    def unobserved(self: Metrics, observed: Any) -> None:
        pass

    def write_report(*_: Any) -> None:
        Path(report).write_text(f"{spent[0] - overhead * spent[1]:.0f} {spent[1]}\n")

    Metrics.observe = {"timed": timed, "off": unobserved}[hook]  # type: ignore[method-assign]
    if hook == "timed":
        JsonHandler.write_pending = timed_writes  # type: ignore[method-assign]
    signal.signal(signal.SIGUSR1, write_report)
    flag, module, *rest = arguments
    if flag != "-m":
        raise SystemExit(f"expected `-m <module> ...`, got {arguments}")
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


@contextlib.asynccontextmanager
async def started(endpoint: str, table: str) -> AsyncIterator[dict[str, Hooked]]:
    with tempfile.TemporaryDirectory() as folder:
        services = {
            "on": Hooked(endpoint, table, "timed", Path(folder) / "on"),
            "off": Hooked(endpoint, table, "off", Path(folder) / "off"),
        }
        try:
            for service in services.values():
                service.start()
            for service in services.values():
                service.wait_listening()
            yield services
        finally:
            for service in services.values():
                service.stop()


def request_lines(service: Service) -> int:
    """The request log lines at the end of `service`'s output (JSON, as `make run` writes them
    to a file)."""
    lines = service.log_tail(20_000).splitlines()[1:]  # the first may be cut
    return sum(
        1
        for line in lines
        if line.startswith("{") and orjson.loads(line).get("name") == "loc_payments.request"
    )


async def sampled_share(
    service: Service, seconds: int, run: Callable[[], Awaitable[Any]]
) -> float | None:
    """py-spy's samples of `service` inside `Metrics.observe` over all of its samples while
    `run` loads it, or None when py-spy cannot attach here (it needs ptrace)."""
    py_spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}")
    py_spy = py_spy or shutil.which("py-spy")
    if py_spy is None:
        return None
    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder) / "samples.txt"
        command = [py_spy, "record", "-p", str(service.pid), "-d", str(seconds), "-r", "250"]
        profiler = await asyncio.create_subprocess_exec(
            *command,
            *("-f", "raw", "-o", str(output)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await run()
        if await asyncio.wait_for(profiler.wait(), seconds + 30) != 0 or not output.exists():
            return None
        total = inside = 0
        for line in output.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            total += int(count)
            inside += int(count) if OBSERVER in stack else 0
    return inside / total if total else None


async def measure(options: Options, *, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Each side's CPU ms per request and rate (the medians of the rounds), and the three
    readings of the share: each round's, their median and spread."""
    async with local_dynamodb() as (settings, work):
        workload: Workload = work[WORKLOAD]
        assert settings.dynamodb_endpoint is not None
        async with started(settings.dynamodb_endpoint, settings.table_name) as services:
            headers = service_headers()

            async def run(side: str, seconds: float) -> Round:
                service = services[side]
                before = await service.observer_cpu()
                found = await load.timed_run(service, workload, headers, CONNECTIONS, seconds)
                after = await service.observer_cpu()
                return Round(found, after[0] - before[0], after[1] - before[1])

            for side in SIDES:
                await run(side, options.warmup_seconds)
            rounds: list[dict[str, Round]] = []
            for number in range(options.rounds):
                turn = SIDES if number % 2 == 0 else SIDES[::-1]
                rounds.append({side: await run(side, options.seconds) for side in turn})
                log(f"observability cost: round {number + 1} of {options.rounds}")
            logged = {side: request_lines(services[side]) for side in SIDES}
            if not logged["on"] or logged["off"]:
                raise RuntimeError(f"request lines at the end of each side's output: {logged}")
            profiled = await sampled_share(
                services["on"],
                options.profile_seconds,
                lambda: run("on", options.profile_seconds + 1),
            )
    return summary(rounds, options) | {"py_spy_share": profiled}


@dataclass(frozen=True)
class Round:
    """One side's run: wrk's and /proc's figures, and the observer's CPU seconds and calls."""

    run: load.Run
    observer_seconds: float
    observed: int

    @property
    def cpu_ms(self) -> float:
        return 1000 * self.run.server_cpu_seconds / self.run.requests

    @property
    def observer_share(self) -> float:
        return self.observer_seconds / self.run.server_cpu_seconds


def _spread(values: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(values), "low": min(values), "high": max(values)}


def summary(rounds: list[dict[str, Round]], options: Options) -> dict[str, Any]:
    on = [found["on"] for found in rounds]
    return {
        "workload": WORKLOAD,
        "connections": CONNECTIONS,
        "seconds": options.seconds,
        "rounds": options.rounds,
        **{
            f"{side}_cpu_ms": statistics.median(found[side].cpu_ms for found in rounds)
            for side in SIDES
        },
        **{
            f"{side}_requests_per_second": statistics.median(
                found[side].run.rate for found in rounds
            )
            for side in SIDES
        },
        "observer_us": statistics.median(1e6 * r.observer_seconds / r.observed for r in on),
        # Every request answered was observed once (a few more may end as a run ends).
        "observed_per_request": sum(r.observed for r in on) / sum(r.run.requests for r in on),
        "share": _spread([r.observer_share for r in on]),
        "share_on_off": _spread([1 - found["off"].cpu_ms / found["on"].cpu_ms for found in rounds]),
        "target": TARGET,
        "met": statistics.median(r.observer_share for r in on) <= TARGET,
    }


def render(results: dict[str, Any]) -> str:
    share, on_off, profiled = results["share"], results["share_on_off"], results["py_spy_share"]

    def spread(reading: dict[str, float]) -> str:
        return f"{reading['median']:.1%} (rounds {reading['low']:.1%} to {reading['high']:.1%})"

    met = "met" if results["met"] else "NOT met"
    return "\n".join(
        [
            "Request log and metrics on one payment by id: `make run`'s service unpinned on "
            f"DynamoDB Local, wrk on {results['connections']} connections, "
            f"{results['rounds']} rounds of {results['seconds']:g} s a side",
            f"  CPU ms per request: on {results['on_cpu_ms']:.3f}, off {results['off_cpu_ms']:.3f} "
            f"({results['on_requests_per_second']:,.0f} and "
            f"{results['off_requests_per_second']:,.0f} requests/s)",
            f"  CPU in Metrics.observe: {results['observer_us']:.1f} us a request, "
            f"{spread(share)} of on's CPU",
            f"  1 - off/on: {spread(on_off)}",
            "  py-spy, samples in Metrics.observe: "
            + ("not available (py-spy cannot attach)" if profiled is None else f"{profiled:.1%}"),
            f"  target (CPU in Metrics.observe <= {results['target']:.0%} of on's): {met}",
        ]
    )


if __name__ == "__main__":
    if sys.argv[1:2] == [HOOKED]:
        serve_hooked(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        from bench.profile import quietly

        options = QUICK if "--quick" in sys.argv else DEFAULT
        print(render(quietly(measure(options, log=lambda line: print(line, file=sys.stderr)))))
