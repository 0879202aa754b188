"""`/graphql` over HTTP and WebSocket, with a fresh context for every request (and every
operation of a WebSocket connection, `PaymentsSchema.stream`).

Every HTTP request is answered here, as the GraphQL-over-HTTP specification says
(`server.graphql_over_http`): a JSON POST, a GET query outside `prod`, and GraphiQL's page for a
browser's GET without a query; an answer in parts (`@defer`, `@stream`) as `multipart/mixed` to a
client whose `Accept` asks for it (`server.multipart`), else as one body. Strawberry's view
serves the WebSockets only (`server.websocket_protocol`), where the caller's token comes in
`connection_init`'s payload: a missing or refused one closes the socket with 4403 before any
operation runs, as its expiry does later. With tracing on, each operation continues the
caller's trace, and an HTTP answer names its span (`traceresponse`, `process.tracing`).

Every answer's status, and every close code: docs/protocols.md#http-and-websocket.
"""

from __future__ import annotations

import contextlib
import functools
import re
import secrets
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect
from strawberry.asgi import ASGIWebSocketAdapter, GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType
from strawberry.types.unset import UNSET, UnsetType

from datasource import PaymentStore
from domain.webhooks import EventsPolicy
from engine import (
    DOCUMENT_NOT_TRUSTED,
    PERSISTED_QUERY_NOT_FOUND,
    DocumentRefused,
    Documents,
    MissingQuery,
    NoSuchOperation,
    OperationTypeNotAllowed,
    Parts,
    RequestError,
)
from process.tracing import TRACE_RESPONSE_HEADER, connection_trace, incoming_trace, trace_response
from resolvers.callers import Caller
from resolvers.context import Context
from resolvers.errors import CallerError, Forbidden, Unauthenticated
from schema import PaymentsSchema
from server.auth import AuthConfig, authenticate, token_expiry
from server.errors import Refused, Throttled
from server.graphiql import GraphiQLPage
from server.graphql_over_http import (
    Envelope,
    answer,
    envelope,
    get_envelope,
    negotiate,
    post_envelope,
    refused_answer,
)
from server.multipart import PartsFormat, multipart_answer, parts_format
from server.websocket_protocol import LegacyWSHandler, TransportWSHandler

__all__ = ["PaymentsGraphQL"]

DEBUG_DYNAMODB_HEADER = "x-debug-dynamodb"
REQUEST_ID_HEADER = "x-request-id"
CLIENT_NAME_HEADER = "apollographql-client-name"
CLIENT_VERSION_HEADER = "apollographql-client-version"
CLIENT_LABEL_LENGTH = 64
# The client's own `Authorization`, as the federation gateway forwards it to `/subgraph` beside
# its own token (Google's ESPv2 names the header so when it replaces a client's token).
FORWARDED_AUTHORIZATION_HEADER = "x-forwarded-authorization"
_POST_OPERATIONS = frozenset({OperationType.QUERY, OperationType.MUTATION})
_GET_OPERATIONS = frozenset({OperationType.QUERY})
# A caller's request id is kept when it is a plain token; anything else gets a fresh one, so
# no header can write arbitrary text into the logs.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# Starlette's words for a body over the limit.
TOO_LARGE = "Content Too Large"


class TextFrames(ASGIWebSocketAdapter):
    """graphql-transport-ws speaks in text frames; `encode_json` gives bytes (orjson)."""

    async def send_json(self, message: Mapping[str, object]) -> None:
        try:
            await self.ws.send_text(orjson.dumps(message).decode())
        except WebSocketDisconnect as closed:
            raise WebSocketDisconnected from closed


