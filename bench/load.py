"""The load generator, wrk (one thread, closed-loop keep-alive connections), what a run of it
against a server measures, and where each runs: the load generator on core 0, every server on
core 1 (with fewer cores, nothing is pinned). An answer that is not a 2xx or 3xx, and any
connection, read or write error or timeout, is an error, and fails the run: a 429 (THROTTLED,
SPEC §21) is never counted as a request served.

Budgets stay on under load, as what a request costs includes its charge; the bench's clients
each get a budget well above what the bench offers (`BUDGET_OVERRIDES`, docs/performance.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import resource
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import jwt

from harness.processes import Process
from process.settings import DEV_JWT_SECRET

if TYPE_CHECKING:
    from bench.data import Workload

__all__ = [
    "BENCH_CLIENTS",
    "BUDGET_OVERRIDES",
    "HOST",
    "LOAD_CORE",
    "SERVER_CORE",
    "Run",
    "check_same_data",
    "check_served",
    "listening",
    "load_generator_core",
    "pin_event_loop",
    "pin_process",
    "pinning",
    "run_load",
    "service_headers",
    "summary",
    "timed_run",
]

HOST = "127.0.0.1"
LOAD_CORE, SERVER_CORE = 0, 1
TIMEOUT = 30  # before wrk counts a request as timed out
LONGEST_RUN_SECONDS = 8.0
# wrk prints this line last, from the script's `done` hook; `failed` counts what the `response`
# hook of a GraphQL run (`_GRAPHQL`) found, in each thread's own Lua state.
_REPORT = """
local threads = {}
setup = function(thread) table.insert(threads, thread) end
done = function(summary, latency, requests)
  local e, failed = summary.errors, 0
  for _, thread in ipairs(threads) do failed = failed + (thread:get("failed") or 0) end
  io.write(string.format(
    '\\n{"requests": %d, "duration_us": %d, "errors": %d, "p50_us": %d, "p99_us": %d}\\n',
    summary.requests, summary.duration,
    e.status + e.connect + e.read + e.write + e.timeout + failed,
    latency:percentile(50), latency:percentile(99)))
end
"""
# A GraphQL error comes in a 200 (a deadline past, the breaker open): an answer holding
# `"errors"` is a failed request, or a server failing fast would read as a fast one.
_GRAPHQL = """
failed = 0
response = function(status, headers, body)
  if status < 400 and body:find('"errors"', 1, true) then failed = failed + 1 end
end
"""


def pinning() -> bool:
    return {LOAD_CORE, SERVER_CORE} <= os.sched_getaffinity(0)


def listening(process: Process) -> None:
    """Until `process` listens, then its event loop on the server core (when pinning)."""
    process.wait_listening()
    if pinning():
        pin_event_loop(process.pid, {SERVER_CORE})


def pin_event_loop(pid: int, cores: set[int]) -> None:
    """`pid`'s main thread (its event loop) on `cores`, its other threads wherever this process
    may run. A runtime's helpers (V8's garbage collector and compilers, libuv's pool) are made to
    run beside its event loop; squeezed onto its core, the Node peer spent about a third more
    CPU a page than with nothing pinned (issue 67, `python -m bench.outside --pin all`), which
    a single-threaded service does not. Threads made later inherit the main thread's cores, so
    call it again once a first request has made them."""
    everywhere = os.sched_getaffinity(0)
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(task.name), cores if int(task.name) == pid else everywhere)


def pin_process(pid: int, cores: set[int]) -> None:
    """Every thread of `pid` (threads made later inherit it)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(task.name), cores)


@contextlib.contextmanager
def load_generator_core() -> Iterator[None]:
    """This process on the load generator's core for the block; processes started inside
    inherit it, so start servers and DynamoDB Local before."""
    everywhere = os.sched_getaffinity(0)
    if pinning():
        pin_process(os.getpid(), {LOAD_CORE})
    try:
        yield
    finally:
        pin_process(os.getpid(), everywhere)


