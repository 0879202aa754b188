"""`/graphql` over WebSocket: Strawberry's protocol handlers, with what the protocol documents
and SPEC §7 ask beyond them.

`TransportWSHandler` (graphql-transport-ws) closes a socket with the protocol's codes (4400 a
malformed message, 4401, 4403, 4406, 4408, 4409, 4429); beyond Strawberry's handler it checks
each message's shape before Strawberry reads it (`malformed`: 4400, where Strawberry failed with
a TypeError) and closes the socket with 4403 at the token's expiry, its operations ended first.
A `subscribe` naming a document the policy refuses is answered with an `error` message carrying
its code, the socket left open; an answer in parts is one `next` a part, then `complete`.
`LegacyWSHandler` (graphql-ws) does the same at the token's expiry and names documents the
same way.

Every close code and when: docs/protocols.md#http-and-websocket.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from strawberry.schema.schema import StreamResult
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    ConnectionInitMessage,
    Message,
    SubscribeMessage,
)
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler
from strawberry.subscriptions.protocols.graphql_ws.types import (
    ConnectionInitMessage as LegacyConnectionInitMessage,
)
from strawberry.subscriptions.protocols.graphql_ws.types import StartMessage
from strawberry.types.execution import ExecutionResult, PreExecutionError

from engine import DocumentRefused, MalformedDocumentRequest, Part
from resolvers.context import Context
from server.errors import Refused
from server.graphql_over_http import envelope

__all__ = ["LegacyWSHandler", "TransportWSHandler"]

TOKEN_EXPIRED_CODE = 4403
TOKEN_EXPIRED_REASON = "token expired: reconnect with a fresh token"


class SocketView(Protocol):
    """What the view tells a handler: the seconds an acknowledged connection's token has left,
    and the text a `subscribe` payload runs (`engine.document_policy`: its own, or a trusted
    document it names), or why it may not run."""

    def token_lifetime(self, context: Context) -> float: ...

    def document_text(self, payload: Mapping[str, object], context: Context) -> str | None: ...


async def _with_document(
    handler: BaseGraphQLTransportWSHandler[Context, None] | BaseGraphQLWSHandler[Context, None],
    operation_id: str,
    payload: dict[str, Any],
) -> dict[str, Any] | None:
    """The payload with the text it runs as its `query`; None once refused (an `error`
    message sent for the operation, or the socket closed 4400 for a malformed id)."""
    view: SocketView = handler.view  # type: ignore[assignment]
    try:
        text = view.document_text(payload, handler.context)
    except DocumentRefused as refused:
        error = {"message": refused.message, "extensions": {"code": refused.code}}
        legacy = isinstance(handler, BaseGraphQLWSHandler)
        message: Any = {
            "type": "error",
            "id": operation_id,
            "payload": error if legacy else [error],
        }
        await handler.send_message(message)
        return None
    except (MalformedDocumentRequest, Refused) as malformed:
        if isinstance(handler, BaseGraphQLTransportWSHandler):
            await handler.handle_invalid_message(str(malformed))
        else:
            await handler.websocket.close(4400, str(malformed))
        return None
    return {**payload, "query": text}


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
            view: SocketView = self.view  # type: ignore[assignment]
            self._token_watch.start(view.token_lifetime(self.context), self._expire)

    async def handle_subscribe(self, message: SubscribeMessage) -> None:
        # Refusals of the protocol's own (4401, 4409) come first, from Strawberry's handler.
        if self.connection_acknowledged and message["id"] not in self.operations:
            payload = await _with_document(self, message["id"], dict(message["payload"]))
            if payload is None:
                return
            message = {**message, "payload": payload}  # type: ignore[typeddict-item]
        await super().handle_subscribe(message)

    async def _send_result_stream(
        self, operation: Operation[Context, None], result_source: StreamResult
    ) -> None:
        """Strawberry's, with each part of an answer in parts (`@defer`, `@stream`) its own
        `next`, its payload as the engine made it (graphql-js 17's format)."""
        first = True
        async for result in result_source:
            if first and isinstance(result, PreExecutionError):
                await self._handle_pre_execution_error(operation, result)
                return
            if isinstance(result, Part):
                message: Any = {"id": operation.id, "type": "next", "payload": result.payload}
                await operation.send_operation_message(message)
            elif isinstance(result, ExecutionResult):
                await operation.send_next(result)
            else:  # graphql-core's parts: the engine never gives them
                raise TypeError(f"not an answer: {result!r}")
            first = False

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
            view: SocketView = self.view  # type: ignore[assignment]
            self._token_watch.start(view.token_lifetime(self.context), self._expire)

    async def handle_start(self, message: StartMessage) -> None:
        if self.connection_acknowledged:
            sent: Any = message.get("payload")
            if not isinstance(sent, dict):
                await self.websocket.close(4400, "A start message needs a payload object")
                return
            payload = await _with_document(self, message["id"], sent)
            if payload is None:
                return
            message = {**message, "payload": payload}  # type: ignore[typeddict-item]
        await super().handle_start(message)

    async def _expire(self) -> None:
        await self.cleanup()
        await self.websocket.close(TOKEN_EXPIRED_CODE, TOKEN_EXPIRED_REASON)

    async def cleanup(self) -> None:
        await self._token_watch.stop()
        await super().cleanup()


def names_document(payload: dict[str, Any]) -> bool:
    """Whether a payload names a trusted or persisted document instead of sending text."""
    extensions = payload.get("extensions")
    return (
        payload.get("documentId") is not None
        or payload.get("doc_id") is not None
        or (isinstance(extensions, dict) and extensions.get("persistedQuery") is not None)
    )


def malformed(message: object) -> str | None:
    """Why a graphql-transport-ws message breaks the protocol document, or None."""
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        return "Failed to parse message"
    kind = message["type"]
    if kind in ("subscribe", "complete") and not isinstance(message.get("id"), str):
        return f"A {kind} message needs a string id"
    if kind == "subscribe":
        payload = message.get("payload")
        if not isinstance(payload, dict) or not (
            isinstance(payload.get("query"), str) or names_document(payload)
        ):
            return "A subscribe message needs a payload with a string query or a document id"
        try:
            envelope(payload)
        except Refused as refused:
            return refused.message
    return None
