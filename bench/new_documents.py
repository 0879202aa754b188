"""`python -m bench.new_documents [--quick]`: what a customer sending only new documents costs
the service (issue 64, SPEC §21 turn 6: a document's first parse has a price).

One `python -m cli serve` as `make run` serves it (its defaults: a customer's budget 1,000 a
second, burst 10,000; a new document costs at least 100; its request log at INFO) on DynamoDB
Local, and a customer's development token. Each document is 15 aliased lookups of the
customer's own payments, its aliases numbered so that every text is new to the service. They
are offered at a fixed rate (not waiting for answers) of ten times the budget's rate in
documents, `rate / max(a document's cost, the new-document floor)`, for long enough to spend
the burst and go on. The service's CPU (/proc) over the phase, less its idle CPU over as long,
is the share of one core the customer costs: after the burst (from a second after the first
refusal), the target, at most 25 %; and over the whole phase, the burst's parses included.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import re
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import uvloop
from graphql import parse

from bench import data, local_database
from bench.report import Target
from datasource import create_table_if_missing
from engine import operation_cost
from harness.processes import HOST, Service, serving
from process.settings import Settings
from schema import build_schema, payments_limits
from server.app import query_limits
from server.auth import mint_development_token

__all__ = ["DEFAULT", "QUICK", "Options", "document", "measure", "render", "targets"]

ALIASES = 15
SELECTION = "paymentId status amountCents createdAt"
TIMES_THE_RATE = 10.0
TARGET = 0.25  # of one core, after the burst
# A second after the first refusal: answers to documents sent in the burst still being worked.
SETTLE_SECONDS = 1.0
SAMPLE_SECONDS = 0.25
# The sender fell behind if any document went out later than this after its time.
LATE_SECONDS = 0.25
_CONTENT_LENGTH = re.compile(rb"(?i)\r\ncontent-length: *([0-9]+)")


@dataclasses.dataclass(frozen=True)
class Options:
    seconds: float = 25.0  # of offering; the burst lasts about 1 s
    idle_seconds: float = 5.0


DEFAULT = Options()
QUICK = Options(seconds=3.0, idle_seconds=1.0)


def document(number: int, refs: list[tuple[str, str]]) -> str:
    """The `number`-th document: `ALIASES` lookups of the customer's payments `refs` (loan,
    payment), its aliases named after `number`, so that no two documents are the same text."""
    lookups = "\n".join(
        f'  d{number}_{alias}: payment(loanId: "{loan}", paymentId: "{payment}") {{ {SELECTION} }}'
        for alias, (loan, payment) in enumerate(refs)
    )
    return f"query {{\n{lookups}\n}}"


@dataclasses.dataclass
class _Phase:
    offered: int = 0
    admitted: int = 0
    refused: int = 0
    failed: list[str] = dataclasses.field(default_factory=list)
    latest_send: float = 0.0  # the most a document went out after its time, in seconds
    started: float = 0.0
    sent: float = 0.0  # when the last document went out
    ended: float = 0.0  # when the last answer came
    first_refused: float | None = None
    samples: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # (time, cpu)


async def measure(
    options: Options, *, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    started, table = time.monotonic(), f"new-documents-{uuid.uuid4().hex[:12]}"
    stored = list(data.items(users=range(1), loans_per_user=1, payments_per_loan=ALIASES))
    refs = [(item["loc_loan_id"]["S"], item["loc_payment_id"]["S"]) for item in stored]
    served = Settings(env="local")
    limits = payments_limits(query_limits(served))
    cost = operation_cost(build_schema(limits).served, parse(document(0, refs)), None, {}, limits)
    token = mint_development_token(served, user_id=stored[0]["loc_user_id"]["S"], now=time.time())
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(local_database.dynamodb())
        async with data.raw_client(endpoint) as client:
            await create_table_if_missing(client, table)
            try:
                await data.load(client, table, iter(stored))
                async with serving(endpoint, table, log_level="INFO") as [service]:
                    found = await _offer(service, token, refs, options, log)
            finally:
                with contextlib.suppress(Exception):
                    await client.delete_table(TableName=table)
    return found | {
        "aliases": ALIASES,
        "document_cost": cost,
        "seconds": round(time.monotonic() - started, 1),
    }


async def _offer(
    service: Service,
    token: str,
    refs: list[tuple[str, str]],
    options: Options,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """A first document, whose charge says the budget and the floor; the service's idle CPU;
    then the phase."""
    connections = _Connections(HOST, service.port)
    try:
        status, body = await connections.post(_post(service, token, document(0, refs)))
        if status != 200 or b'"errors"' in body:
            raise RuntimeError(f"the first document failed: {status} {body[:300]!r}")
        # Charged as the service charges a first parse: max(its cost, the floor).
        charge = orjson.loads(body)["extensions"]["cost"]
        charged, budget = charge["requestedQueryCost"], charge["throttleStatus"]
        per_second = TIMES_THE_RATE * budget["restoreRate"] / charged
        count = int(per_second * options.seconds)
        log(f"new documents: {per_second:g} a second of {ALIASES} aliases, each charged {charged}")
        # Made before the phase: the sender's own work stays out of its pace.
        requests = [_post(service, token, document(number, refs)) for number in range(1, count + 1)]
        cpu, wall = service.cpu_seconds(), time.monotonic()
        await asyncio.sleep(options.idle_seconds)  # the first document's charge refills meanwhile
        idle = (service.cpu_seconds() - cpu) / (time.monotonic() - wall)
        phase = await _phase(service, connections, requests, per_second)
    finally:
        connections.close()
    return _record(options, phase, idle) | {
        "charged": charged,
        "rate": budget["restoreRate"],
        "burst": budget["maximumAvailable"],
        "per_second": per_second,
    }


async def _phase(
    service: Service, connections: _Connections, requests: list[bytes], per_second: float
) -> _Phase:
    """`requests` sent at `per_second`, not waiting for answers; what came back, and the
    service's CPU sampled meanwhile."""
    phase = _Phase(offered=len(requests))

    async def one(request: bytes, due: float) -> None:
        try:
            status, body = await connections.post(request, due=due, phase=phase)
        except (OSError, asyncio.IncompleteReadError, ValueError) as error:
            phase.failed.append(repr(error))
            return
        if status == 429:
            phase.refused += 1
            if phase.first_refused is None:
                phase.first_refused = time.monotonic()
        elif status == 200 and b'"errors"' not in body:
            phase.admitted += 1
        else:
            phase.failed.append(f"{status} {body[:200]!r}")

    async def sample() -> None:
        while True:
            phase.samples.append((time.monotonic(), service.cpu_seconds()))
            await asyncio.sleep(SAMPLE_SECONDS)

    sampler = asyncio.create_task(sample())
    tasks = []
    phase.started = start = time.monotonic()
    for number, request in enumerate(requests):
        due = start + number / per_second
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        tasks.append(asyncio.create_task(one(request, due)))
    phase.sent = time.monotonic()
    await asyncio.gather(*tasks)
    phase.ended = time.monotonic()
    sampler.cancel()
    phase.samples.append((phase.ended, service.cpu_seconds()))
    return phase