class PaymentsGraphQL(GraphQL[Context, None]):
    websocket_adapter_class = TextFrames
    graphql_transport_ws_handler_class = TransportWSHandler
    graphql_ws_handler_class = LegacyWSHandler

    def __init__(
        self,
        schema: PaymentsSchema,
        *,
        auth: AuthConfig,
        token_clock: Callable[[], float],
        max_attempts: int,
        clock: Callable[[], datetime],
        accounting_allowed: bool,
        graphiql: GraphiQLPage | None,
        documents: Documents,
        text_via_get: bool,
        max_body_bytes: int,
        max_subscriptions_per_connection: int,
        keep_alive_interval: float,
        # A socket that sends no `connection_init` within this is closed (4408).
        connection_init_wait: timedelta,
        strong_reads: bool,
        events: EventsPolicy,
    ) -> None:
        """Every value from the settings (`server.app`), whose defaults are the only ones."""
        # Only JSON bodies are operations (no multipart, no forms, no text/plain), so a
        # cross-site form cannot post one; mutations never run over GET.
        super().__init__(
            schema,
            graphql_ide="graphiql" if graphiql is not None else None,
            allow_queries_via_get=True,
            multipart_uploads_enabled=False,
            keep_alive=True,
            keep_alive_interval=keep_alive_interval,
            connection_init_wait_timeout=connection_init_wait,
            max_subscriptions_per_connection=max_subscriptions_per_connection,
        )
        self._auth = auth
        # Seconds since the epoch, as tokens carry them; `clock` is the payments' own time.
        self._token_clock = token_clock
        self._max_attempts = max_attempts
        self._clock = clock
        self._accounting_allowed = accounting_allowed
        self._graphiql = graphiql
        self._max_body_bytes = max_body_bytes
        self._strong_reads = strong_reads
        self._documents = documents
        self._text_via_get = text_via_get
        self._events = events
        self._subgraph = schema.subgraph
        self._payments = schema

    async def render_graphql_ide(self, request: Request) -> Response:
        # Only reached when GraphiQL is on (`graphql_ide`).
        assert self._graphiql is not None
        return self._graphiql.page()

    async def run(  # type: ignore[override]
        self,
        request: Request | WebSocket,
        context: Context = UNSET,
        root_value: None = UNSET,
    ) -> Response | WebSocket:
        if isinstance(request, Request):
            return await self._answer_http(request)
        return await super().run(request, context, root_value)

    async def _answer_http(self, request: Request) -> Response:
        media_type = negotiate(request.headers.get("accept"))
        try:
            return await self._run_http(request, media_type)
        except Refused as refused:
            status, body = refused_answer(refused, media_type)
            return _response(status, body, media_type, refused.headers)

    async def _run_http(self, request: Request, media_type: str) -> Response:
        method = request.method
        if method == "POST":
            envelope = post_envelope(request.headers.get("content-type"), await self._body(request))
            allowed = _POST_OPERATIONS
        elif method == "GET":
            if self._graphiql is not None and _wants_graphiql(request):
                return self._graphiql.page()
            envelope = get_envelope(request.query_params)
            if envelope.query is not None and not self._text_via_get:
                raise Refused(
                    405, "GET takes a trusted document's id here; POST the text", allow="POST"
                )
            allowed = _GET_OPERATIONS
        else:
            raise Refused(405, "GraphQL only supports GET and POST requests.", allow="GET, POST")
        context = await self._context(request)
        headers = {REQUEST_ID_HEADER: context.request_id}
        in_parts = parts_format(request.headers.get("accept"))
        try:
            query = self._text(envelope, context)
            result = await self._execute(query, envelope, context, allowed, in_parts)
        except RequestError as error:
            raise _refused(error, method, headers) from error
        except Throttled as throttled:
            # Refused before it ran, whatever the media type: 429 (SPEC §21).
            raise Refused(
                429,
                throttled.error.message,
                headers={**headers, "retry-after": str(throttled.retry_after)},
                error=throttled.error.extensions,
                extensions=throttled.extensions,
            ) from throttled
        if context.span is not None:
            headers[TRACE_RESPONSE_HEADER] = trace_response(context.span)
        if isinstance(result, Parts):
            assert in_parts is not None  # asked for
            return multipart_answer(result, in_parts, headers)
        status, body = answer(result, media_type)
        return _response(status, body, media_type, headers)

    async def _execute(
        self,
        query: str | None,
        envelope: Envelope,
        context: Context,
        allowed: frozenset[OperationType],
        in_parts: PartsFormat | None,
    ) -> ExecutionResult | Parts:
        if in_parts is not None:
            return await self._payments.execute_in_parts(
                query,
                variable_values=envelope.variables,
                context_value=context,
                operation_name=envelope.operation_name,
                allowed_operation_types=allowed,
                operation_extensions=envelope.extensions,
            )
        return await self.schema.execute(
            query,
            variable_values=envelope.variables,
            context_value=context,
            operation_name=envelope.operation_name,
            allowed_operation_types=allowed,
            operation_extensions=envelope.extensions,
        )

    async def _body(self, request: Request) -> bytes:
        """The body, counted while it streams in: beyond `max_body_bytes`, 413."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max_body_bytes:
            raise Refused(413, TOO_LARGE)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self._max_body_bytes:
                raise Refused(413, TOO_LARGE)
            chunks.append(chunk)
        return b"".join(chunks)

    def encode_json(self, data: object) -> bytes:
        # orjson: several times faster than json.dumps on a page of payments.
        return orjson.dumps(data)

    def decode_json(self, data: str | bytes) -> object:
        # orjson's decode error is a json.JSONDecodeError: Strawberry still answers 400.
        return orjson.loads(data)

    async def on_ws_connect(self, context: Context) -> UnsetType | dict[str, object] | None:
        """Authenticate the connection from `connection_init`'s payload; refuse it without a
        token the HTTP endpoint would accept."""
        try:
            context.authenticated = await authenticate(
                _socket_authorization(context), self._auth, now=self._token_clock()
            )
        except CallerError as refusal:
            raise ConnectionRejectionError({"message": str(refusal)}) from None
        if context.tracer is not None:
            params = context.connection_params or {}
            context.trace_parent = connection_trace(params) or context.trace_parent
        acknowledged: UnsetType = UNSET  # `connection_ack` without a payload
        return acknowledged

    def document_text(self, payload: Mapping[str, object], context: Context) -> str | None:
        """The text a WebSocket operation runs (`server.websocket_protocol`)."""
        return self._text(envelope(payload), context)

    def _text(self, data: Envelope, context: Context) -> str | None:
        """The text the request runs (`engine.document_policy`). Text the policy refuses from a
        request without a valid token is refused for the token (UNAUTHENTICATED): a service
        whose token failed would otherwise read that it must name a trusted document. At
        `/subgraph` the gateway's credential proves the gateway, never a caller (SPEC §15): its
        request without a valid forwarded token is refused before the text is read."""
        caller = context.authenticated
        if context.from_gateway and isinstance(caller, CallerError):
            raise DocumentRefused(caller.code, str(caller))
        try:
            text = self._documents.text_for(
                query=data.query,
                document_id=data.document_id,
                doc_id=data.doc_id,
                extensions=data.extensions,
                is_service=context.caller_kind == "service",
                from_gateway=context.from_gateway,
            )
        except DocumentRefused as refused:
            if refused.code == DOCUMENT_NOT_TRUSTED and isinstance(caller, CallerError):
                raise DocumentRefused(caller.code, str(caller)) from refused
            raise
        if text is not None and text != data.query:
            # Named by id: the manifest it came from says which front end sent it, whatever
            # client the headers (which any caller writes) name.
            context.client = self._documents.trusted.manifest_of(text) or context.client
        return text

    def token_lifetime(self, context: Context) -> float:
        """The seconds left to the token of a connection `on_ws_connect` accepted."""
        authorization = _socket_authorization(context)
        assert authorization is not None  # accepted, so it had one
        return token_expiry(authorization, self._auth) - self._token_clock()

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> Context:
        return await self._context(request)

    async def _context(self, request: Request | WebSocket) -> Context:
        authenticated = await self._caller(request.headers.get("authorization"))
        from_gateway = False
        if self._subgraph and isinstance(request, Request):
            authenticated, from_gateway = await self._forwarded(authenticated, request.headers)
        request_id = request.headers.get(REQUEST_ID_HEADER, "")
        if not _REQUEST_ID.fullmatch(request_id):
            # Random, like a version 4 UUID's 122 bits (128 here), without building a UUID.
            request_id = secrets.token_hex(16)
        # Opened by the app's lifespan (`server.app.store_lifespan`).
        store: PaymentStore = request.app.state.store
        trace_parent = None if store.tracer is None else incoming_trace(request.headers)
        if isinstance(request, WebSocket):
            return Context(
                request_id=request_id,
                store=store,
                max_attempts=self._max_attempts,
                clock=self._clock,
                strong_reads=self._strong_reads,
                client=_client(request.headers),
                # Until `connection_init` brings a token (`on_ws_connect`).
                authenticated=authenticated,
                live=request.app.state.live.hub,
                close_connection=functools.partial(_close, request),
                trace_parent=trace_parent,
                events=self._events,
            )
        return Context(
            request_id=request_id,
            store=store,
            max_attempts=self._max_attempts,
            clock=self._clock,
            strong_reads=self._strong_reads,
            authenticated=authenticated,
            from_gateway=from_gateway,
            client=_client(request.headers),
            debug_dynamodb=(
                self._accounting_allowed and request.headers.get(DEBUG_DYNAMODB_HEADER) == "1"
            ),
            trace_parent=trace_parent,
            events=self._events,
        )

    async def _caller(self, authorization: str | None) -> Caller | CallerError:
        try:
            return await authenticate(authorization, self._auth, now=self._token_clock())
        except CallerError as refusal:
            return refusal

    async def _forwarded(
        self, sender: Caller | CallerError, headers: Mapping[str, str]
    ) -> tuple[Caller | CallerError, bool]:
        """At `/subgraph` (SPEC §15), the caller and whether the gateway sent the request. The
        gateway (its own token holds the gateway scope) is no caller: the client whose token it
        forwards is, verified as any token; with none forwarded there is no caller (never the
        gateway, whose token vouches for the text, not for a client without a token). The
        forwarded header from anyone else is refused, lest a customer name another caller."""
        forwarded = headers.get(FORWARDED_AUTHORIZATION_HEADER)
        if isinstance(sender, Caller) and sender.is_gateway:
            if forwarded is None:
                return Unauthenticated("the gateway forwarded no client token"), True
            client = await self._caller(forwarded)
            if isinstance(client, Caller) and client.is_gateway:
                return Unauthenticated("a forwarded token may not hold the gateway scope"), True
            return client, True
        if forwarded is not None:
            refused = Forbidden(f"{FORWARDED_AUTHORIZATION_HEADER} is taken from the gateway only")
            return refused, False
        return sender, False


def _client(headers: Mapping[str, str]) -> str | None:
    """The client the headers name (Apollo Client's and most gateways'), as `name@version`."""
    name = headers.get(CLIENT_NAME_HEADER, "").strip()
    if not name:
        return None
    version = headers.get(CLIENT_VERSION_HEADER, "").strip()
    return (f"{name}@{version}" if version else name)[:CLIENT_LABEL_LENGTH]


def _refused(error: RequestError, method: str, headers: Mapping[str, str]) -> Refused:
    """The HTTP edge's refusal of a request the engine refused before it ran (`engine.errors`)."""
    if isinstance(error, DocumentRefused):
        if error.code == PERSISTED_QUERY_NOT_FOUND:  # nothing may cache the miss
            headers = {**headers, "cache-control": "private, no-cache, must-revalidate"}
        return Refused(None, error.message, code=error.code, headers=headers)
    if isinstance(error, NoSuchOperation):
        # A GraphQL request error, as graphql-core reports an unknown operation.
        return Refused(None, error.as_http_error_reason(), headers=headers)
    if isinstance(error, OperationTypeNotAllowed):
        words = error.as_http_error_reason(method)
        if method == "GET" and error.operation_type is OperationType.MUTATION:
            return Refused(405, words, allow="POST", headers=headers)
        return Refused(400, words, headers=headers)
    if isinstance(error, MissingQuery):
        return Refused(400, "No GraphQL query found in the request", headers=headers)
    return Refused(400, str(error), headers=headers)  # MalformedDocumentRequest


def _response(
    status: int, body: dict[str, object], media_type: str, headers: Mapping[str, str]
) -> Response:
    # Made whole at once: its headers in one list. The answer depends on `Accept`, so a cache
    # keeps one per media type.
    return Response(
        orjson.dumps(body),
        status_code=status,
        media_type=media_type,
        headers={**headers, "vary": "Accept"},
    )


def _wants_graphiql(request: Request) -> bool:
    """A browser opening `/graphql` (Strawberry's rule): a GET without a query, for HTML."""
    accept = request.headers.get("accept", "")
    return request.query_params.get("query") is None and ("text/html" in accept or "*/*" in accept)


def _socket_authorization(context: Context) -> str | None:
    params = context.connection_params or {}
    header = params.get("Authorization", params.get("authorization"))
    return header if isinstance(header, str) else None


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    with contextlib.suppress(RuntimeError):  # closed already
        await websocket.close(code, reason)
