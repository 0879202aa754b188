"""`python -m bench.outside`: the service against the Node peer on the loan page, measured as
someone outside the bench would (issue 67, item 3), to check the bench's own CPU ratio against.

The same two servers as `bench.saturation` (the service as `make run` runs it, the Node peer,
on one DynamoDB Local holding 10 loans of 100 payments), but nothing is pinned (every process
may run on every core; `--pin event-loop` pins as the bench does, each server's main thread on
the server core, `--pin all` every thread of each server as the bench did before issue 67), and
each server's CPU is its process tree's: every
process whose parent chain reaches the server's pid, each with all its threads (utime + stime
of /proc/<pid>/stat), read before and after each run. wrk (one thread, `--connections`) loads
one server at a time for `--seconds`, after one warm-up run of each of `--warmup` seconds; the
rounds interleave, the first side alternating. It prints, per side, the median CPU ms a page
and requests per CPU-second with their least and greatest over the rounds, and each round's
peer / service ratio of CPU a page.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import uvloop

from bench import load
from bench.saturation import Options, Saturation, bench_environment, thread_cpu
from harness.processes import CLOCK_TICKS, children

__all__ = ["main", "measure", "tree_cpu_seconds"]

SERVERS = ("service", "node")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of every thread) of `pid`, or None once it has gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds of `root` and every live descendant (each with all its threads)."""
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (found := _stat(int(entry.name))) is not None:
            parents[int(entry.name)], spent[int(entry.name)] = found

    def inside(pid: int) -> bool:
        while pid > 1:
            if pid == root:
                return True
            pid = parents.get(pid, 0)
        return False

    return sum(cpu for pid, cpu in spent.items() if inside(pid))


async def run(bench: Saturation, side: str, connections: int, seconds: float) -> dict[str, float]:
    server = bench.servers[side]
    before, main_before = tree_cpu_seconds(server.pid), thread_cpu(server.pid)[0]
    found = await load.run_load(
        f"http://{load.HOST}:{server.port}/graphql",
        bench.work["loan_page"].body,
        {"Content-Type": "application/json", **bench.headers},
        connections=connections,
        seconds=seconds,
        graphql=True,
    )
    load.check_served(found, f"{side}, loan_page on {connections} connections")
    cpu = tree_cpu_seconds(server.pid) - before
    main = thread_cpu(server.pid)[0] - main_before
    return {
        "requests": found.requests,
        "seconds": found.seconds,
        "cpu_seconds": cpu,
        "main_thread_cpu_seconds": main,
    }


async def measure(arguments: argparse.Namespace, log: Any) -> list[dict[str, Any]]:
    options = Options(users=10, payments_per_user=100, database_warmup_seconds=0)
    bench = Saturation(options)
    runs = []
    with bench_environment(), contextlib.ExitStack() as stack:
        stack.callback(bench.stop)
        await bench.start(log)
        everywhere = os.sched_getaffinity(0)
        if arguments.pin == "all":
            for server in bench.servers.values():
                load.pin_process(server.pid, {bench.placement.server})
        elif arguments.pin == "none":  # else as bench.saturation pins: each event loop
            assert bench.database.pid is not None
            jvm = children("java", bench.database.pid)
            for pid in [*(server.pid for server in bench.servers.values()), *jvm]:
                load.pin_process(pid, everywhere)
        for side in SERVERS:
            await run(bench, side, arguments.connections, arguments.warmup)
        log(f"warmed up: {arguments.warmup:g} s a side")
        for round_ in range(arguments.rounds):
            order = SERVERS if round_ % 2 == 0 else SERVERS[::-1]
            for side in order:
                found = await run(bench, side, arguments.connections, arguments.seconds)
                runs.append({"round": round_, "side": side, **found})
            log(f"round {round_ + 1} of {arguments.rounds} done")
    return runs


def render(runs: list[dict[str, Any]]) -> str:
    lines = []
    for side in SERVERS:
        mine = [run for run in runs if run["side"] == side]
        per_page = [1000 * run["cpu_seconds"] / run["requests"] for run in mine]
        per_cpu = [run["requests"] / run["cpu_seconds"] for run in mine]
        main = [1000 * run["main_thread_cpu_seconds"] / run["requests"] for run in mine]
        rate = [run["requests"] / run["seconds"] for run in mine]
        lines.append(
            f"{side:8} CPU ms a page {statistics.median(per_page):.2f} "
            f"({min(per_page):.2f}-{max(per_page):.2f}), requests per CPU-second "
            f"{statistics.median(per_cpu):,.0f}, req/s {statistics.median(rate):,.0f}, "
            f"main thread {statistics.median(main):.2f} ms"
        )
    cost = {(run["round"], run["side"]): run["cpu_seconds"] / run["requests"] for run in runs}
    rounds = sorted({run["round"] for run in runs})
    ratios = [cost[round_, "node"] / cost[round_, "service"] for round_ in rounds]
    each = ", ".join(f"{ratio:.2f}" for ratio in ratios)
    lines.append(
        f"Node peer / service CPU a page: {statistics.median(ratios):.2f} "
        f"({min(ratios):.2f}-{max(ratios):.2f}; rounds {each})"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.outside", description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--pin", choices=("none", "event-loop", "all"), default="none")
    arguments = parser.parse_args()
    started = time.monotonic()

    def log(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    runs = uvloop.run(measure(arguments, log))
    print(
        f"bench.outside: loan_page, {arguments.rounds} rounds of {arguments.seconds:g} s a side "
        f"after {arguments.warmup:g} s, {arguments.connections} connections, "
        f"pinned: {arguments.pin}"
    )
    print(render(runs))


if __name__ == "__main__":
    main()
