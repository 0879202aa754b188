"""The load generator: wrk (Debian's package `wrk`), one thread, closed-loop keep-alive
connections, each sending the same POST as soon as its last answer is in.

A run lasts `seconds` (wrk's own clock: it is stopped with SIGINT, as its Ctrl-C, so runs may be
shorter than its whole-second `-d`); a response that is not a 2xx or 3xx, and any connection,
read or write error or timeout, counts as an error. wrk reports its percentiles to the
microsecond; its own CPU time (user + system, from the kernel's accounting of the finished
child) is returned with the rate, so that every cell shows how busy the load generator's core
was: a generator near 100 % would be the limit, not the server.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import resource
import shutil
import signal
import tempfile
from dataclasses import dataclass

# wrk prints this line last, from the script's `done` hook.
_REPORT = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '\\n{"requests": %d, "duration_us": %d, "errors": %d, "p50_us": %d, "p99_us": %d}\\n',
    summary.requests, summary.duration, e.status + e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""
# How long a request may take before wrk counts it as timed out.
TIMEOUT_SECONDS = 30


class WrkMissing(RuntimeError):
    """wrk is not installed."""


def wrk_command() -> str:
    found = shutil.which("wrk")
    if found is None:
        raise WrkMissing(
            "the benchmark's load generator is wrk, which is not installed: `make bench` "
            "installs it as root (apt-get install -y wrk); elsewhere install Debian's package "
            "`wrk` (or your system's) and run again"
        )
    return found


@dataclass(frozen=True, slots=True)
class Load:
    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    # wrk's own CPU time over the run.
    cpu_seconds: float

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def core_share(self) -> float:
        """How busy wrk kept its core: near 1.0 would make it, not the server, the limit."""
        return self.cpu_seconds / self.seconds if self.seconds else 0.0


def _script(body: bytes, headers: dict[str, str]) -> str:
    lines = ['wrk.method = "POST"', f"wrk.body = {_lua_string(body)}"]
    lines += [
        f"wrk.headers[{_lua_string(k.encode())}] = {_lua_string(v.encode())}"
        for k, v in headers.items()
    ]
    return "\n".join(lines) + _REPORT


def _lua_string(text: bytes) -> str:
    """A Lua string literal: every byte but ASCII letters escaped, as three decimal digits."""
    return (
        '"' + "".join(chr(b) if chr(b).isalpha() and b < 128 else f"\\{b:03d}" for b in text) + '"'
    )


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# A run that ends before its first answer is made again, twice as long, up to this.
LONGEST_RUN_SECONDS = 8.0


async def run_load(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    connections: int,
    seconds: float,
    core: int | None = None,
) -> Load:
    """`connections` requests kept in flight for `seconds`; wrk runs on `core` if given (by
    default where this process may run). A run too short for one answer is made again, twice
    as long (a rate needs answers)."""
    while True:
        load = await _run_wrk(url, body, headers, connections, seconds, core)
        if load.requests or seconds >= LONGEST_RUN_SECONDS:
            return load
        seconds *= 2


async def _run_wrk(
    url: str,
    body: bytes,
    headers: dict[str, str],
    connections: int,
    seconds: float,
    core: int | None,
) -> Load:
    command = wrk_command()
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(_script(body, headers))
    cpu_before = _children_cpu()
    try:
        process = await asyncio.create_subprocess_exec(
            command,
            "-t1",
            f"-c{connections}",
            f"-d{math.ceil(seconds) + 1}s",
            f"--timeout={TIMEOUT_SECONDS}s",
            "-s",
            script.name,
            url,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=(lambda: os.sched_setaffinity(0, {core})) if core is not None else None,
        )
        try:
            await asyncio.wait_for(process.wait(), seconds)
        except TimeoutError:
            process.send_signal(signal.SIGINT)
        output, errors = await asyncio.wait_for(process.communicate(), TIMEOUT_SECONDS + 10)
    finally:
        os.unlink(script.name)
    report = [line for line in output.decode().splitlines() if line.startswith('{"requests"')]
    if process.returncode != 0 or not report:
        raise RuntimeError(f"wrk failed ({process.returncode}): {errors.decode()[-1000:]}")
    found = json.loads(report[-1])
    return Load(
        requests=found["requests"],
        errors=found["errors"],
        seconds=found["duration_us"] / 1e6,
        p50_ms=found["p50_us"] / 1000,
        p99_ms=found["p99_us"] / 1000,
        cpu_seconds=_children_cpu() - cpu_before,
    )
