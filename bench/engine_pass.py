"""The first pass: the service (P3) against its floors (P0-P2), all on the fake DynamoDB.

Every peer is a server process on the server core; this process is the load generator. Before
anything is timed, every peer answers every workload once and the answers must carry the same
`data`; P0 then serves the service's exact bytes. Runs go in rotating order: each repetition, for
each workload and connection count, the peers take turns at going first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import dataset, workloads
from bench.processes import Server, load_generator_core, memory_record
from bench.runs import Run, answer, post, service_headers, summary, timed_run
from bench.workloads import Workload

PEERS = {
    "P0": "HTTP floor: Starlette returning the service's bytes",
    "P1": "engine floor: graphql-core, parse and validation cached",
    "P2": "Strawberry, default settings, as first written",
    "P3": "this service, as `loc-payments serve` runs it",
}
CONNECTIONS = (1, 16)
DEBUG_DYNAMODB = {"X-Debug-DynamoDB": "1"}


@dataclass(frozen=True, slots=True)
class EngineOptions:
    workdir: Path
    seconds: float
    warmup_seconds: float
    repetitions: int
    users: int = 10
    loans_per_user: int = 4
    payments_per_loan: int = 120


def _first_difference(left: Any, right: Any, path: str = "data") -> str | None:
    if type(left) is not type(right):
        return f"{path}: {left!r:.80} != {right!r:.80}"
    if isinstance(left, dict):
        for key in sorted(set(left) | set(right)):
            found = _first_difference(left.get(key), right.get(key), f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(left, list):
        if len(left) != len(right):
            return f"{path}: {len(left)} items != {len(right)}"
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            found = _first_difference(a, b, f"{path}[{index}]")
            if found:
                return found
        return None
    return None if left == right else f"{path}: {left!r:.80} != {right!r:.80}"


def check_same_data(
    work: list[Workload], engines: dict[str, Server], headers: dict[str, str]
) -> tuple[dict[str, bytes], dict[str, dict[str, Any]]]:
    """Every engine's `data` for every workload equals the service's; returns the service's
    bytes and its DynamoDB calls (`extensions.dynamodb`) per workload."""
    service = engines["P3"]
    service_bytes: dict[str, bytes] = {}
    calls: dict[str, dict[str, Any]] = {}
    for workload in work:
        status, raw = post(service.port, workload.body, headers)
        expected = json.loads(raw)
        if status != 200 or "errors" in expected:
            raise RuntimeError(f"P3 failed {workload.name}: HTTP {status} {raw[:500]!r}")
        service_bytes[workload.name] = raw
        calls[workload.name] = answer(service.port, workload.body, headers | DEBUG_DYNAMODB)[
            "extensions"
        ]["dynamodb"]
        for name, engine in engines.items():
            found = answer(engine.port, workload.body, headers)
            difference = _first_difference(found["data"], expected["data"])
            if difference:
                raise RuntimeError(f"{name} and P3 differ on {workload.name}: {difference}")
    return service_bytes, calls


async def _rotating_runs(
    servers: list[Server],
    service: Server,
    work: list[Workload],
    headers: dict[str, str],
    options: EngineOptions,
    log: Callable[[str], None],
) -> tuple[list[Run], list[float]]:
    """A warm-up of every peer on every workload, then the repetitions in rotating order; the
    runs, and the service's resident memory (MiB) after each repetition."""
    resident: list[float] = []
    for workload in work if options.warmup_seconds else []:
        for server in servers:
            await timed_run(
                server,
                workload.body,
                headers,
                workload=workload.name,
                connections=max(CONNECTIONS),
                seconds=options.warmup_seconds,
                repetition=-1,
            )
    runs: list[Run] = []
    turn = 0
    for repetition in range(options.repetitions):
        for workload in work:
            for connections in CONNECTIONS:
                first = turn % len(servers)
                turn += 1
                for server in servers[first:] + servers[:first]:
                    runs.append(
                        await timed_run(
                            server,
                            workload.body,
                            headers,
                            workload=workload.name,
                            connections=connections,
                            seconds=options.seconds,
                            repetition=repetition,
                        )
                    )
        resident.append(service.resident_mib())
        log(f"repetition {repetition + 1} of {options.repetitions} done")
    return runs, resident


class EnginePass:
    """Its servers are started first (`start`), with the other pass's, so that they all load
    at once; `run` waits for them, checks their answers, and measures."""

    def __init__(self, options: EngineOptions) -> None:
        self.options = options
        self.stored = list(
            dataset.items(
                users=range(options.users),
                loans_per_user=options.loans_per_user,
                payments_per_loan=options.payments_per_loan,
            )
        )
        data = options.workdir / "fake-items.json"
        dataset.write(data, self.stored)
        self.work = workloads.build(self.stored)
        # P0 reads the service's answers at its first request; they are written before it.
        self.responses = options.workdir / "http-floor-responses.json"
        self.servers = [
            Server("P0", "http-floor", "--responses", str(self.responses)),
            Server("P1", "graphql-core", "--data", str(data)),
            Server("P2", "strawberry", "--data", str(data)),
            Server("P3", "service", "--data", str(data)),
        ]

    def start(self) -> None:
        for server in self.servers:
            server.start()

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    async def run(self, log: Callable[[str], None]) -> dict[str, Any]:
        for server in self.servers:
            server.wait_ready()
        floor, *engines = self.servers
        service = {server.name: server for server in engines}["P3"]
        work, headers = self.work, service_headers()
        log(f"fake DynamoDB: {len(self.stored)} payments; P0-P3 listening; checking answers")
        service_bytes, calls = check_same_data(
            work, {server.name: server for server in engines}, headers
        )
        self.responses.write_text(
            json.dumps([[w.body.decode(), service_bytes[w.name].decode()] for w in work])
        )
        for workload in work:
            if post(floor.port, workload.body, headers)[1] != service_bytes[workload.name]:
                raise RuntimeError(f"P0 does not answer P3's bytes for {workload.name}")
        log("P0-P3 return the same data for every workload; warming up")
        with load_generator_core():
            runs, resident = await _rotating_runs(
                self.servers, service, work, headers, self.options, log
            )
        return {
            "payments": len(self.stored),
            "peers": PEERS,
            "workloads": [
                {
                    "name": w.name,
                    "title": w.title,
                    "minimum_calls": w.minimum_calls,
                    "service_calls": calls[w.name],
                    "hundred_item_list": w.hundred_item_list,
                }
                for w in work
            ],
            "cells": [
                {"peer": peer, "workload": w.name, "connections": connections}
                | summary(
                    run
                    for run in runs
                    if (run.peer, run.workload, run.connections) == (peer, w.name, connections)
                )
                for w in work
                for connections in CONNECTIONS
                for peer in PEERS
            ],
            "runs": [asdict(run) for run in runs],
            "service_memory": memory_record(service, resident),
        }
