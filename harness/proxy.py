"""A TCP proxy in front of DynamoDB that can stop answering or throttle: for the tests of the
circuit breaker and of throttling, and the bench's storm.

`Proxy.mode` is `forward`, `hang` (connections accepted, nothing answered) or `reset` (each cut
as soon as it is used), applied at once to open connections too; `calls` counts requests by
`X-Amz-Target`, `answers` the target's answers by the operation they answer; `retarget` sends
new connections elsewhere (it carries any TCP protocol, a Redis failover too). Whatever the mode,
by DynamoDB operation: `lose_answers_to` (applied, its connection cut before the answer gets
back) and `hold` (the connection cut at once, the request applied late, after `release()`): the
client sees its answer lost without waiting out a timeout. `throttle(fraction)` or
`throttle(capacity=N)` answers data calls as DynamoDB answers a throttle (a
`ProvisionedThroughputExceededException`, or a transaction's `ThrottlingError` at one item)
without sending them on; `throttle_partitions` throttles per partition key as DynamoDB does, its
units from `harness.partitions`. `throttled` and `partitions` count what was throttled.
`delay(seconds, when)` holds each request that `when(operation, request)` accepts for `seconds`
before sending it on (the bench's slow history reads), its connection alone waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import time
import uuid
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal
from urllib.parse import urlsplit

import aioboto3

from datasource import READ_OPERATIONS, WRITE_OPERATIONS
from harness.partitions import PARTITION_WRITE_UNITS, Item, Limits, Write, creates, key_of, updated
from process.settings import LOCAL_AWS_CREDENTIALS

__all__ = ["THROTTLED_OPERATIONS", "Proxy", "proxy_to"]

Mode = Literal["forward", "hang", "reset"]


class Proxy:
    def __init__(self, target_url: str) -> None:
        target = urlsplit(target_url)
        assert target.hostname is not None and target.port is not None
        self._target = (target.hostname, target.port)
        self.mode: Mode = "forward"
        self.lose_answers_to: set[str] = set()
        self.hold: set[str] = set()
        self.held = 0  # requests held so far
        self._released = asyncio.Event()
        self.connections = 0
        self.calls: Counter[str] = Counter()
        # Answers from the target, passed back or lost, by operation: when a request held or
        # abandoned by its client has been applied.
        self.answers: Counter[str] = Counter()
        self.throttled: Counter[str] = Counter()
        self._throttle_fraction = 0.0
        self._random = random.Random(0)
        # A token bucket of `capacity` calls a second (none: no limit), holding up to a second's.
        self._capacity: float | None = None
        self._tokens = 0.0
        self._filled_at = 0.0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Per-partition throttling (`throttle_partitions`), and its reader of items before a write.
        self.partitions: Limits | None = None
        self._reader_stack = contextlib.AsyncExitStack()
        self._reader: Any = None
        self._delay = 0.0
        self._delayed: Callable[[str, bytes], bool] = lambda operation, request: False
        self.delayed: Counter[str] = Counter()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._reader_stack.aclose()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            if self.mode == "reset":
                return
            target_reader, target_writer = await asyncio.open_connection(*self._target)
            # The operation of the request last sent on this connection, whose answer comes next.
            asked: list[str] = [""]
            try:
                await asyncio.gather(
                    self._pipe(reader, target_writer, writer, asked=asked),
                    self._pipe(target_reader, writer, target_writer, answering=asked),
                )
            finally:
                target_writer.transport.abort()
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # Stopped by `stop` or `retarget`: end normally, or asyncio's stream server logs the
            # cancelled handler as an error in a callback.
            pass
        finally:
            # Whatever ended it (a cut, the target refusing, a cancellation by `stop` or
            # `retarget` while it still connected to the target): the client's side is closed,
            # never left for the garbage collector (a ResourceWarning, an error in the tests).
            writer.transport.abort()
            self._tasks.discard(task)

    def retarget(self, target_url: str) -> None:
        """New connections go to `target_url`; open ones are cut, as a failover cuts them."""
        target = urlsplit(target_url)
        assert target.hostname is not None and target.port is not None
        self._target = (target.hostname, target.port)
        for task in list(self._tasks):
            task.cancel()

    def throttle(
        self, fraction: float = 0.0, *, capacity: float | None = None, seed: int = 0
    ) -> None:
        """Answer `fraction` of the data calls from now on, and those beyond `capacity` a
        second, as DynamoDB's throttles (0 and None: none)."""
        self._throttle_fraction = fraction
        self._random = random.Random(seed)
        self._capacity = capacity
        self._tokens = capacity or 0.0
        self._filled_at = time.monotonic()

    def throttle_partitions(
        self, units_per_second: float | None, *, burst_units: float = PARTITION_WRITE_UNITS
    ) -> Limits | None:
        """From now on, each partition key of the table and of its indexes takes
        `units_per_second` write units a second, up to `burst_units` at once (None: no limit);
        the limits, which count what each key took and was refused."""
        self.partitions = None
        if units_per_second is not None:
            self.partitions = Limits(units_per_second, burst_units)
        return self.partitions

    async def _partition_throttle(self, operation: str, request: bytes) -> int | None:
        """None when the write fits its partitions' buckets; else the position of the item that
        overdraws one (0 for a single write)."""
        assert self.partitions is not None
        _, _, body = request.partition(_HEAD_END)
        writes = await self._writes(operation, json.loads(body))
        return self.partitions.admit(writes)

    async def _writes(self, operation: str, body: dict[str, Any]) -> list[Write]:
        """The item writes of a request, each with the item before it."""
        # (table, kind, its request, transactional)
        parts: list[tuple[str, str, dict[str, Any], bool]] = []
        if operation == "TransactWriteItems":
            for entry in body.get("TransactItems", []):
                [(kind, request)] = entry.items()
                parts.append((request["TableName"], kind, request, True))
        elif operation == "BatchWriteItem":
            for table, requests in body.get("RequestItems", {}).items():
                for entry in requests:
                    [(kind, request)] = entry.items()
                    parts.append((table, kind.removesuffix("Request"), request, False))
        else:
            kind = operation.removesuffix("Item")
            parts.append((body["TableName"], kind, body, False))
        # A condition check writes nothing.
        parts = [part for part in parts if part[1] != "ConditionCheck"]
        keys = [
            (table, key_of(request["Item"]) if kind == "Put" else request["Key"])
            for table, kind, request, _ in parts
        ]
        before = await self._read(
            [
                table_key
                for table_key, (_, kind, request, _) in zip(keys, parts, strict=True)
                if not (kind == "Put" and creates(request))
            ]
        )
        writes = []
        for (table, key), (_, kind, request, transactional) in zip(keys, parts, strict=True):
            old = before.get((table, json.dumps(key, sort_keys=True)))
            new: Item | None = None
            if kind == "Put":
                new = request["Item"]
            elif kind == "Update":
                new = updated(old, request)
            writes.append(Write(key, old, new, transactional))
        return writes

    async def _read(self, keys: list[tuple[str, Item]]) -> dict[tuple[str, str], Item]:
        """The items at `keys` now, strongly consistent, read straight from DynamoDB."""
        if not keys:
            return {}
        if self._reader is None:
            session = aioboto3.Session()
            self._reader = await self._reader_stack.enter_async_context(
                session.client(
                    "dynamodb",
                    endpoint_url=f"http://{self._target[0]}:{self._target[1]}",
                    region_name="us-west-2",
                    **LOCAL_AWS_CREDENTIALS,
                )
            )
        found: dict[tuple[str, str], Item] = {}
        unique = {(table, json.dumps(key, sort_keys=True)): key for table, key in keys}
        wanted: dict[str, Any] = {}
        for table, key in unique.items():
            wanted.setdefault(table[0], {"Keys": [], "ConsistentRead": True})["Keys"].append(key)
        while wanted:
            answer = await self._reader.batch_get_item(RequestItems=wanted)
            for table, items in answer.get("Responses", {}).items():
                for item in items:
                    found[table, json.dumps(key_of(item), sort_keys=True)] = item
            wanted = answer.get("UnprocessedKeys") or {}
        return found

    def _throttles(self, operation: str) -> bool:
        if operation not in THROTTLED_OPERATIONS:
            return False
        if self._capacity is not None:
            now = time.monotonic()
            elapsed, self._filled_at = now - self._filled_at, now
            self._tokens = min(self._capacity, self._tokens + elapsed * self._capacity)
            if self._tokens < 1:
                return True
            self._tokens -= 1
        return self._random.random() < self._throttle_fraction

    def delay(self, seconds: float, when: Callable[[str, bytes], bool]) -> None:
        """From now on, hold each request for which `when(its operation, its bytes)` is true
        `seconds` before sending it on (0: none held)."""
        self._delay, self._delayed = seconds, when

    def release(self) -> None:
        """Send on every request held, and hold no more."""
        self.hold = set()
        self._released.set()

    async def _pipe(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        other: asyncio.StreamWriter,
        *,
        asked: list[str] | None = None,
        answering: list[str] | None = None,
    ) -> None:
        while data := await source.read(65536):
            if asked is not None and data.startswith(_POST):
                data += await _rest_of_request(source, data)
            if asked is not None:
                self.calls.update(target.decode() for target in _TARGETS.findall(data))
            if self.mode == "reset":
                sink.transport.abort()
                other.transport.abort()
                return
            if self.mode == "hang":
                continue  # swallowed: the other side waits for ever
            if asked is not None and (operation := _operation(data)) is not None:
                asked[0] = operation
                if operation in self.hold:
                    self.held += 1
                    other.transport.abort()  # the client's connection: no answer comes
                    await self._released.wait()
                if self._delay > 0 and self._delayed(operation, data):
                    self.delayed[operation] += 1
                    await asyncio.sleep(self._delay)
                if self._throttles(operation):
                    self.throttled[operation] += 1
                    other.write(_throttle_answer(operation, data, self._random))
                    await other.drain()
                    continue
                if self.partitions is not None and operation in PARTITIONED_WRITES:
                    position = await self._partition_throttle(operation, data)
                    if position is not None:
                        self.throttled[operation] += 1
                        answer = _throttle_answer(operation, data, self._random, at=position)
                        other.write(answer)
                        await other.drain()
                        continue
            if answering is not None and data.startswith(_ANSWER):
                self.answers[answering[0]] += 1
            if answering is not None and answering[0] in self.lose_answers_to:
                sink.transport.abort()  # applied; the client's connection cut before its answer
                return
            sink.write(data)
            await sink.drain()


