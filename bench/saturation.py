"""`python -m bench.saturation`: the service against the Node peer at saturation, by requests per
CPU-second (issue 59's binding comparison).

`make bench` loads each server at 16 connections while DynamoDB Local shares its core with the
load generator, so both servers may run below saturation, where what a request costs includes
what an idle process spends waiting. Here each server is loaded until it is CPU-bound on a core
of its own, and the run shows that nothing else set the pace:

- DynamoDB Local (in memory, every JVM thread) on one core, each server (every thread) on
  another, wrk on a third when there is one, else beside DynamoDB Local (on 2 cores: core 0
  holds DynamoDB Local and wrk, core 1 the server loaded; the idle server waits there too).
- The service as `make run` runs it (`loc-payments serve`, the `local` environment and its
  defaults: the JSON request log, the metrics, live updates, webhook delivery), but on this
  DynamoDB Local, with the bench's budget (`bench.load.BUDGET_OVERRIDES`: no 429) and GSI2 in
  one shard (SPEC §20), the layout the peer queries (issue 59, item 7). The Node peer
  (`bench/peers/node`) on the same table, which must answer the service's `data` first.
- Rounds interleaved (the sides' order rotates), each run `seconds` long after one warm-up
  run per side; in each round, DynamoDB Local's own rate for each server's call (the service's
  projected Query, the peer's whole items), sent over raw HTTP by wrk from the server core.
- For each run: the server's CPU (/proc, all threads; its main thread apart), its share of its
  core, DynamoDB Local's and wrk's shares, and each core's busy share (/proc/stat: other work
  on the machine shows there).

It prints a summary and writes the JSON (`bench/results/saturation.json` by default).
`--cpu-prof DIR` runs the peer under `node --cpu-prof` and summarises its profile
(`bench.node_profile`); docs/performance.md says what the profiles show.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop

from bench import data, load, node_profile
from bench.local_pass import NODE_PEER, call_parameters, raw_http_request
from bench.report import table, without_nan
from datasource import create_table_if_missing
from harness.processes import REGION, ROOT, Process, Service, children, cpu_seconds
from process.embedded_dynamodb import EmbeddedDynamoDB
from process.settings import DEV_CURSOR_SECRET, DEV_JWT_SECRET, Settings

__all__ = [
    "Options",
    "Placement",
    "Saturation",
    "bench_environment",
    "main",
    "render",
    "summarise",
    "thread_cpu",
    "verdicts",
]

WORKLOADS = ("loan_page", "by_status")
SERVERS = ("service", "node")
# DynamoDB Local's own rate for each server's call: the service's projected Query, the peer's
# Query of whole items.
RAW_CALLS = {"service": "raw_service_call", "node": "raw_node_call"}
SIDES = (*SERVERS, *RAW_CALLS.values())
RESULTS = ROOT / "bench" / "results" / "saturation.json"
# What the summary calls CPU-bound, and DynamoDB Local's own rate over a server's that leaves
# it out of the limit (below it, the database may have set the pace).
SATURATED_SHARE = 0.90
HEADROOM = 1.5
# wrk's one thread past half its core would be near being the limit itself.
GENERATOR_SHARE = 0.5
AT_REST_SECONDS = 5.0
# DynamoDB Local with the JVM's full JIT (`make run` and the tests stop at its first tier, which
# starts faster): warmed up by `database_warmup_seconds` of raw calls, a 100-item Query took it
# 3.5 ms of CPU instead of 4.3 (whole items 2.8 instead of 5.0), headroom a 2-core run needs.
DATABASE_JVM_OPTIONS = ("-Xss1m", "-XX:+UseParallelGC")


@dataclass(frozen=True, slots=True)
class Options:
    seconds: float = 10.0
    warmup_seconds: float = 5.0
    database_warmup_seconds: float = 30.0
    rounds: int = 5
    connections: int = 32
    users: int = 10
    payments_per_user: int = 100
    cpu_prof: Path | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    """Which cores each process runs on. The server loaded has a core to itself; on 2 cores wrk
    runs beside DynamoDB Local (its share is small: one thread, a few hundred requests a second),
    on 3 it has the third, and from 4 DynamoDB Local gets every core but those two (up to 3)."""

    database: tuple[int, ...]
    server: int
    generator: int

    @classmethod
    def of(cls, cores: set[int]) -> Placement:
        if len(cores) < 2:
            raise SystemExit(
                "bench.saturation needs two cores at least (DynamoDB Local on one, the server "
                f"loaded on another); this process may use {len(cores)}"
            )
        first, server, *rest = sorted(cores)
        if not rest:
            return cls((first,), server, first)
        generator = rest[-1]
        return cls((first, *rest[:-1])[:3], server, generator)

    @property
    def raw_generator(self) -> int:
        """Where wrk sends the raw calls from: not beside DynamoDB Local, whose rate it reads."""
        return self.server if self.generator in self.database else self.generator

    @property
    def described(self) -> str:
        where = "beside DynamoDB Local" if self.generator in self.database else "its own core"
        database = ", ".join(str(core) for core in self.database)
        return (
            f"DynamoDB Local on core {database}, each server on core {self.server}, wrk on "
            f"core {self.generator} ({where}); raw calls sent by wrk from core "
            f"{self.raw_generator}"
        )


def core_times() -> dict[int, tuple[int, int]]:
    """Each core's (busy, total) clock ticks since boot (/proc/stat; idle and iowait not busy)."""
    found = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *ticks = line.split()
        if name.startswith("cpu") and name != "cpu":
            values = [int(tick) for tick in ticks]
            found[int(name[3:])] = (sum(values) - values[3] - values[4], sum(values))
    return found


