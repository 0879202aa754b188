"""The npm graphql-ws client as an app runs it (`tools/trusted-documents/live-updates.mjs`, pinned
by that folder's lock file): it reconnects after any close and resubscribes, a payment's
subscription after the last version it got. What it printed, one JSON object a line, is gathered in
the background; for the tests of what a client sees across a 4413 close (SPEC §17)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.api.conftest import SERVICE
from tests.api.live_instances import Instance

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "trusted-documents" / "live-updates.mjs"
WAIT = 20.0  # seconds an expected line may take, at most


@dataclass
class LiveClient:
    process: asyncio.subprocess.Process
    instance: Instance
    # The instance's live subscriptions once this client's are taken up (its own, and those it
    # had before this client started).
    live: int
    lines: list[dict[str, Any]] = field(default_factory=list)

    @property
    def connections(self) -> int:
        return sum(1 for line in self.lines if "connected" in line)

    @property
    def closes(self) -> list[tuple[int, str]]:
        return [(line["closed"], line["reason"]) for line in self.lines if "closed" in line]

    @property
    def completed(self) -> list[str]:
        """The subscriptions the server completed: graphql-ws gave them up."""
        return [line["name"] for line in self.lines if line.get("complete")]

    def versions(self, name: str) -> list[int]:
        return [
            line["version"] for line in self.lines if line.get("name") == name and "version" in line
        ]

    async def wait(self, done: Callable[[], bool], what: str) -> None:
        """Until `done()`; fails at once when a subscription ended (completed or failed), as no
        more will come to it."""
        deadline = time.monotonic() + WAIT
        while not done():
            ended = [line for line in self.lines if "complete" in line or "error" in line]
            assert not ended, f"{what}: a subscription ended: {ended}; {self.lines}"
            assert self.process.returncode is None, f"{what}: the client exited; {self.lines}"
            assert time.monotonic() < deadline, f"{what}; {self.lines}"
            await asyncio.sleep(0.02)

    async def wait_for_versions(self, name: str, versions: set[int]) -> None:
        await self.wait(
            lambda: versions <= set(self.versions(name)), f"{name}: waiting for {sorted(versions)}"
        )

    @property
    def connected(self) -> bool:
        """Whether a connection was acknowledged since the socket last closed."""
        return self.connections > len(self.closes)

    async def wait_subscribed(self) -> None:
        """Until a connection is acknowledged and the instance has taken up the subscriptions
        sent on it (graphql-transport-ws acknowledges none: its metrics count them)."""
        await self.wait(lambda: self.connected, "a connection")
        await self.instance.until_subscriptions("live", lambda count: count >= self.live)

    async def wait_resubscribed(self, closes: int) -> None:
        """Until the socket closed more than `closes` times, a connection was acknowledged since
        the last close, and the subscriptions sent again on it were taken up."""
        await self.wait(
            lambda: len(self.closes) > closes and self.connected, f"a reconnection after {closes}"
        )
        await self.wait_subscribed()


async def _gather(process: asyncio.subprocess.Process, client: LiveClient) -> None:
    assert process.stdout is not None
    async for line in process.stdout:
        client.lines.append(json.loads(line))


@contextlib.asynccontextmanager
async def live_client(
    instance: Instance, bearer: str = SERVICE, **subscriptions: dict[str, Any]
) -> AsyncIterator[LiveClient]:
    """graphql-ws subscribed on `instance` to `paymentEvents` once for each named variables
    (`userId`, `loanId`, `paymentId`, `afterVersion`), once its subscriptions are taken up."""
    node = shutil.which("node")
    assert node is not None, "the graphql-ws client runs under Node (installed with npm)"
    options = [f"--subscribe={name}={json.dumps(v)}" for name, v in subscriptions.items()]
    live = await instance.subscriptions("live")
    process = await asyncio.create_subprocess_exec(
        node,
        str(SCRIPT),
        f"--url={instance.ws_url}",
        f"--token={bearer}",
        *options,
        cwd=SCRIPT.parent,
        stdout=asyncio.subprocess.PIPE,
    )
    client = LiveClient(process, instance, live + len(subscriptions))
    gathering = asyncio.create_task(_gather(process, client))
    try:
        await client.wait_subscribed()
        yield client
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()
        await gathering
