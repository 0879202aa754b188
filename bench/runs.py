"""One timed run of one workload against one server, and what the runs of a cell sum up to."""

from __future__ import annotations

import http.client
import json
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jwt

from bench.processes import Server
from bench.wrk import run_load
from server.settings import DEV_JWT_SECRET

HOST = "127.0.0.1"
PATH = "/graphql"
TOKEN_TTL_SECONDS = 3 * 60 * 60


def service_headers() -> dict[str, str]:
    """A service caller's development token (the README's `loc-payments token --service`)."""
    claims = {
        "sub": "bench-service",
        "scope": "payments:service",
        "exp": int(time.time()) + TOKEN_TTL_SECONDS,
    }
    return {"Authorization": f"Bearer {jwt.encode(claims, DEV_JWT_SECRET, algorithm='HS256')}"}


def post(port: int, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """One request, outside any timing: for the checks before the runs."""
    connection = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        connection.request(
            "POST", PATH, body=body, headers={"Content-Type": "application/json", **headers}
        )
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def answer(port: int, body: bytes, headers: dict[str, str]) -> dict[str, Any]:
    status, raw = post(port, body, headers)
    document: dict[str, Any] = json.loads(raw)
    if status != 200 or document.get("errors"):
        raise RuntimeError(f"HTTP {status}: {raw[:500]!r}")
    return document


@dataclass
class Run:
    peer: str
    workload: str
    connections: int
    repetition: int
    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    server_cpu_seconds: float
    client_cpu_seconds: float

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


async def timed_run(
    server: Server,
    body: bytes,
    headers: dict[str, str],
    *,
    workload: str,
    connections: int,
    seconds: float,
    repetition: int,
) -> Run:
    server_cpu = server.cpu_seconds()
    result = await run_load(
        f"http://{HOST}:{server.port}{PATH}",
        body,
        {"Content-Type": "application/json", **headers},
        connections=connections,
        seconds=seconds,
    )
    return Run(
        peer=server.name,
        workload=workload,
        connections=connections,
        repetition=repetition,
        requests=result.requests,
        errors=result.errors,
        seconds=result.seconds,
        p50_ms=result.p50_ms,
        p99_ms=result.p99_ms,
        server_cpu_seconds=server.cpu_seconds() - server_cpu,
        client_cpu_seconds=result.cpu_seconds,
    )


def summary(runs: Iterable[Run]) -> dict[str, float]:
    """The repetitions of one cell: the median rate, p50 and p99 (wrk's, per run), and the CPU
    per request over every request of every repetition."""
    cell = list(runs)
    requests = sum(run.requests for run in cell)
    seconds = sum(run.seconds for run in cell)
    return {
        "requests_per_second": statistics.median(run.rate for run in cell),
        "server_cpu_ms_per_request": (
            1000 * sum(run.server_cpu_seconds for run in cell) / requests if requests else 0.0
        ),
        "p50_ms": statistics.median(run.p50_ms for run in cell),
        "p99_ms": statistics.median(run.p99_ms for run in cell),
        "requests": requests,
        "errors": sum(run.errors for run in cell),
        # How busy the load generator's core was: near 1.0 means it, not the server, set the pace.
        "load_generator_core_share": (
            sum(run.client_cpu_seconds for run in cell) / seconds if seconds else 0.0
        ),
    }