def thread_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of `pid`'s main thread and of all its threads (/proc, user + system)."""
    main = Path(f"/proc/{pid}/task/{pid}/stat").read_text()
    fields = main[main.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), cpu_seconds(pid)


@dataclass
class Meter:
    """CPU of the processes and cores that a run must show are not the limit, read around it."""

    pids: dict[str, int]
    cores: dict[str, tuple[int, ...]]
    _start: dict[str, float] = dataclasses.field(default_factory=dict)
    _ticks: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)

    def _read(self) -> dict[str, float]:
        found: dict[str, float] = {}
        for name, pid in self.pids.items():
            main, whole = thread_cpu(pid)
            found |= {name: whole, f"{name}_main_thread": main}
        return found

    def start(self) -> None:
        self._start, self._ticks = self._read(), core_times()

    def stop(self, seconds: float) -> dict[str, float]:
        """Each process's CPU seconds over the run, and each named core's busy share."""
        now, ticks = self._read(), core_times()
        found = {f"{name}_cpu_seconds": now[name] - self._start[name] for name in now}
        for role, cores in self.cores.items():
            busy = sum(ticks[core][0] - self._ticks[core][0] for core in cores)
            total = sum(ticks[core][1] - self._ticks[core][1] for core in cores)
            found[f"{role}_core_busy"] = busy / total if total else 0.0
        return found | {"seconds": seconds}


