"""The load generator's accounting (wrk): the rate, the errors, the percentiles, wrk's own CPU,
and that a run too short for an answer still gets one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bench.load import check_served, run_load


def _server(delay: float, status: bytes) -> type[asyncio.Protocol]:
    answer = b"HTTP/1.1 " + status + b"\r\nContent-Length: 2\r\n\r\nok"

    class Server(asyncio.Protocol):
        """Answers every request after `delay` seconds (one request a packet: wrk waits)."""

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            asyncio.get_running_loop().call_later(delay, self.transport.write, answer)

    return Server


async def _serve(delay: float, status: bytes = b"200 OK") -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_server(delay, status), "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/graphql"


@pytest.fixture
async def fast() -> AsyncIterator[str]:
    async for url in _serve(0.01):
        yield url


async def test_a_run_counts_its_answers_their_latency_and_wrks_cpu(fast: str) -> None:
    load = await run_load(fast, b'{"query": "{ x }"}', {"X-A": "1"}, connections=2, seconds=0.5)
    # Two connections, 10 ms an answer, for half a second: about 100 answers, and never more
    # than one per connection per 10 ms of the time wrk ran.
    assert 40 <= load.requests <= 2 * load.seconds / 0.010 + 2
    assert load.errors == 0
    assert load.seconds == pytest.approx(0.5, abs=0.2)
    assert 10 <= load.p50_ms <= load.p99_ms < 200
    assert 0 < load.core_share < 1
    assert load.rate == pytest.approx(load.requests / load.seconds)


async def test_answers_that_are_not_2xx_are_errors() -> None:
    async for url in _serve(0.0, b"500 Internal Server Error"):
        load = await run_load(url, b"{}", {}, connections=1, seconds=0.3)
        assert load.requests > 0
        assert load.errors == load.requests


async def test_a_run_shorter_than_one_answer_is_made_again_longer() -> None:
    async for url in _serve(0.4):
        load = await run_load(url, b"{}", {}, connections=1, seconds=0.1)
        assert load.requests >= 1
        assert load.seconds >= 0.4


async def test_a_run_answered_429_throttled_stops_the_bench() -> None:
    """A 429 (the service's THROTTLED, SPEC §21) is not a request served: a run that met one
    measured the budget, not the service, and the bench stops rather than report it."""
    async for url in _serve(0.0, b"429 Too Many Requests"):
        load = await run_load(url, b"{}", {}, connections=1, seconds=0.3)
        assert load.errors == load.requests > 0
        with pytest.raises(RuntimeError, match=r"THROTTLED.*LOC_BUDGET_OVERRIDES=bench-service="):
            check_served(load, "P3, loan_page on 16 connections")


async def test_a_graphql_answer_with_errors_is_not_a_request_served() -> None:
    """A GraphQL error comes in a 200 (a deadline past, the breaker open): counted as served, a
    server failing fast would read as a fast one. Runs against a GraphQL server look for
    `"errors"` in each answer's body."""
    loop = asyncio.get_running_loop()
    body = b'{"errors": [{"message": "DynamoDB did not answer in time"}], "data": null}'
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    class Failing(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            self.transport.write(answer)

    server = await loop.create_server(Failing, "127.0.0.1", 0)
    async with server:
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/graphql"
        load = await run_load(url, b"{}", {}, connections=1, seconds=0.3, graphql=True)
        assert load.errors == load.requests > 0
        # Over raw HTTP (DynamoDB's answers), only the status counts.
        raw = await run_load(url, b"{}", {}, connections=1, seconds=0.3)
        assert raw.errors == 0 and raw.requests > 0
