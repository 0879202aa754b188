"""`python -m bench.live [--subscribers 100] [--writes 1000] [--instances 2] [--users 10]
[--writers 4] [--broker 1]`: how long a write takes to reach its subscribers, and that none is
lost.

N services on one DynamoDB Local table, each reading its stream; with `--broker 1` a fleet
(SPEC §17): one of them reads the stream under a lease and every instance reads the events from
a Redis broker (Debian's `redis-server`, started here). Each subscriber (gql over
graphql-transport-ws) subscribes to one user's `paymentEvents` on one instance. Probe payments
are written until every subscriber saw one (they are not counted); then the writers write
through the instances in turn, `createPayment` and for every other payment a move. A delivery's
latency is its message's arrival less its write's answer's (negative when the message came
first). The exit status is non-zero when a delivery was missing, repeated or unexpected.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import math
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
import jwt
import uvloop
from gql import Client
from gql.graphql_request import GraphQLRequest
from gql.transport.websockets import WebsocketsTransport

from bench import data, load, local_database
from datasource import create_table_if_missing
from harness.processes import Service, serving
from harness.redis_server import RedisServer
from process.settings import DEV_JWT_SECRET, Settings

__all__ = ["FLEET", "QUICK", "QUICK_FLEET", "LiveOptions", "main", "measure", "succeeded"]

LOAN = "loan-1"
PROBE_TIMEOUT_SECONDS, PROBE_ROUND_SECONDS = 30.0, 1.5
# After the last write: how long deliveries may keep coming without progress, and how long to
# keep listening once all arrived (a repeat would come within a poll or two).
SETTLE_TIMEOUT_SECONDS, LINGER_SECONDS = 10.0, 1.0
EVENTS = """subscription($u: ID) {
  paymentEvents(userId: $u) { version fromStatus toStatus at payment { paymentId status } }
}"""
RESULT = """__typename
... on PaymentPayload { payment { paymentId userId version status } }
... on UserError { code message }"""
MOVES = ("skipPayment", "failPayment")  # both valid from PENDING for PINLESS

Log = Callable[[str], None]


@dataclass(frozen=True)
class LiveOptions:
    subscribers: int = 100
    writes: int = 1000
    instances: int = 2
    users: int = 10
    writers: int = 4
    broker: int = 0  # 1: through a Redis broker, one stream reader (an int for the CLI)


QUICK = LiveOptions(subscribers=4, writes=20, users=2)
# `make bench`'s fleet pass: three instances through the broker.
FLEET = LiveOptions(instances=3, broker=1)
QUICK_FLEET = dataclasses.replace(QUICK, instances=3, broker=1)
_stderr: Log = functools.partial(print, file=sys.stderr, flush=True)


@dataclass(eq=False)
class Subscriber:
    """One gql WebSocket session subscribed to one user's events; each message timed."""

    user: str
    instance: Service
    # (paymentId, version, arrival) of every message, in arrival order.
    arrivals: list[tuple[str, int, float]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    async def run(self, token: str) -> None:
        transport = WebsocketsTransport(
            url=self.instance.ws_url,
            init_payload={"Authorization": f"Bearer {token}"},
            subprotocols=[WebsocketsTransport.GRAPHQLWS_SUBPROTOCOL],
        )
        request = GraphQLRequest(EVENTS, variable_values={"u": self.user})
        async with Client(transport=transport) as session:
            async for result in session.subscribe(request):
                event = result["paymentEvents"]
                arrival = (event["payment"]["paymentId"], event["version"], time.perf_counter())
                self.arrivals.append(arrival)

    def failure(self) -> str | None:
        """Why the session ended, if it did (it should not before the end)."""
        if self.task is None or not self.task.done():
            return None
        if self.task.cancelled():
            return "cancelled"
        error = self.task.exception()
        return "ended" if error is None else f"{type(error).__name__}: {error}"


@dataclass
class Writes:
    """The writes made: each answer's (paymentId, version) -> (user, answer time)."""

    http: httpx.AsyncClient
    token: str
    answered: dict[tuple[str, int], tuple[str, float]] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    by_mutation: Counter[str] = field(default_factory=Counter)

    async def write(self, instance: Service, mutation: str, input: dict[str, Any]) -> Any:
        input_type = mutation[0].upper() + mutation[1:] + "Input"
        query = f"mutation($i: {input_type}!) {{ {mutation}(input: $i) {{ {RESULT} }} }}"
        sent = time.perf_counter()
        payload = {"query": query, "variables": {"i": input}}
        headers = {"Authorization": f"Bearer {self.token}"}
        response = await self.http.post(f"{instance.url}/graphql", json=payload, headers=headers)
        answered, body = time.perf_counter(), response.json()
        result = (body.get("data") or {}).get(mutation) or {}
        if "errors" in body or result.get("__typename") != "PaymentPayload":
            raise RuntimeError(f"{mutation} on {instance.url}: {body}")
        payment = result["payment"]
        self.answered[(payment["paymentId"], payment["version"])] = (payment["userId"], answered)
        self.latencies.append(answered - sent)
        self.by_mutation[mutation] += 1
        return payment


async def _write_load(writes: Writes, instances: list[Service], options: LiveOptions) -> None:
    """The writes, by concurrent writers, through the instances in turn."""
    numbers, created = iter(range(options.writes)), 0

    async def writer() -> None:
        nonlocal created
        for number in numbers:
            payment_number, created = created, created + 1
            ids = {"userId": f"bench-user-{payment_number % options.users}", "loanId": LOAN}
            create = {**ids, "amountCents": 4200, "method": "PINLESS", "reason": "bench"}
            at = instances[number % len(instances)]
            payment = await writes.write(at, "createPayment", create)
            if payment_number % 2 == 0 and (move := next(numbers, None)) is not None:
                mutation = MOVES[(payment_number // 2) % len(MOVES)]
                ids |= {"paymentId": payment["paymentId"], "reason": "bench"}
                await writes.write(instances[move % len(instances)], mutation, ids)

    await asyncio.gather(*(writer() for _ in range(options.writers)))


async def _register(
    probing: Writes, instances: list[Service], subscribers: list[Subscriber], log: Log
) -> set[str]:
    """Probe payments until every subscriber saw one of its user's; the probes' payment ids."""
    probes: set[str] = set()
    deadline, rounds = time.monotonic() + PROBE_TIMEOUT_SECONDS, 0
    while waiting := [s for s in subscribers if not ({a[0] for a in s.arrivals} & probes)]:
        if failed := [reason for s in subscribers if (reason := s.failure()) is not None]:
            raise RuntimeError(f"{len(failed)} subscription(s) ended: {failed[0]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(waiting)} subscriber(s) never saw a probe")
        for number, user in enumerate(sorted({s.user for s in waiting})):
            create = {"userId": user, "loanId": LOAN, "amountCents": 100, "method": "PINLESS"}
            probe = await probing.write(instances[number % len(instances)], "createPayment", create)
            probes.add(probe["paymentId"])
        rounds += 1
        await asyncio.sleep(PROBE_ROUND_SECONDS)
    log(f"all {len(subscribers)} subscriptions registered ({rounds} probe round(s))")
    return probes


def _tally(writes: Writes, subscribers: list[Subscriber], probes: set[str]) -> dict[str, Any]:
    per_user = Counter(s.user for s in subscribers)
    expected = sum(per_user[user] for user, _ in writes.answered.values())
    found: dict[str, Any] = {"expected": expected, "delivered": 0, "missing": 0}
    found |= {"duplicates": 0, "unexpected": 0, "latencies": []}
    for subscriber in subscribers:
        received: set[tuple[str, int]] = set()
        for payment_id, version, arrival in subscriber.arrivals:
            write = writes.answered.get((payment_id, version))
            if payment_id in probes:
                continue
            if write is None or write[0] != subscriber.user:
                found["unexpected"] += 1
            elif (payment_id, version) in received:
                found["duplicates"] += 1
            else:
                received.add((payment_id, version))
                found["delivered"] += 1
                found["latencies"].append(arrival - write[1])
    found["missing"] = found["expected"] - found["delivered"]
    return found


async def _settle(writes: Writes, subscribers: list[Subscriber], probes: set[str], log: Log) -> Any:
    """Until every delivery arrived (and LINGER_SECONDS more, for any repeat), or none arrived
    for SETTLE_TIMEOUT_SECONDS."""
    last, progress = _tally(writes, subscribers, probes), time.monotonic()
    while last["missing"]:
        await asyncio.sleep(0.1)
        now = _tally(writes, subscribers, probes)
        if now["delivered"] > last["delivered"]:
            progress = time.monotonic()
        last = now
        if time.monotonic() - progress > SETTLE_TIMEOUT_SECONDS:
            log(f"gave up waiting: {last['missing']} deliveries missing")
            return last
    await asyncio.sleep(LINGER_SECONDS)
    return _tally(writes, subscribers, probes)


def _ms(sorted_seconds: list[float], q: float) -> float | None:
    """The nearest-rank quantile in milliseconds, one decimal; None when nothing was measured."""
    if not sorted_seconds:
        return None
    return round(sorted_seconds[max(1, math.ceil(q * len(sorted_seconds))) - 1] * 1000, 1)


async def measure(
    options: LiveOptions, *, endpoint_url: str | None = None, log: Log = _stderr
) -> dict[str, Any]:
    """The whole benchmark; on DynamoDB Local at `endpoint_url`, or one started here, on a table
    of its own (with its stream), deleted afterwards."""
    options = dataclasses.replace(options, users=min(options.users, options.subscribers))
    started, table = time.monotonic(), f"live-bench-{uuid.uuid4().hex[:12]}"
    claims = {"sub": load.BENCH_CLIENTS[1], "scope": "payments:read payments:service"}
    token = jwt.encode(claims | {"exp": int(time.time()) + 10800}, DEV_JWT_SECRET, "HS256")
    limits = httpx.Limits(max_connections=4 * options.writers, max_keepalive_connections=None)
    with contextlib.ExitStack() as stack:
        if endpoint_url is None:
            endpoint_url = stack.enter_context(local_database.dynamodb())
        fleet: dict[str, str] = {}
        if options.broker:
            broker = RedisServer()
            broker.start()
            stack.callback(broker.stop)
            fleet = {"live_broker_url": broker.redis_url}
        async with data.raw_client(endpoint_url) as client:
            await create_table_if_missing(client, table)
            try:
                async with (
                    httpx.AsyncClient(timeout=30, limits=limits) as http,
                    serving(endpoint_url, table, options.instances, **fleet) as instances,
                ):
                    log(f"DynamoDB Local and {len(instances)} instance(s) ready")
                    found = await _measure(options, Writes(http, token), instances, log)
            finally:
                with contextlib.suppress(Exception):
                    await client.delete_table(TableName=table)
    return found | {"seconds": round(time.monotonic() - started, 1)}


async def _measure(
    options: LiveOptions, writes: Writes, instances: list[Service], log: Log
) -> dict[str, Any]:
    users = [f"bench-user-{number}" for number in range(options.users)]
    # Round robin over the users, each round starting on the next instance: every user's
    # subscribers are spread over the instances, and the instances get as many each.
    subscribers = [
        Subscriber(users[n % len(users)], instances[(n + n // len(users)) % len(instances)])
        for n in range(options.subscribers)
    ]
    try:
        for subscriber in subscribers:
            subscriber.task = asyncio.create_task(subscriber.run(writes.token))
        probes = await _register(Writes(writes.http, writes.token), instances, subscribers, log)
        began = time.perf_counter()
        await _write_load(writes, instances, options)
        seconds, made = time.perf_counter() - began, sum(writes.by_mutation.values())
        log(f"{made} writes in {seconds:.1f} s")
        tally = await _settle(writes, subscribers, probes, log)
        failures = [reason for s in subscribers if (reason := s.failure()) is not None]
    finally:
        tasks = [s.task for s in subscribers if s.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    latencies, answers = sorted(tally.pop("latencies")), sorted(writes.latencies)
    settings = {
        "stream_poll_interval_s": Settings.model_fields["stream_poll_interval"].default,
        "subscribers_per_user": options.subscribers / len(users),
    }
    return {
        "settings": asdict(options) | settings,
        "latency_ms": {
            **{f"p{round(q * 100)}": _ms(latencies, q) for q in (0.5, 0.9, 0.99)},
            "max": _ms(latencies, 1.0),
            "min": _ms(latencies, 0.0),
            "mean": round(statistics.fmean(latencies) * 1000, 1) if latencies else None,
            "negative": sum(1 for latency in latencies if latency < 0),
        },
        "write_answer_ms": {"p50": _ms(answers, 0.5), "p99": _ms(answers, 0.99)},
        "writes": made,
        "writes_by_mutation": dict(writes.by_mutation),
        "writes_per_second": round(made / seconds, 1) if seconds else None,
        **tally,
        "subscriber_failures": failures,
        "probes": len(probes),
    }


def succeeded(results: dict[str, Any]) -> bool:
    """Nothing lost, repeated or stray, and every subscriber stayed connected."""
    lost = results["missing"] or results["duplicates"] or results["unexpected"]
    return not lost and not results["subscriber_failures"]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.live")
    for name, default in asdict(LiveOptions()).items():
        parser.add_argument(f"--{name}", type=int, default=default)
    results = uvloop.run(measure(LiveOptions(**vars(parser.parse_args()))))
    print(json.dumps(results, indent=1))
    sys.exit(0 if succeeded(results) else 1)


if __name__ == "__main__":
    main()
