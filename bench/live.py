"""Live updates under load: how long a write takes to reach its subscribers, and that none is lost.

    python -m bench.live [--subscribers 100] [--writes 1000] [--instances 2]

DynamoDB Local (in memory) and N real server instances (`python -m server serve`) on one table,
each reading the table's stream at the default poll interval. `--subscribers` gql WebSocket
sessions (graphql-transport-ws), spread evenly over the instances, each subscribe to
`paymentEvents` for one of `--users` users, so each event reaches subscribers/users of them. Then
`--writers` concurrent writers make `--writes` writes over HTTP, through the instances in turn:
`createPayment` (PINLESS), and for every other payment created a move (`skipPayment` or
`failPayment`). Each write's answer (its paymentId and version) is timed when it arrives, each
subscriber message when it arrives; a delivery's latency is the second minus the first. A message
may arrive before its write's answer reaches the writer: such latencies are negative and kept.

Before the writes, one probe payment per user is written (again, until every subscriber saw one
of its user's): then every subscription is registered on its instance. Probes are not counted.

Everything runs in this process's one event loop (uvloop): the subscribers' arrival times include
the time this loop takes to get to them. The JSON report goes to stdout, progress to stderr; the
exit status is non-zero when a delivery was missing, repeated or unexpected.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import IO, Any

import httpx
import jwt
import uvloop
from gql import Client
from gql.graphql_request import GraphQLRequest
from gql.transport.websockets import WebsocketsTransport

from bench.processes import ROOT, free_port
from datasource.client import open_client
from datasource.config import DynamoConfig
from datasource.table import create_table_if_missing
from server.embedded_dynamodb import EmbeddedDynamoDB
from server.settings import DEV_JWT_SECRET, LOCAL_AWS_CREDENTIALS, Settings

REGION = "us-west-2"
LOAN_ID = "loan-1"
TOKEN_TTL_SECONDS = 3 * 60 * 60
READY_TIMEOUT_SECONDS = 60.0
# How long the probes may take to reach every subscriber, and the pause between probe rounds.
PROBE_TIMEOUT_SECONDS = 30.0
PROBE_ROUND_SECONDS = 1.5
# After the last write: how long the deliveries may keep coming in without any progress, and how
# long to keep listening once all arrived (a repeat would come within a poll or two).
SETTLE_TIMEOUT_SECONDS = 10.0
LINGER_SECONDS = 1.0

EVENTS = """
subscription($u: ID) {
  paymentEvents(userId: $u) { version fromStatus toStatus at payment { paymentId status } }
}
"""
RESULT = """
__typename
... on PaymentPayload { payment { paymentId userId version status } }
... on UserError { code message }
"""
# The moves made after a creation, in turn: both valid from PENDING for PINLESS.
MOVES = ("skipPayment", "failPayment")

Log = Callable[[str], None]


@dataclass(frozen=True)
class LiveOptions:
    subscribers: int = 100
    writes: int = 1000
    instances: int = 2
    users: int = 10
    writers: int = 4


def service_token() -> str:
    claims = {
        "sub": "bench-live",
        "scope": "payments:read payments:service",
        "exp": int(time.time()) + TOKEN_TTL_SECONDS,
    }
    return jwt.encode(claims, DEV_JWT_SECRET, algorithm="HS256")


def user_id(number: int) -> str:
    return f"bench-user-{number}"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the server instances -------------------------------------------------------------------


class Instance:
    """`python -m server serve` on a free port, on the given table; output to a temporary file."""

    def __init__(
        self, endpoint_url: str | None, table_name: str, settings: Mapping[str, str] | None = None
    ) -> None:
        """`settings`: more LOC_* variables, by setting name (`stream_poll_interval`).
        Without an endpoint the server starts its own DynamoDB Local (give it a `data_dir`)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}/graphql"
        self._environment = {
            **{name: value for name, value in os.environ.items() if not name.startswith("LOC_")},
            "LOC_ENV": "local",
            **({} if endpoint_url is None else {"LOC_DYNAMODB_ENDPOINT": endpoint_url}),
            "LOC_TABLE_NAME": table_name,
            "LOC_REGION": REGION,
            "LOC_PORT": str(self.port),
            "LOC_METRICS": "off",
            "LOC_LOG_LEVEL": "WARNING",
            "AWS_ACCESS_KEY_ID": LOCAL_AWS_CREDENTIALS["aws_access_key_id"],
            "AWS_SECRET_ACCESS_KEY": LOCAL_AWS_CREDENTIALS["aws_secret_access_key"],
            **{f"LOC_{name.upper()}": value for name, value in (settings or {}).items()},
        }
        self._log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def exit_code(self, timeout: float) -> int:
        """The server's exit status, waiting up to `timeout` seconds for it."""
        assert self._process is not None
        return self._process.wait(timeout)

    def start(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "server", "serve"],
            cwd=ROOT,
            env=self._environment,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    async def wait_ready(self, http: httpx.AsyncClient) -> None:
        """Until `/readyz` says the stream is read (`"liveUpdates":"ok"`)."""
        assert self._process is not None
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"the server on {self.url} exited:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                response = await http.get(f"{self.url}/readyz", timeout=2)
                if b'"liveUpdates":"ok"' in response.content:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the server on {self.url} never became ready:\n{self.log_tail()}"
                )
            await asyncio.sleep(0.1)

    def log_tail(self, limit: int = 3000) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-limit:]

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._log.close()


