"""Reaching a receiver (SPEC §18): in prod a name is checked when it is resolved, at each
connection (a DNS answer turned to an internal address is refused, whatever it was at
registration); no redirect is followed; a few KB of the answer are kept; a receiver that does not
answer in time is a timeout."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from harness.processes import HOST, free_port
from server.webhook_worker.delivery import KEPT_ANSWER_BYTES, GuardedResolver, Receivers


class FixedResolver(AbstractResolver):
    """A DNS that answers each name with the addresses the test sets, in turn."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked = 0

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        address = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        return [
            ResolveResult(hostname=host, host=address, port=port, family=family, proto=0, flags=0)
        ]

    async def close(self) -> None:
        pass


@pytest.fixture
async def target() -> AsyncIterator[tuple[int, list[str]]]:
    """A loopback server: `/ok` 200, `/moved` 302 to `/ok`, `/big` 100 KB, `/slow` only once
    the test is over."""
    port, hits = free_port(), []
    over = asyncio.Event()

    async def answer(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        hits.append(name)
        if name == "moved":
            raise web.HTTPFound("/ok")
        if name == "big":
            return web.Response(text="x" * 100_000)
        if name == "slow":
            await over.wait()
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/{name}", answer)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, HOST, port).start()
    yield port, hits
    over.set()
    await runner.cleanup()


async def test_a_name_that_resolves_to_loopback_is_refused_when_connecting(
    target: tuple[int, list[str]],
) -> None:
    port, hits = target
    # Public at registration, loopback now: a DNS rebinding.
    dns = FixedResolver("127.0.0.1")
    receivers = Receivers(public_only=True, timeout=2, dns=dns)
    try:
        answer = await receivers.post(
            f"https://hooks.example.com:{port}/ok", body=b"{}", headers={}
        )
    finally:
        await receivers.close()
    assert answer.status_code is None
    assert answer.error is not None and "loopback" in answer.error, answer
    assert dns.asked == 1, "resolved at the connection"
    assert hits == []


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("10.0.0.7", "private"),
        ("169.254.169.254", "metadata"),
        ("fe80::1", "link-local"),
        ("::1", "loopback"),
        # IPv6 addresses that reach an IPv4 one: NAT64, 6to4, IPv4-compatible, IPv4-mapped.
        ("64:ff9b::a00:7", "private"),
        ("64:ff9b:1::a00:7", "NAT64"),
        ("2002:7f00:1::", "loopback"),
        ("::a9fe:a9fe", "metadata"),
        ("::ffff:127.0.0.1", "loopback"),
    ],
)
async def test_the_guard_refuses_every_internal_answer(address: str, reason: str) -> None:
    guard = GuardedResolver(FixedResolver(address))
    with pytest.raises(OSError, match=reason):
        await guard.resolve("hooks.example.com", 443)


@pytest.mark.parametrize(
    ("address", "kind", "hidden"),
    [
        ("10.1.2.3", "a private address", ["10.1.2.3"]),
        ("127.0.0.1", "a loopback address", ["127.0.0.1"]),
        ("169.254.169.254", "the instance metadata address", ["169.254.169.254"]),
        ("fe80::1", "a link-local address", ["fe80::1"]),
        ("64:ff9b::a00:7", "a private address", ["64:ff9b::a00:7", "10.0.0.7"]),
        ("::ffff:10.9.8.7", "a private address", ["::ffff:a09:807", "10.9.8.7"]),
    ],
)
async def test_a_refused_attempt_names_the_kind_of_address_never_the_address(
    address: str, kind: str, hidden: list[str]
) -> None:
    # A name resolved at delivery (and an address written in the URL): the attempt's error, the
    # disabled reason and the operational event are read by whoever registered the endpoint.
    receivers = Receivers(public_only=True, timeout=2, dns=FixedResolver(address))
    host = f"[{address}]" if ":" in address else address
    try:
        resolved = await receivers.post("https://hooks.example.com/ok", body=b"{}", headers={})
        written = await receivers.post(f"https://{host}/ok", body=b"{}", headers={})
    finally:
        await receivers.close()
    for answer in (resolved, written):
        assert answer.error is not None and kind in answer.error, answer
        assert not [shown for shown in hidden if shown in answer.error], answer.error


async def test_a_public_answer_passes_the_guard() -> None:
    guard = GuardedResolver(FixedResolver("93.184.215.14"))
    [result] = await guard.resolve("hooks.example.com", 443)
    assert result["host"] == "93.184.215.14"


async def test_prod_refuses_an_internal_address_or_http_before_connecting(
    target: tuple[int, list[str]],
) -> None:
    port, hits = target
    receivers = Receivers(public_only=True, timeout=2)
    try:
        for url in (f"https://127.0.0.1:{port}/ok", f"http://hooks.example.com:{port}/ok"):
            answer = await receivers.post(url, body=b"{}", headers={})
            assert answer.error is not None and answer.error.startswith("refused"), answer
    finally:
        await receivers.close()
    assert hits == []


@pytest.mark.parametrize(
    "host",
    [
        "2130706433",
        "0x7f.1",
        "127.0.0.1.",
        # Fullwidth digits: the HTTP client maps them to 127.0.0.1 and connects without resolving.
        "".join(chr(ord(character) + 0xFEE0) for character in "127.0.0.1"),
        "[64:ff9b::7f00:1]",
        "[::7f00:1]",
    ],
)
async def test_an_internal_address_in_any_spelling_is_refused_before_connecting(
    target: tuple[int, list[str]], host: str
) -> None:
    port, hits = target
    dns = FixedResolver("127.0.0.1")
    receivers = Receivers(public_only=True, timeout=2, dns=dns)
    try:
        answer = await receivers.post(f"https://{host}:{port}/ok", body=b"{}", headers={})
    finally:
        await receivers.close()
    assert answer.error is not None and answer.error.startswith("refused"), answer
    assert dns.asked == 0, "judged as an address, not resolved"
    assert hits == []


async def test_no_redirect_is_followed_and_only_the_start_of_an_answer_is_kept(
    target: tuple[int, list[str]],
) -> None:
    port, hits = target
    receivers = Receivers(public_only=False, timeout=2)
    try:
        moved = await receivers.post(f"http://{HOST}:{port}/moved", body=b"{}", headers={})
        big = await receivers.post(f"http://{HOST}:{port}/big", body=b"{}", headers={})
        slow = await receivers.post(f"http://{HOST}:{port}/slow", body=b"{}", headers={})
    finally:
        await receivers.close()
    assert moved.status_code == 302
    assert hits[:1] == ["moved"] and "ok" not in hits, "the redirect was not followed"
    assert big.status_code == 200
    assert big.body is not None and len(big.body) == KEPT_ANSWER_BYTES
    assert slow.status_code is None
    assert slow.error is not None and slow.error.startswith("timeout"), slow
    assert 1900 <= slow.duration_ms < 4500