class Saturation:
    """`start` runs DynamoDB Local, loads the table and starts both servers; `measure` runs the
    rounds; `stop` ends them all."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.placement = Placement.of(os.sched_getaffinity(0))
        self.table = Settings(env="local").table_name
        self.items = list(
            data.items(
                users=range(options.users),
                loans_per_user=1,
                payments_per_loan=options.payments_per_user,
            )
        )
        self.work = {name: data.workloads(self.items)[name] for name in WORKLOADS}
        self.headers = load.service_headers()
        self.database = EmbeddedDynamoDB(data_dir=None, heap="1g", jvm_options=DATABASE_JVM_OPTIONS)
        self.servers: dict[str, Process] = {}
        self.raw_requests: dict[tuple[str, str], dict[str, Any]] = {}

    async def start(self, log: Any) -> None:
        endpoint = self.database.start()
        for jvm in children("java"):
            load.pin_process(jvm, set(self.placement.database))
        async with data.raw_client(endpoint) as client:
            # With its stream, as `make run`'s table: the service's live updates read it.
            await create_table_if_missing(client, self.table)
            await data.load(client, self.table, iter(self.items))
        log(f"DynamoDB Local: {len(self.items):,} payments in {self.table}")
        if not (NODE_PEER / "node_modules").is_dir():
            raise SystemExit(f"the Node peer is not installed: npm ci --prefix {NODE_PEER}")
        profiling = []
        if self.options.cpu_prof is not None:
            self.options.cpu_prof.mkdir(parents=True, exist_ok=True)
            profiling = ["--cpu-prof", "--cpu-prof-dir", str(self.options.cpu_prof)]
        command: list[str | Path] = ["node", *profiling, NODE_PEER / "server.mjs"]
        command += ["--port", "{port}", "--endpoint", endpoint, "--table", self.table]
        command += ["--region", REGION, "--jwt-secret", DEV_JWT_SECRET]
        command += ["--cursor-secret", DEV_CURSOR_SECRET]
        node = Process("the Node peer", command, keep_stdout=False)
        # `make run`'s settings but for the database, the port and GSI2's one shard; metrics
        # and the request log as its defaults have them (`Service` turns them down otherwise).
        settings = {"metrics": "app", "log_level": "INFO", "gsi2_shards": "1"}
        service = Service(endpoint, self.table, settings, keep_stdout=False)
        self.servers = {"service": service, "node": node}
        for process in self.servers.values():
            process.start()
        for process in self.servers.values():
            process.wait_listening()
        load.check_same_data(list(self.work.values()), service, node, self.headers)
        for process in self.servers.values():
            # After its first requests, which made the Node peer's libuv pool.
            load.pin_event_loop(process.pid, {self.placement.server})
        for name, workload in self.work.items():
            for reader, side in RAW_CALLS.items():
                parameters = call_parameters(workload, self.table, projected=reader == "service")
                self.raw_requests[side, name] = _checked(endpoint, name, parameters)
        log("the Node peer answers the service's data; both pinned, loading")

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()
        self.database.stop()

    def _meter(self) -> Meter:
        pids = {name: server.pid for name, server in self.servers.items()}
        assert self.database.pid is not None
        jvm = children("java", self.database.pid) or [self.database.pid]
        placement = self.placement
        cores = {"server": (placement.server,), "database": placement.database}
        if placement.generator not in placement.database:
            cores["generator"] = (placement.generator,)
        return Meter(pids | {"database": jvm[0]}, cores)

    async def run(self, side: str, name: str, seconds: float) -> dict[str, Any]:
        """One run of `side` on workload `name`, with what each process and core did."""
        connections, meter = self.options.connections, self._meter()
        if side in SERVERS:
            server = self.servers[side]
            url, body = f"http://{load.HOST}:{server.port}/graphql", self.work[name].body
            headers = {"Content-Type": "application/json", **self.headers}
            core = self.placement.generator
        else:
            request = self.raw_requests[side, name]
            url, body, headers = request["url"], request["body"].encode(), request["headers"]
            core = self.placement.raw_generator
        meter.start()
        began = time.monotonic()
        found = await load.run_load(
            url,
            body,
            headers,
            connections=connections,
            seconds=seconds,
            core=core,
            graphql=side in SERVERS,
        )
        ended = time.monotonic()
        load.check_served(found, f"{side}, {name} on {connections} connections")
        measured = meter.stop(found.seconds)
        return {
            "side": side,
            "workload": name,
            "monotonic": [began, ended],
            "requests": found.requests,
            "seconds": found.seconds,
            "rate": found.rate,
            "p50_ms": found.p50_ms,
            "p99_ms": found.p99_ms,
            "generator_cpu_seconds": found.client_cpu_seconds,
            **measured,
        }

    async def at_rest(self, seconds: float = AT_REST_SECONDS) -> dict[str, float]:
        """Each server's share of a core with no request: its background work (the service's
        live updates and webhook delivery poll DynamoDB Local), counted in every run's CPU."""
        before = {name: server.cpu_seconds() for name, server in self.servers.items()}
        await asyncio.sleep(seconds)
        return {
            name: (server.cpu_seconds() - before[name]) / seconds
            for name, server in self.servers.items()
        }

    async def measure(self, log: Any) -> list[dict[str, Any]]:
        options, runs = self.options, []
        if options.database_warmup_seconds:
            calls = [(side, name) for name in self.work for side in RAW_CALLS.values()]
            for side, name in calls:
                await self.run(side, name, options.database_warmup_seconds / len(calls))
            log(f"DynamoDB Local warmed up: {options.database_warmup_seconds:g} s of raw calls")
        if options.warmup_seconds:
            for name in self.work:
                for side in SIDES:
                    await self.run(side, name, options.warmup_seconds)
            log(f"warmed up: {options.warmup_seconds:g} s a side")
        for round_ in range(options.rounds):
            for turn, name in enumerate(self.work):
                first = (round_ + turn) % len(SIDES)
                for side in SIDES[first:] + SIDES[:first]:
                    runs.append({"round": round_} | await self.run(side, name, options.seconds))
            log(f"round {round_ + 1} of {options.rounds} done")
        return runs