@contextlib.asynccontextmanager
async def _instances(
    endpoint_url: str, table_name: str, count: int, http: httpx.AsyncClient
) -> AsyncIterator[list[Instance]]:
    started: list[Instance] = []
    try:
        for _ in range(count):
            instance = Instance(endpoint_url, table_name)
            started.append(instance)
            instance.start()
        for instance in started:
            await instance.wait_ready(http)
        yield started
    finally:
        for instance in started:
            instance.stop()


@contextlib.asynccontextmanager
async def _table(endpoint_url: str) -> AsyncIterator[str]:
    """A new table (with its stream) on DynamoDB Local, deleted afterwards."""
    config = DynamoConfig(
        table_name=f"live-bench-{uuid.uuid4().hex[:12]}",
        region=REGION,
        endpoint_url=endpoint_url,
        aws_access_key_id=LOCAL_AWS_CREDENTIALS["aws_access_key_id"],
        aws_secret_access_key=LOCAL_AWS_CREDENTIALS["aws_secret_access_key"],
    )
    async with open_client(config) as client:
        await create_table_if_missing(client, config.table_name)
        try:
            yield config.table_name
        finally:
            with contextlib.suppress(Exception):
                await client.delete_table(TableName=config.table_name)


# --- subscribers and writers ----------------------------------------------------------------


@dataclass(eq=False)
class Subscriber:
    """One gql WebSocket session subscribed to one user's events; each message timed."""

    number: int
    user: str
    instance: Instance
    token: str
    # (paymentId, version, arrival) of every message, in arrival order.
    arrivals: list[tuple[str, int, float]] = field(default_factory=list)
    seen_payments: set[str] = field(default_factory=set)
    task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name=f"subscriber-{self.number}")

    async def _run(self) -> None:
        transport = WebsocketsTransport(
            url=self.instance.ws_url,
            init_payload={"Authorization": f"Bearer {self.token}"},
            subprotocols=[WebsocketsTransport.GRAPHQLWS_SUBPROTOCOL],
        )
        async with Client(transport=transport) as session:
            request = GraphQLRequest(EVENTS, variable_values={"u": self.user})
            async for result in session.subscribe(request):
                arrival = time.perf_counter()
                event = result["paymentEvents"]
                payment_id = event["payment"]["paymentId"]
                self.arrivals.append((payment_id, event["version"], arrival))
                self.seen_payments.add(payment_id)

    def failure(self) -> str | None:
        """Why the session ended, if it did (it should not before the end)."""
        if self.task is None or not self.task.done():
            return None
        if self.task.cancelled():
            return "cancelled"
        error = self.task.exception()
        return "ended" if error is None else f"{type(error).__name__}: {error}"

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task


class WriteFailed(RuntimeError):
    pass


@dataclass
class Writes:
    """The writes made: each answer's (paymentId, version) -> (user, answer time)."""

    answered: dict[tuple[str, int], tuple[str, float]] = field(default_factory=dict)
    answer_latencies: list[float] = field(default_factory=list)
    by_mutation: Counter[str] = field(default_factory=Counter)
    made: int = 0

    async def write(
        self,
        http: httpx.AsyncClient,
        instance: Instance,
        mutation: str,
        input: dict[str, Any],
        token: str,
    ) -> dict[str, Any]:
        type_name = mutation[0].upper() + mutation[1:] + "Input"
        sent = time.perf_counter()
        response = await http.post(
            f"{instance.url}/graphql",
            json={
                "query": f"mutation($input: {type_name}!) {{ {mutation}(input: $input) "
                f"{{ {RESULT} }} }}",
                "variables": {"input": input},
            },
            headers={"Authorization": f"Bearer {token}"},
        )
        answered = time.perf_counter()
        body = response.json()
        result = (body.get("data") or {}).get(mutation) or {}
        if "errors" in body or result.get("__typename") != "PaymentPayload":
            raise WriteFailed(f"{mutation} on {instance.url}: {body}")
        payment: dict[str, Any] = result["payment"]
        self.answered[(payment["paymentId"], payment["version"])] = (payment["userId"], answered)
        self.answer_latencies.append(answered - sent)
        self.by_mutation[mutation] += 1
        self.made += 1
        return payment


