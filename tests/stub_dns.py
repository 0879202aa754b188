"""A DNS for the tests of webhook receivers (this machine resolves no public name): each name
answers the addresses the test gives it, a name it does not hold does not resolve, and one that
hangs never answers. It is aiohttp's resolver interface, which the service resolves receivers'
names through (`create_app(webhook_dns=...)`, `Receivers(dns=...)`)."""

from __future__ import annotations

import asyncio
import socket

from aiohttp.abc import AbstractResolver, ResolveResult

__all__ = ["StubDns"]


class StubDns(AbstractResolver):
    def __init__(self, names: dict[str, list[str]] | None = None, *, hangs: bool = False) -> None:
        self.names = dict(names or {})
        self.hangs = hangs
        self.asked: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked.append(host)
        if self.hangs:
            await asyncio.Event().wait()
        if host not in self.names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=0,
            )
            for address in self.names[host]
        ]

    async def close(self) -> None:
        pass