def _checked(endpoint: str, name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """The raw request for a call, once sent: a full page back (the page's 100 items, and the
    one more a page asks for when there is one), or the rate compares nothing."""
    request = raw_http_request(endpoint, name, parameters)
    sent = urllib.request.Request(request["url"], request["body"].encode(), request["headers"])
    with urllib.request.urlopen(sent, timeout=30) as response:
        answer = json.loads(response.read())
    if answer.get("Count", 0) < parameters["Limit"] - 1:
        raise RuntimeError(f"raw HTTP {name}: {answer.get('Count')} items, not a full page")
    return request


def _median_share(cell: list[dict[str, Any]], cpu: str) -> float:
    """The median over `cell`'s runs of a process's CPU seconds over the run's seconds."""
    return statistics.median(float(run[cpu]) / float(run["seconds"]) for run in cell)


def _per_request(run: dict[str, Any], key: str) -> float:
    return 1000 * run[key] / run["requests"] if run["requests"] else float("nan")


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per workload and side: the medians over the rounds (rate, CPU ms a request, requests per
    CPU-second, each share of a core); per workload, the service / peer ratio of requests per
    CPU-second, its median and its spread (min and max of the rounds' ratios)."""
    found: dict[str, Any] = {}
    for name in dict.fromkeys(run["workload"] for run in runs):
        sides: dict[str, Any] = {}
        for side in SIDES:
            cell = [run for run in runs if (run["workload"], run["side"]) == (name, side)]
            if not cell:
                continue
            sides[side] = {
                "requests_per_second": statistics.median(run["rate"] for run in cell),
                "database_core_share": _median_share(cell, "database_cpu_seconds"),
                "generator_core_share": _median_share(cell, "generator_cpu_seconds"),
                "server_core_busy": statistics.median(run["server_core_busy"] for run in cell),
                "database_core_busy": statistics.median(run["database_core_busy"] for run in cell),
            }
            if side in SERVERS:
                sides[side] |= {
                    "cpu_ms_per_request": statistics.median(
                        _per_request(run, f"{side}_cpu_seconds") for run in cell
                    ),
                    "main_thread_cpu_ms_per_request": statistics.median(
                        _per_request(run, f"{side}_main_thread_cpu_seconds") for run in cell
                    ),
                    "requests_per_cpu_second": statistics.median(
                        run["requests"] / run[f"{side}_cpu_seconds"] for run in cell
                    ),
                    "server_core_share": statistics.median(
                        run[f"{side}_cpu_seconds"] / run["seconds"] for run in cell
                    ),
                    # Its event loop's: what saturates its core (helpers run elsewhere).
                    "event_loop_core_share": statistics.median(
                        run[f"{side}_main_thread_cpu_seconds"] / run["seconds"] for run in cell
                    ),
                }
        ratios = _round_ratios(runs, name)
        found[name] = {
            "sides": sides,
            "service_over_node_per_cpu_second": {
                "median": statistics.median(ratios) if ratios else float("nan"),
                "min": min(ratios, default=float("nan")),
                "max": max(ratios, default=float("nan")),
                "rounds": ratios,
            },
        }
    return found


def _round_ratios(runs: list[dict[str, Any]], name: str) -> list[float]:
    """Each round's service / peer requests per CPU-second on `name`."""
    per_cpu: dict[tuple[int, str], float] = {
        (run["round"], run["side"]): run["requests"] / run[f"{run['side']}_cpu_seconds"]
        for run in runs
        if run["workload"] == name and run["side"] in SERVERS and run[f"{run['side']}_cpu_seconds"]
    }
    rounds = sorted({round_ for round_, _ in per_cpu})
    return [
        per_cpu[round_, "service"] / per_cpu[round_, "node"]
        for round_ in rounds
        if (round_, "service") in per_cpu and (round_, "node") in per_cpu
    ]


def verdicts(summary: dict[str, Any]) -> list[str]:
    """Whether each run was what the comparison needs: each server CPU-bound, DynamoDB Local's
    own rate well above the server's, its core and wrk's not full."""
    lines = []
    for name, found in summary.items():
        sides = found["sides"]
        for server, raw in RAW_CALLS.items():
            if server not in sides:
                continue
            side = sides[server]
            share, rate = side["event_loop_core_share"], side["requests_per_second"]
            headroom = sides[raw]["requests_per_second"] / rate if raw in sides and rate else 0
            problems = []
            if share < SATURATED_SHARE:
                problems.append(f"not CPU-bound (its event loop {share:.0%} of its core)")
            if headroom < HEADROOM:
                problems.append(f"DynamoDB Local's own rate only {headroom:.2f}x the server's")
            if side["generator_core_share"] > GENERATOR_SHARE:
                problems.append(f"wrk {side['generator_core_share']:.0%} of its core")
            if side["database_core_busy"] > SATURATED_SHARE:
                problems.append(f"DynamoDB Local's core {side['database_core_busy']:.0%} busy")
            lines.append(
                f"{name}, {server}: "
                + ("; ".join(problems) if problems else "saturated, DynamoDB Local not the limit")
            )
    return lines


def render(results: dict[str, Any]) -> str:
    options, summary = results["options"], results["summary"]
    lines = [
        f"Saturation: {options['rounds']} rounds of {options['seconds']:g} s a side after "
        f"{options['warmup_seconds']:g} s of warm-up, {options['connections']} connections, "
        f"{results['payments']:,} payments; {results['placement']}",
        "",
    ]
    header = [
        "workload", "side", "req/s", "CPU ms/req", "main thread", "req/CPU-s", "its core",
        "server core busy", "DynamoDB Local", "its core busy", "wrk",
    ]  # fmt: skip
    rows = []
    for name, found in summary.items():
        for number, (side, cell) in enumerate(found["sides"].items()):
            server = side in SERVERS
            rows.append([
                name if number == 0 else "", side, f"{cell['requests_per_second']:,.0f}",
                f"{cell['cpu_ms_per_request']:.2f}" if server else "",
                f"{cell['main_thread_cpu_ms_per_request']:.2f}" if server else "",
                f"{cell['requests_per_cpu_second']:,.0f}" if server else "",
                f"{cell['server_core_share']:.0%}" if server else "",
                f"{cell['server_core_busy']:.0%}", f"{cell['database_core_share']:.0%}",
                f"{cell['database_core_busy']:.0%}", f"{cell['generator_core_share']:.0%}",
            ])  # fmt: skip
    lines += table(header, rows, left=2)
    lines += [
        "(medians of the rounds; `its core`: the server's CPU over the run's time; `busy`: the "
        "core's, every process on it; DynamoDB Local and wrk: their CPU over the run's time)",
        "",
    ]
    for name, found in summary.items():
        ratio = found["service_over_node_per_cpu_second"]
        each = ", ".join(f"{value:.2f}" for value in ratio["rounds"])
        lines.append(
            f"{name}: service / Node peer requests per CPU-second {ratio['median']:.2f} "
            f"(rounds {ratio['min']:.2f}-{ratio['max']:.2f}: {each})"
        )
    if (at_rest := results.get("at_rest_core_share")) is not None:
        lines.append(
            "At rest (no request, before the runs; counted in every run's CPU): "
            + ", ".join(f"{name} {share:.1%} of its core" for name, share in at_rest.items())
        )
    lines += ["", *verdicts(summary)]
    for name, profile in results.get("node_profile", {}).items():
        lines += ["", f"{name}:", *node_profile.render(profile)]
    return "\n".join(lines)


def _arguments() -> argparse.Namespace:
    defaults = Options()
    parser = argparse.ArgumentParser(
        prog="python -m bench.saturation", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--seconds", type=float, default=defaults.seconds, help="a run's length")
    parser.add_argument(
        "--warmup",
        type=float,
        default=defaults.warmup_seconds,
        help="one warm-up run per side and workload, seconds (0: none)",
    )
    parser.add_argument(
        "--database-warmup",
        type=float,
        default=defaults.database_warmup_seconds,
        help="raw calls to DynamoDB Local before anything else, seconds",
    )
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument("--connections", type=int, default=defaults.connections)
    parser.add_argument("--cpu-prof", type=Path, help="run the peer under node --cpu-prof here")
    parser.add_argument("--output", type=Path, default=RESULTS, help="the JSON file")
    return parser.parse_args()  # fmt: skip


@contextlib.contextmanager
def bench_environment() -> Iterator[None]:
    """The servers get only the settings given them and the bench's budgets, as in `make bench`."""
    saved = dict(os.environ)
    for name in [name for name in os.environ if name.startswith("LOC_")]:
        del os.environ[name]
    os.environ["LOC_BUDGET_OVERRIDES"] = load.BUDGET_OVERRIDES
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


async def measure(options: Options, log: Any) -> dict[str, Any]:
    bench = Saturation(options)
    with bench_environment(), contextlib.ExitStack() as stack:
        stack.callback(bench.stop)
        await bench.start(log)
        at_rest = await bench.at_rest()
        runs = await bench.measure(log)
        # The peer writes its profile as it exits.
        bench.servers["node"].stop()
    results: dict[str, Any] = {
        "command": " ".join(["python -m bench.saturation", *sys.argv[1:]]),
        "commit": _commit(),
        "placement": bench.placement.described,
        "cores": len(os.sched_getaffinity(0)),
        "options": {
            "seconds": options.seconds,
            "warmup_seconds": options.warmup_seconds,
            "database_warmup_seconds": options.database_warmup_seconds,
            "rounds": options.rounds,
            "connections": options.connections,
        },
        "payments": len(bench.items),
        "at_rest_core_share": at_rest,
        "runs": runs,
        "summary": summarise(runs),
    }
    if options.cpu_prof is not None:
        results["node_profile"] = {
            name: _profile(options.cpu_prof, [r for r in runs if r["workload"] == name])
            for name in bench.work
        }
    return results


def _profile(directory: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The peer's profile over its timed runs' windows (not its start, nor the warm-up), with
    their requests and its main thread's CPU seconds (/proc), which the profile's parts share."""
    mine = [run for run in runs if run["side"] == "node"]
    return node_profile.summarise_directory(directory, [run["monotonic"] for run in mine]) | {
        "requests": sum(run["requests"] for run in mine),
        "main_thread_cpu_seconds": sum(run["node_main_thread_cpu_seconds"] for run in mine),
    }


def _commit() -> str:
    describe = ["git", "describe", "--always", "--exclude=*", "--dirty= with local changes"]
    found = subprocess.run(describe, cwd=ROOT, capture_output=True, text=True)
    return found.stdout.strip() or "unknown"


def main() -> None:
    arguments = _arguments()
    options = Options(
        seconds=arguments.seconds,
        warmup_seconds=arguments.warmup,
        database_warmup_seconds=arguments.database_warmup,
        rounds=arguments.rounds,
        connections=arguments.connections,
        cpu_prof=arguments.cpu_prof,
    )
    started = time.monotonic()

    def log(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    results = uvloop.run(measure(options, log))
    results["seconds_taken"] = time.monotonic() - started
    arguments.output.parent.mkdir(parents=True, exist_ok=True)
    arguments.output.write_text(json.dumps(without_nan(results), indent=1) + "\n")
    print(render(results))
    print(f"\n{results['seconds_taken']:.0f} s; JSON: {arguments.output}")


if __name__ == "__main__":
    main()