# The bench's service clients (each token's `sub`; no `azp`): this module's, the live pass's and
# the storm's.
BENCH_CLIENTS = ("bench-service", "bench-live", "bench-storm")
# Cost a second and burst of each: the heaviest load measured is about 0.9 million a second
# (paymentsByStatus, 100 a page at cost 1,301, 707 a second on 16 connections), so ten million
# keeps any pass, on a machine ten times faster, within its budget while still charging it.
BENCH_BUDGET = 10_000_000
# `LOC_BUDGET_OVERRIDES` for every service the bench starts (`bench.__main__` puts it in the
# environment; `harness.processes` passes it on).
BUDGET_OVERRIDES = ",".join(f"{client}={BENCH_BUDGET}/{BENCH_BUDGET}" for client in BENCH_CLIENTS)


def service_headers() -> dict[str, str]:
    """A service caller's development token (`loc-payments token --service`)."""
    claims = {"sub": BENCH_CLIENTS[0], "scope": "payments:service", "exp": int(time.time()) + 10800}
    return {"Authorization": f"Bearer {jwt.encode(claims, DEV_JWT_SECRET, algorithm='HS256')}"}


def check_same_data(
    work: list[Workload], service: Process, other: Process, headers: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """`other` answers every workload with the service's `data` (each answer a 200 without
    errors); the service's DynamoDB calls (its `extensions.dynamodb`) per workload."""

    def answer(port: int, body: bytes, headers: dict[str, str]) -> Any:
        url, headers = (
            f"http://{HOST}:{port}/graphql",
            {"Content-Type": "application/json", **headers},
        )
        response = httpx.post(url, content=body, headers=headers, timeout=30)
        if response.status_code != 200 or response.json().get("errors"):
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:500]}")
        return response.json()

    calls = {}
    for workload in work:
        expected = answer(service.port, workload.body, headers | {"X-Debug-DynamoDB": "1"})
        calls[workload.name] = expected["extensions"]["dynamodb"]
        check_budget(expected, service.name)
        if answer(other.port, workload.body, headers)["data"] != expected["data"]:
            raise RuntimeError(f"{other.name} and {service.name} differ on {workload.name}")
    return calls


def check_budget(body: dict[str, Any], server: str) -> None:
    """The service charged the answer (`extensions.cost`) to the bench's own budget."""
    status = (body.get("extensions", {}).get("cost") or {}).get("throttleStatus") or {}
    if status.get("restoreRate") != BENCH_BUDGET:
        raise RuntimeError(
            f"{server} did not charge the bench's client its override ({BUDGET_OVERRIDES}): "
            f"its budget is {status or 'none'}"
        )


def check_served(load: Load, what: str) -> None:
    """A run in which any request failed or was refused (a 429 THROTTLED among them) measured
    something other than requests served: the bench stops."""
    if load.errors:
        raise RuntimeError(
            f"{what}: {load.errors} of {load.requests} requests failed or were refused "
            "(an answer with GraphQL errors is one: is DynamoDB answering in time? "
            "A 429 THROTTLED is one: is the bench's client over its budget, "
            f"LOC_BUDGET_OVERRIDES={BUDGET_OVERRIDES}?)"
        )


@dataclass(frozen=True, slots=True)
class Load:
    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    client_cpu_seconds: float  # wrk's own, over the run

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def core_share(self) -> float:
        """How busy wrk kept its core: near 1.0 would make it, not the server, the limit."""
        return self.client_cpu_seconds / self.seconds if self.seconds else 0.0


@dataclass(frozen=True, slots=True)
class Run(Load):
    """One timed run of a workload against a server."""

    peer: str = ""
    workload: str = ""
    connections: int = 0
    repetition: int = 0
    server_cpu_seconds: float = 0.0

    @property
    def cell(self) -> tuple[str, str, int]:
        return self.peer, self.workload, self.connections