def _post(service: Service, token: str, query: str) -> bytes:
    """A POST of `query` to the service's /graphql, as the bytes a client sends."""
    body = orjson.dumps({"query": query})
    head = (
        f"POST /graphql HTTP/1.1\r\nhost: {HOST}:{service.port}\r\n"
        f"content-type: application/json\r\nauthorization: Bearer {token}\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class _Connections:
    """Keep-alive HTTP/1.1 connections to the service, each carrying one request at a time, a
    new one opened when none is free: a sender much lighter than an HTTP client library, so
    that it keeps its pace on the machine the service shares."""

    def __init__(self, host: str, port: int) -> None:
        self._host, self._port = host, port
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._open: list[asyncio.StreamWriter] = []

    async def post(
        self, request: bytes, *, due: float | None = None, phase: _Phase | None = None
    ) -> tuple[int, bytes]:
        """The answer's status and body; `phase` notes how late `request` went out after
        `due`."""
        if self._idle:
            reader, writer = self._idle.pop()
        else:
            reader, writer = await asyncio.open_connection(self._host, self._port)
            self._open.append(writer)
        if phase is not None and due is not None:
            phase.latest_send = max(phase.latest_send, time.monotonic() - due)
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        length = _CONTENT_LENGTH.search(head)
        if length is None:
            raise ValueError(f"an answer without its length: {head!r}")
        body = await reader.readexactly(int(length[1]))
        self._idle.append((reader, writer))
        return int(head[9:12]), body

    def close(self) -> None:
        for writer in self._open:
            writer.close()


def _cpu_at(samples: list[tuple[float, float]], when: float) -> tuple[float, float]:
    """The first sample at or after `when` (the last one if none)."""
    return next((sample for sample in samples if sample[0] >= when), samples[-1])


def _share(samples: list[tuple[float, float]], since: float, until: float, idle: float) -> float:
    """The CPU between the samples nearest `since` and `until`, less the idle CPU, a second."""
    (first, cpu), (last, then) = _cpu_at(samples, since), _cpu_at(samples, until)
    return (then - cpu) / (last - first) - idle if last > first else math.nan


def _record(options: Options, phase: _Phase, idle: float) -> dict[str, Any]:
    after = None if phase.first_refused is None else phase.first_refused + SETTLE_SECONDS
    steady = math.nan if after is None else _share(phase.samples, after, phase.ended, idle)
    return {
        "settings": dataclasses.asdict(options),
        "offered": phase.offered,
        "admitted": phase.admitted,
        "refused": phase.refused,
        "failed": len(phase.failed),
        "failures": phase.failed[:5],
        "offering_seconds": round(phase.sent - phase.started, 2),
        "answered_seconds": round(phase.ended - phase.started, 2),
        "burst_seconds": None
        if phase.first_refused is None
        else round(phase.first_refused - phase.started, 2),
        "sender_latest_ms": round(phase.latest_send * 1000, 1),
        "sender_kept_up": phase.latest_send <= LATE_SECONDS,
        "idle_share": round(idle, 4),
        "share_after_burst": round(steady, 4),
        "share_whole_phase": round(_share(phase.samples, phase.started, phase.ended, idle), 4),
        "target": TARGET,
        "met": steady <= TARGET,
    }


def targets(results: dict[str, Any]) -> list[Target]:
    name = "new documents at 10x a customer's rate: share of a core after the burst"
    return [Target(name, {"local": _figure(results["share_after_burst"])}, TARGET, "max")]


def _figure(share: float | None) -> float:
    """A share as measured (`None` once the JSON file has it: not measured)."""
    return math.nan if share is None else share


def _percent(share: float | None) -> str:
    share = _figure(share)
    return "not measured" if math.isnan(share) else f"{share:.1%}"


def render(results: dict[str, Any]) -> str:
    cost, charged = results["document_cost"], results["charged"]
    price = f"charged {charged}, the new-document floor" if charged > cost else f"charged {cost}"
    kept = "kept its pace" if results["sender_kept_up"] else "fell behind"
    failed = f", {results['failed']:,} failed" if results["failed"] else ""
    burst = results["burst_seconds"]
    burst_words = "none refused" if burst is None else f"the first refused after {burst:g} s"
    return (
        f"New documents: a customer sending only new documents of {results['aliases']} aliased "
        f"lookups (cost {cost}, {price}) at ten times its budget's rate in them "
        f"({results['rate']:g} / {charged} = {results['per_second'] / TIMES_THE_RATE:g} a "
        f"second, burst {results['burst']:,}): {results['per_second']:g} a second for "
        f"{results['settings']['seconds']:g} s, the sender {kept} (at most "
        f"{results['sender_latest_ms']:g} ms late); {results['admitted']:,} of "
        f"{results['offered']:,} admitted, {results['refused']:,} refused{failed}, "
        f"{burst_words}. The service's CPU, less its idle {_percent(results['idle_share'])} "
        f"of a core: {_percent(results['share_after_burst'])} of a core after the burst, "
        f"{_percent(results['share_whole_phase'])} over the whole phase; target at most "
        f"{TARGET:.0%} after the burst: {'met' if results['met'] else 'NOT met'}"
    )


if __name__ == "__main__":
    options = QUICK if "--quick" in sys.argv else DEFAULT
    found = uvloop.run(measure(options, log=lambda line: print(line, file=sys.stderr)))
    print(render(found) + ".")