_POST = b"POST "
# An answer's first read (the SDK asks one request at a time on a connection).
_ANSWER = b"HTTP/"
_CONTENT_LENGTH = re.compile(rb"content-length: *(\d+)", re.IGNORECASE)
_HEAD_END = b"\r\n\r\n"


async def _rest_of_request(source: asyncio.StreamReader, start: bytes) -> bytes:
    """The bytes of an HTTP request that `start` (its first read) lacks: the rest of its head
    and of its body, by its Content-Length (the SDK sends no chunked bodies)."""
    rest = b""
    if _HEAD_END not in start:
        rest = await source.readuntil(_HEAD_END)
    head, _, body = (start + rest).partition(_HEAD_END)
    length = _CONTENT_LENGTH.search(head)
    missing = (int(length.group(1)) if length else 0) - len(body)
    return rest + (await source.readexactly(missing) if missing > 0 else b"")


# The data calls a throttle answers; DescribeTable (the breaker's probe, readiness) is never one.
THROTTLED_OPERATIONS = READ_OPERATIONS | WRITE_OPERATIONS
# The writes a partition's limit applies to (reads have a limit of their own, not simulated).
PARTITIONED_WRITES = WRITE_OPERATIONS
_ERROR_TYPE = "com.amazonaws.dynamodb.v20120810#"
_THROUGHPUT = (
    "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically "
    "scaling your table or index so please try again shortly."
)


