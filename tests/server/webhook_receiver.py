"""A webhook receiver on loopback, as another service would run one: it verifies each delivery's
signature with the Standard Webhooks library, and can answer 500 to each event's first attempt,
be slow, or be down for a while. It records what arrived, and whether one event was ever in
flight twice at once."""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from standardwebhooks import Webhook, WebhookVerificationError

from harness.processes import HOST, free_port


@dataclass
class Path:
    """What one endpoint's path does and saw."""

    secret: str | None = None
    fail_first: bool = False
    # Every attempt answered 500 (a broken receiver), or those of these users' payments (a
    # poison event among healthy ones).
    fail_all: bool = False
    fail_users: set[str] = field(default_factory=set)
    delay: float = 0.0
    attempts: collections.Counter[str] = field(default_factory=collections.Counter)
    delivered: dict[str, dict[str, Any]] = field(default_factory=dict)
    unverified: int = 0
    in_flight: collections.Counter[str] = field(default_factory=collections.Counter)
    overlaps: list[str] = field(default_factory=list)
    started: list[str] = field(default_factory=list)


class Receiver:
    def __init__(self) -> None:
        self.port = free_port()
        self.paths: dict[str, Path] = {}
        self._runner: web.AppRunner | None = None

    def url(self, path: str) -> str:
        self.paths.setdefault(path, Path())
        return f"http://{HOST}:{self.port}/{path}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{path}", self._receive)
        # A handler still sleeping (a slow path) is not waited for at the end: aiohttp waits 60 s.
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, HOST, self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _receive(self, request: web.Request) -> web.Response:
        path = self.paths[request.match_info["path"]]
        body = await request.read()
        msg_id = request.headers["webhook-id"]
        path.started.append(msg_id)
        path.attempts[msg_id] += 1
        path.in_flight[msg_id] += 1
        if path.in_flight[msg_id] > 1:
            path.overlaps.append(msg_id)
        try:
            if path.delay:
                await asyncio.sleep(path.delay)
            assert path.secret is not None, "a delivery before its endpoint's secret was known"
            try:
                payload = Webhook(path.secret).verify(body, dict(request.headers))
            except WebhookVerificationError:
                path.unverified += 1
                return web.Response(status=400, text="bad signature")
            if path.fail_first and path.attempts[msg_id] == 1:
                return web.Response(status=500, text="try again")
            payment = payload["data"].get("payment") or {}
            if path.fail_all or payment.get("userId") in path.fail_users:
                return web.Response(status=500, text="broken")
            path.delivered.setdefault(msg_id, payload)
            return web.Response(status=204)
        finally:
            path.in_flight[msg_id] -= 1
