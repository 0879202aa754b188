"""`/graphql` over WebSocket: Strawberry's protocol handlers, with what the protocol documents
and SPEC §7 ask beyond them.

graphql-transport-ws closes a socket with (Strawberry's handler, unless marked ours):

    4400  a malformed message: not a JSON object with a string `type`, a `subscribe` or
          `complete` without a string `id`, a `subscribe` payload without a string `query` or
          with a field of the wrong type (ours: checked before Strawberry reads the message,
          which failed on them with a TypeError), a `connection_init` payload not an object
    4401  `subscribe` before `connection_ack`
    4403  `connection_init` without a token the HTTP endpoint would accept; and (ours) the
          token expiring: at its `exp` the socket closes, its operations ended first
    4406  no subprotocol the server speaks
    4408  no `connection_init` within the wait
    4409  a `subscribe` with the id of an operation still running
    4429  a second `connection_init`

The legacy `graphql-ws` protocol closes at the token's `exp` the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    ConnectionInitMessage,
    Message,
)
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler
from strawberry.subscriptions.protocols.graphql_ws.types import (
    ConnectionInitMessage as LegacyConnectionInitMessage,
)

from resolvers.context import Context
from server.graphql_over_http import Refused, envelope

TOKEN_EXPIRED_CODE = 4403
TOKEN_EXPIRED_REASON = "token expired: reconnect with a fresh token"


class TokenLifetimes(Protocol):
    """What the view tells a handler: the seconds an acknowledged connection's token has left."""

    def token_lifetime(self, context: Context) -> float: ...


class _TokenWatch:
    """Ends a connection when its token expires."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._expiring = False

    def start(self, seconds: float, expire: Callable[[], Awaitable[None]]) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._expire_after(seconds, expire))

    async def stop(self) -> None:
        """Called as the connection ends; an expiry under way finishes (its close is sent)."""
        task = self._task
        if task is None or task is asyncio.current_task():
            return
        if not self._expiring:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _expire_after(self, seconds: float, expire: Callable[[], Awaitable[None]]) -> None:
        await asyncio.sleep(max(seconds, 0.0))
        self._expiring = True
        await expire()


class TransportWSHandler(BaseGraphQLTransportWSHandler[Context, None]):
    """graphql-transport-ws, every message checked against the protocol document first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._token_watch = _TokenWatch()

    async def handle_message(self, message: Message) -> None:
        problem = malformed(message)
        if problem is not None:
            await self.handle_invalid_message(problem)
            return
        await super().handle_message(message)

    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        if message.get("payload", {}) is None:  # the protocol allows null for no payload
            message = {"type": "connection_init"}
        acknowledged = self.connection_acknowledged
        await super().handle_connection_init(message)
        if self.connection_acknowledged and not acknowledged:
            view: TokenLifetimes = self.view  # type: ignore[assignment]
            self._token_watch.start(view.token_lifetime(self.context), self._expire)

    async def _expire(self) -> None:
        for operation_id in list(self.operations):
            await self.cleanup_operation(operation_id)
        await self.websocket.close(TOKEN_EXPIRED_CODE, TOKEN_EXPIRED_REASON)

    async def shutdown(self) -> None:
        await self._token_watch.stop()
        await super().shutdown()


class LegacyWSHandler(BaseGraphQLWSHandler[Context, None]):
    """The older `graphql-ws` protocol, closed at the token's `exp` as well."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._token_watch = _TokenWatch()

    async def handle_connection_init(self, message: LegacyConnectionInitMessage) -> None:
        acknowledged = self.connection_acknowledged
        await super().handle_connection_init(message)
        if self.connection_acknowledged and not acknowledged:
            view: TokenLifetimes = self.view  # type: ignore[assignment]
            self._token_watch.start(view.token_lifetime(self.context), self._expire)

    async def _expire(self) -> None:
        await self.cleanup()
        await self.websocket.close(TOKEN_EXPIRED_CODE, TOKEN_EXPIRED_REASON)

    async def cleanup(self) -> None:
        await self._token_watch.stop()
        await super().cleanup()


def malformed(message: object) -> str | None:
    """Why a graphql-transport-ws message breaks the protocol document, or None."""
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        return "Failed to parse message"
    kind = message["type"]
    if kind in ("subscribe", "complete") and not isinstance(message.get("id"), str):
        return f"A {kind} message needs a string id"
    if kind == "subscribe":
        payload = message.get("payload")
        if not isinstance(payload, dict) or not isinstance(payload.get("query"), str):
            return "A subscribe message needs a payload with a string query"
        try:
            envelope(payload)
        except Refused as refused:
            return refused.message
    return None