def _lua(text: bytes) -> str:
    """A Lua string literal: every byte but ASCII letters escaped, as three decimal digits."""
    escaped = "".join(chr(b) if chr(b).isalpha() and b < 128 else f"\\{b:03d}" for b in text)
    return f'"{escaped}"'


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def run_load(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    connections: int,
    seconds: float,
    core: int | None = None,
    graphql: bool = False,
) -> Load:
    """`connections` requests kept in flight for `seconds`, wrk on `core` if given; a `graphql`
    answer holding `"errors"` counts as an error. A run too short for one answer is made again,
    twice as long, up to LONGEST_RUN_SECONDS."""
    command = shutil.which("wrk")
    if command is None:
        raise RuntimeError(
            "the benchmark's load generator is wrk, which is not installed: `make bench` "
            "installs it as root (apt-get install -y wrk); elsewhere install Debian's package "
            "`wrk` (or your system's) and run again"
        )
    lines = ['wrk.method = "POST"', f"wrk.body = {_lua(body)}"]
    lines += [f"wrk.headers[{_lua(k.encode())}] = {_lua(v.encode())}" for k, v in headers.items()]
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write("\n".join(lines) + (_GRAPHQL if graphql else "") + _REPORT)
    try:
        while True:
            cpu_before, pipe = _children_cpu(), asyncio.subprocess.PIPE
            flags = [f"-c{connections}", f"-d{math.ceil(seconds) + 1}s", f"--timeout={TIMEOUT}s"]
            process = await asyncio.create_subprocess_exec(
                *(command, "-t1", *flags, "-s", script.name, url),
                stdout=pipe,
                stderr=pipe,
                preexec_fn=None if core is None else lambda: os.sched_setaffinity(0, {core}),
            )
            try:
                await asyncio.wait_for(process.wait(), seconds)
            except TimeoutError:
                process.send_signal(signal.SIGINT)
            output, errors = await asyncio.wait_for(process.communicate(), TIMEOUT + 10)
            report = [line for line in output.decode().splitlines() if line.startswith('{"req')]
            if process.returncode != 0 or not report:
                raise RuntimeError(f"wrk failed ({process.returncode}): {errors.decode()[-1000:]}")
            found = json.loads(report[-1])
            seconds_run, cpu = found["duration_us"] / 1e6, _children_cpu() - cpu_before
            p50, p99 = found["p50_us"] / 1000, found["p99_us"] / 1000
            load = Load(found["requests"], found["errors"], seconds_run, p50, p99, cpu)
            if load.requests or seconds >= LONGEST_RUN_SECONDS:
                return load
            seconds *= 2
    finally:
        os.unlink(script.name)


async def timed_run(
    server: Process,
    workload: Workload,
    headers: dict[str, str],
    connections: int,
    seconds: float,
    repetition: int = 0,
) -> Run:
    """`workload` sent to `server` for `seconds` on `connections`, with the server's CPU time."""
    cpu, url = server.cpu_seconds(), f"http://{HOST}:{server.port}/graphql"
    headers = {"Content-Type": "application/json", **headers}
    load = await run_load(
        url, workload.body, headers, connections=connections, seconds=seconds, graphql=True
    )
    check_served(load, f"{server.name}, {workload.name} on {connections} connections")
    return Run(
        **asdict(load),
        peer=server.name,
        workload=workload.name,
        connections=connections,
        repetition=repetition,
        server_cpu_seconds=server.cpu_seconds() - cpu,
    )


def summary(runs: Iterable[Run]) -> dict[str, float]:
    """The repetitions of one cell: the median rate, p50 and p99 (wrk's, per run), the CPU per
    request over every request, and how busy the load generator's core was (near 1.0: it, not
    the server, set the pace)."""
    cell = list(runs)
    requests, seconds = sum(run.requests for run in cell), sum(run.seconds for run in cell)
    cpu = sum(run.server_cpu_seconds for run in cell)
    return {
        "requests_per_second": statistics.median(run.rate for run in cell),
        "server_cpu_ms_per_request": 1000 * cpu / requests if requests else 0.0,
        "p50_ms": statistics.median(run.p50_ms for run in cell),
        "p99_ms": statistics.median(run.p99_ms for run in cell),
        "requests": requests,
        "errors": sum(run.errors for run in cell),
        "load_generator_core_share": (
            sum(run.client_cpu_seconds for run in cell) / seconds if seconds else 0.0
        ),
    }
