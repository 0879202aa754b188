"""The load generator: closed-loop HTTP/1.1 keep-alive connections on raw asyncio transports,
responses parsed by httptools (C), timed with `perf_counter_ns`.

Each connection sends one request, waits for the whole response, and sends the next, until the
deadline; a response that is not a 200 counts as an error. Only responses completed before the
deadline count, so the rate is that of the steady state.

httpx would spend a few hundred µs per request of its own; this spends ~20 µs (16,500 req/s on a
third of a core against the HTTP floor, within 10% of `wrk` on the same server), so on its own
core it measures the server, not itself. Each cell's `load_generator_core_share` shows it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import cast

import httptools


@dataclass
class LoadResult:
    # 200 responses completed before the deadline, and their latencies.
    requests: int
    errors: int
    seconds: float
    # Every response, including those in flight at the deadline: the work the server did.
    completed: int
    latencies_ns: list[int] = field(repr=False)

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def http_request(
    host: str,
    port: int,
    path: str,
    body: bytes,
    headers: dict[str, str],
    *,
    content_type: str = "application/json",
) -> bytes:
    """A POST with a fixed body, as raw bytes, sent as is on every request."""
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {host}:{port}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class _Load:
    def __init__(
        self, request: bytes, deadline_ns: int, max_requests: int, min_requests: int
    ) -> None:
        self.request = request
        self.deadline_ns = deadline_ns
        self.max_requests = max_requests
        self.min_requests = min_requests
        self.latencies_ns: list[int] = []
        self.errors = 0
        self.completed = 0

    def counts(self, done_ns: int) -> bool:
        """Whether a response completed at `done_ns` is part of the run. A run whose deadline
        passes before `min_requests` answers lasts until the last of them: a rate needs answers."""
        if done_ns < self.deadline_ns:
            return True
        if len(self.latencies_ns) + self.errors < self.min_requests:
            self.deadline_ns = done_ns + 1
            return True
        return False

    def more(self) -> bool:
        return (
            time.perf_counter_ns() < self.deadline_ns
            and len(self.latencies_ns) + self.errors < self.max_requests
        )


class _Connection(asyncio.Protocol):
    def __init__(self, load: _Load) -> None:
        self._load = load
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._sent_ns = 0
        self.finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)

    def send(self) -> None:
        assert self._transport is not None
        self._sent_ns = time.perf_counter_ns()
        self._transport.write(self._load.request)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._fail(error)

    # httptools callback: the response is complete.
    def on_message_complete(self) -> None:
        done_ns = time.perf_counter_ns()
        self._load.completed += 1
        if self._load.counts(done_ns):
            if self._parser.get_status_code() == 200:
                self._load.latencies_ns.append(done_ns - self._sent_ns)
            else:
                self._load.errors += 1
        if self._load.more():
            self.send()
        elif not self.finished.done():
            self.finished.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionError("the server closed the connection"))

    def _fail(self, error: Exception) -> None:
        if not self.finished.done():
            self.finished.set_exception(error)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


# Bounds on every run: a count far above what any peer serves in a run, and how long the requests
# in flight at the deadline may take before the server counts as hung.
MAX_REQUESTS = 200_000
GRACE_SECONDS = 30.0


async def run_load(
    host: str,
    port: int,
    request: bytes,
    *,
    connections: int,
    seconds: float,
    max_requests: int = MAX_REQUESTS,
) -> LoadResult:
    """Keep `connections` requests in flight for `seconds` (or `max_requests` in all), and at
    least until each connection has had one answer (a short run on a slow server still has a
    rate, rather than none)."""
    loop = asyncio.get_running_loop()
    load = _Load(request, 0, max_requests, min_requests=connections)
    opened = [
        (await loop.create_connection(lambda: _Connection(load), host, port))[1]
        for _ in range(connections)
    ]
    started_ns = time.perf_counter_ns()
    load.deadline_ns = started_ns + int(seconds * 1e9)
    try:
        for connection in opened:
            connection.send()
        await asyncio.wait_for(
            asyncio.gather(*(connection.finished for connection in opened)),
            seconds + GRACE_SECONDS,
        )
    finally:
        for connection in opened:
            connection.close()
    ended_ns = min(time.perf_counter_ns(), load.deadline_ns)
    return LoadResult(
        requests=len(load.latencies_ns),
        errors=load.errors,
        seconds=(ended_ns - started_ns) / 1e9,
        completed=load.completed,
        latencies_ns=load.latencies_ns,
    )


def percentile(values: list[int], fraction: float) -> float:
    """The nearest-rank percentile of `values` (0 < fraction <= 1)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(fraction * len(ordered) + 0.5) - 1))
    return float(ordered[rank])
