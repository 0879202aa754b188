"""The load generator's accounting: what counts in a run, and that a short run still has a rate."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator

import pytest

from bench.loadgen import http_request, run_load

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class _SlowServer(asyncio.Protocol):
    """Answers every request after `delay` seconds."""

    delay = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        assert isinstance(self._transport, asyncio.Transport)
        asyncio.get_running_loop().call_later(self.delay, self._transport.write, RESPONSE)


async def _serve(delay: float) -> AsyncIterator[int]:
    protocol = type("Server", (_SlowServer,), {"delay": delay})
    server = await asyncio.get_running_loop().create_server(protocol, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


@pytest.fixture
async def slow_port() -> AsyncIterator[int]:
    async for port in _serve(0.2):
        yield port


@pytest.fixture
async def fast_port() -> AsyncIterator[int]:
    async for port in _serve(0.01):
        yield port


async def test_a_run_shorter_than_one_answer_lasts_until_each_connection_has_one(
    slow_port: int,
) -> None:
    request = http_request("127.0.0.1", slow_port, "/", b"{}", {})
    result = await run_load("127.0.0.1", slow_port, request, connections=4, seconds=0.02)
    assert result.requests == 4
    assert result.errors == 0
    assert 0.2 <= result.seconds < 1.0
    assert not math.isnan(result.rate) and result.rate > 0


async def test_answers_after_the_deadline_do_not_count(fast_port: int) -> None:
    request = http_request("127.0.0.1", fast_port, "/", b"{}", {})
    result = await run_load("127.0.0.1", fast_port, request, connections=2, seconds=0.3)
    # Two connections, 10 ms an answer, for 0.3 s: about 60 answers, none timed past the end.
    assert 20 <= result.requests <= 62
    assert result.completed >= result.requests
    assert result.seconds == pytest.approx(0.3, abs=0.01)
