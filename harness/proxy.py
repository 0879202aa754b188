"""A TCP proxy in front of DynamoDB that can stop answering or throttle: for the tests of the
circuit breaker and of throttling, and the bench's storm.

    forward   bytes pass both ways
    hang      connections are accepted and kept, and nothing is answered (a network partition,
              a DynamoDB that accepts and never replies)
    reset     every connection is cut as soon as it is used (a refused or dropped connection)

The mode applies at once to open connections too (the client's pool keeps them alive). Every
request is counted by its `X-Amz-Target` (`calls`, e.g. `DynamoDBStreams_20120810.GetRecords`).
`retarget` sends new connections elsewhere (a Redis primary endpoint after a failover: the proxy
carries any TCP protocol). Beside the mode, by DynamoDB operation, whatever the mode:

    lose_answers_to   the request reaches DynamoDB, which applies it; its answer never comes back
    hold              the request waits in the proxy until `release()`, then goes on: DynamoDB
                      applies it late, after the client has given up on it

and `throttle(fraction)`: that fraction of the data calls (`THROTTLED_OPERATIONS`), drawn at
random, is answered by the proxy exactly as DynamoDB answers a throttle, and never reaches
DynamoDB; or `throttle(capacity=N)`: the calls beyond N a second are (a table at its capacity,
whose throttles fall as its callers slow down). The answer is
`ProvisionedThroughputExceededException` (400) for a read or a single write;
`TransactionCanceledException` whose `CancellationReasons` hold, one per item, a
`ThrottlingError` for one item drawn at random and "None" for the others, for a
`TransactWriteItems`. `throttled` counts them by operation.
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
from collections.abc import AsyncIterator
from typing import Literal
from urllib.parse import urlsplit

from datasource.accounting import READ_OPERATIONS, WRITE_OPERATIONS

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
        self.throttled: Counter[str] = Counter()
        self._throttle_fraction = 0.0
        self._random = random.Random(0)
        # A token bucket of `capacity` calls a second (none: no limit), holding up to a second's.
        self._capacity: float | None = None
        self._tokens = 0.0
        self._filled_at = 0.0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

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
                    await self._released.wait()
                if self._throttles(operation):
                    self.throttled[operation] += 1
                    other.write(_throttle_answer(operation, data, self._random))
                    await other.drain()
                    continue
            if answering is not None and answering[0] in self.lose_answers_to:
                continue  # applied, never answered
            sink.write(data)
            await sink.drain()


_POST = b"POST "
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
_ERROR_TYPE = "com.amazonaws.dynamodb.v20120810#"
_THROUGHPUT = (
    "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically "
    "scaling your table or index so please try again shortly."
)


def _throttle_answer(operation: str, request: bytes, draw: random.Random) -> bytes:
    """DynamoDB's answer to a throttled `operation`, as bytes on the wire."""
    if operation == "TransactWriteItems":
        _, _, body = request.partition(_HEAD_END)
        count = max(1, len(json.loads(body).get("TransactItems", [])))
        throttled = draw.randrange(count)
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