def _throttle_answer(
    operation: str, request: bytes, draw: random.Random, *, at: int | None = None
) -> bytes:
    """DynamoDB's answer to a throttled `operation`, as bytes on the wire; a transaction's
    `ThrottlingError` at its item `at` (None: one drawn at random)."""
    if operation == "TransactWriteItems":
        _, _, body = request.partition(_HEAD_END)
        count = max(1, len(json.loads(body).get("TransactItems", [])))
        throttled = draw.randrange(count) if at is None else at
        reasons = [
            {"Code": "ThrottlingError", "Message": _THROUGHPUT}
            if index == throttled
            else {"Code": "None"}
            for index in range(count)
        ]
        codes = ", ".join(reason["Code"] for reason in reasons)
        error: dict[str, object] = {
            "__type": _ERROR_TYPE + "TransactionCanceledException",
            "CancellationReasons": reasons,
            "Message": f"Transaction cancelled, please refer cancellation reasons for specific "
            f"reasons [{codes}]",
        }
    else:
        error = {
            "__type": _ERROR_TYPE + "ProvisionedThroughputExceededException",
            "message": _THROUGHPUT,
        }
    body = json.dumps(error).encode()
    head = (
        "HTTP/1.1 400 Bad Request\r\n"
        f"x-amzn-RequestId: {uuid.uuid4().hex.upper()}\r\n"
        f"x-amz-crc32: {zlib.crc32(body)}\r\n"
        "Content-Type: application/x-amz-json-1.0\r\n"
        f"Content-Length: {len(body)}\r\n"
        "\r\n"
    )
    return head.encode() + body


_TARGET = re.compile(rb"x-amz-target: *DynamoDB_\d+\.(\w+)", re.IGNORECASE)
_TARGETS = re.compile(rb"x-amz-target: *(DynamoDB\w*\.\w+)", re.IGNORECASE)


def _operation(request: bytes) -> str | None:
    """The DynamoDB operation a request's first bytes name (its headers come first)."""
    found = _TARGET.search(request)
    return None if found is None else found.group(1).decode()


@contextlib.asynccontextmanager
async def proxy_to(target_url: str) -> AsyncIterator[Proxy]:
    proxy = Proxy(target_url)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()