async def _write_load(
    http: httpx.AsyncClient,
    instances: list[Instance],
    options: LiveOptions,
    token: str,
) -> Writes:
    """`options.writes` writes by `options.writers` concurrent writers, the instances in turn."""
    writes = Writes()
    numbers = iter(range(options.writes))
    created = 0

    def instance_of(number: int) -> Instance:
        return instances[number % len(instances)]

    async def writer() -> None:
        nonlocal created
        for number in numbers:
            payment_number, created = created, created + 1
            user = user_id(payment_number % options.users)
            create = {
                "userId": user,
                "loanId": LOAN_ID,
                "amountCents": 4200,
                "method": "PINLESS",
                "reason": "bench",
            }
            payment = await writes.write(http, instance_of(number), "createPayment", create, token)
            if payment_number % 2:
                continue
            move = next(numbers, None)
            if move is None:
                return
            ids = {"userId": user, "loanId": LOAN_ID, "paymentId": payment["paymentId"]}
            mutation = MOVES[(payment_number // 2) % len(MOVES)]
            await writes.write(http, instance_of(move), mutation, {**ids, "reason": "bench"}, token)

    await asyncio.gather(*(writer() for _ in range(options.writers)))
    return writes


async def _register(
    http: httpx.AsyncClient,
    instances: list[Instance],
    subscribers: list[Subscriber],
    token: str,
    log: Log,
) -> set[str]:
    """Probe payments until every subscriber saw one of its user's: all are then registered.
    Returns the probes' payment ids."""
    probes: set[str] = set()
    probing = Writes()
    deadline = time.monotonic() + PROBE_TIMEOUT_SECONDS
    rounds = 0
    while True:
        waiting = [s for s in subscribers if not (s.seen_payments & probes)]
        failed = [s.failure() for s in subscribers if s.failure() is not None]
        if failed:
            raise RuntimeError(f"{len(failed)} subscription(s) ended: {failed[0]}")
        if not waiting:
            log(f"all {len(subscribers)} subscriptions registered ({rounds} probe round(s))")
            return probes
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(waiting)} subscriber(s) never saw a probe")
        for number, user in enumerate(sorted({s.user for s in waiting})):
            payment = await probing.write(
                http,
                instances[number % len(instances)],
                "createPayment",
                {"userId": user, "loanId": LOAN_ID, "amountCents": 100, "method": "PINLESS"},
                token,
            )
            probes.add(payment["paymentId"])
        rounds += 1
        await asyncio.sleep(PROBE_ROUND_SECONDS)


# --- the accounting -------------------------------------------------------------------------


@dataclass
class Tally:
    expected: int
    delivered: int
    duplicates: int
    unexpected: int
    latencies: list[float]

    @property
    def missing(self) -> int:
        return self.expected - self.delivered


def _tally(writes: Writes, subscribers: list[Subscriber], probes: set[str]) -> Tally:
    per_user = Counter(s.user for s in subscribers)
    expected = sum(per_user[user] for user, _ in writes.answered.values())
    delivered = duplicates = unexpected = 0
    latencies: list[float] = []
    for subscriber in subscribers:
        received: set[tuple[str, int]] = set()
        for payment_id, version, arrival in subscriber.arrivals:
            if payment_id in probes:
                continue
            key = (payment_id, version)
            write = writes.answered.get(key)
            if write is None or write[0] != subscriber.user:
                unexpected += 1
            elif key in received:
                duplicates += 1
            else:
                received.add(key)
                delivered += 1
                latencies.append(arrival - write[1])
    return Tally(expected, delivered, duplicates, unexpected, latencies)


async def _settle(
    writes: Writes, subscribers: list[Subscriber], probes: set[str], log: Log
) -> Tally:
    """Waits for the deliveries still under way: until all arrived (and a little longer, for
    any repeat) or until none arrived for SETTLE_TIMEOUT_SECONDS."""
    last_progress = time.monotonic()
    last = _tally(writes, subscribers, probes)
    while last.delivered < last.expected:
        await asyncio.sleep(0.1)
        now = _tally(writes, subscribers, probes)
        if now.delivered > last.delivered:
            last_progress = time.monotonic()
        last = now
        if time.monotonic() - last_progress > SETTLE_TIMEOUT_SECONDS:
            log(f"gave up waiting: {last.missing} deliveries missing")
            return last
    await asyncio.sleep(LINGER_SECONDS)
    return _tally(writes, subscribers, probes)


def _quantile(sorted_values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of all at or below it."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


def _ms(seconds: float) -> float | None:
    """Milliseconds, one decimal; None when nothing was measured."""
    return None if math.isnan(seconds) else round(seconds * 1000, 1)


# --- the run --------------------------------------------------------------------------------


async def measure(
    options: LiveOptions, *, endpoint_url: str | None = None, log: Log = _stderr
) -> dict[str, Any]:
    """The whole benchmark; on DynamoDB Local at `endpoint_url`, or one started here."""
    if options.subscribers < options.users:
        options = dataclasses.replace(options, users=options.subscribers)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        if endpoint_url is None:
            endpoint_url = stack.enter_context(EmbeddedDynamoDB(data_dir=None)).endpoint_url
        limits = httpx.Limits(max_connections=4 * options.writers, max_keepalive_connections=None)
        async with (
            _table(endpoint_url) as table_name,
            httpx.AsyncClient(timeout=30, limits=limits) as http,
            _instances(endpoint_url, table_name, options.instances, http) as instances,
        ):
            log(f"DynamoDB Local and {len(instances)} instance(s) ready")
            return await _measure(options, http, instances, started, log)
    raise AssertionError("unreachable")


async def _measure(
    options: LiveOptions,
    http: httpx.AsyncClient,
    instances: list[Instance],
    started: float,
    log: Log,
) -> dict[str, Any]:
    token = service_token()
    users = [user_id(number) for number in range(options.users)]
    # Round robin over the users, each round starting on the next instance: the subscribers of
    # every user are spread over the instances, and the instances get as many each.
    subscribers = [
        Subscriber(
            number,
            users[number % len(users)],
            instances[(number + number // len(users)) % len(instances)],
            token,
        )
        for number in range(options.subscribers)
    ]
    try:
        for subscriber in subscribers:
            subscriber.start()
        probes = await _register(http, instances, subscribers, token, log)

        write_start = time.perf_counter()
        writes = await _write_load(http, instances, options, token)
        write_seconds = time.perf_counter() - write_start
        log(f"{writes.made} writes in {write_seconds:.1f} s")

        tally = await _settle(writes, subscribers, probes, log)
        failures = [reason for s in subscribers if (reason := s.failure()) is not None]
    finally:
        await asyncio.gather(*(s.stop() for s in subscribers))

    latencies = sorted(tally.latencies)
    answers = sorted(writes.answer_latencies)
    return {
        "settings": {
            **asdict(options),
            "stream_poll_interval_s": Settings.model_fields["stream_poll_interval"].default,
            "subscribers_per_user": options.subscribers / len(users),
        },
        "latency_ms": {
            "p50": _ms(_quantile(latencies, 0.50)),
            "p90": _ms(_quantile(latencies, 0.90)),
            "p99": _ms(_quantile(latencies, 0.99)),
            "max": _ms(_quantile(latencies, 1.0)),
            "min": _ms(latencies[0] if latencies else math.nan),
            "mean": _ms(statistics.fmean(latencies) if latencies else math.nan),
            "negative": sum(1 for latency in latencies if latency < 0),
        },
        "write_answer_ms": {
            "p50": _ms(_quantile(answers, 0.50)),
            "p99": _ms(_quantile(answers, 0.99)),
        },
        "writes": writes.made,
        "writes_by_mutation": dict(writes.by_mutation),
        "writes_per_second": round(writes.made / write_seconds, 1) if write_seconds else None,
        "expected": tally.expected,
        "delivered": tally.delivered,
        "missing": tally.missing,
        "duplicates": tally.duplicates,
        "unexpected": tally.unexpected,
        "subscriber_failures": failures,
        "probes": len(probes),
        "seconds": round(time.monotonic() - started, 1),
    }


def succeeded(results: dict[str, Any]) -> bool:
    """Nothing lost, repeated or stray, and every subscriber stayed connected."""
    return (
        results["missing"] == 0
        and results["duplicates"] == 0
        and results["unexpected"] == 0
        and not results["subscriber_failures"]
    )


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.live", description=__doc__.strip().split("\n")[0]
    )
    defaults = LiveOptions()
    parser.add_argument("--subscribers", type=int, default=defaults.subscribers)
    parser.add_argument("--writes", type=int, default=defaults.writes)
    parser.add_argument("--instances", type=int, default=defaults.instances)
    parser.add_argument("--users", type=int, default=defaults.users)
    parser.add_argument("--writers", type=int, default=defaults.writers)
    return parser.parse_args()


def main() -> None:
    arguments = _arguments()
    options = LiveOptions(
        subscribers=arguments.subscribers,
        writes=arguments.writes,
        instances=arguments.instances,
        users=arguments.users,
        writers=arguments.writers,
    )
    results = uvloop.run(measure(options))
    print(json.dumps(results, indent=1))
    sys.exit(0 if succeeded(results) else 1)


if __name__ == "__main__":
    main()
