"""`/graphql` over HTTP and WebSocket: Strawberry's ASGI view, with a fresh context for every
request (and every operation of a WebSocket connection, `PaymentsSchema.stream`).

Over WebSocket (`graphql-transport-ws`, and the older `graphql-ws`) the caller's token comes in
`connection_init`'s payload (`{"Authorization": "Bearer ..."}`): a missing or refused one closes
the connection with 4403 (graphql-transport-ws's answer to a refused `connection_init`), before
any operation runs. Pages on other origins may not open a socket (Strawberry's origin check).

A JSON POST (every operation of a front-end app or a job) takes a short path of its own: the
body read and checked as the view checks it, the operation run, the result encoded with orjson,
and Strawberry's refusals answered with the same statuses and words. Everything else (GraphiQL,
GET queries, forms, streaming) goes through the view as it is.

With tracing on, each operation's trace continues the caller's (`traceparent` in the headers,
or in `connection_init`'s payload), and an HTTP answer says which span it was (`traceresponse`,
`server.tracing`).
"""

from __future__ import annotations

import contextlib
import functools
import re
import secrets
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import orjson
from cross_web import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect
from strawberry.asgi import ASGIWebSocketAdapter, GraphQL
from strawberry.exceptions import ConnectionRejectionError, MissingQueryError
from strawberry.http import process_result
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.types.graphql import OperationType
from strawberry.types.unset import UNSET, UnsetType

from datasource import PaymentStore
from resolvers.callers import Caller, CallerError
from resolvers.context import Context
from schema import PaymentsSchema
from server.auth import AuthConfig, authenticate
from server.graphiql import GraphiQLPage
from server.tracing import TRACE_RESPONSE_HEADER, connection_trace, incoming_trace, trace_response

DEBUG_DYNAMODB_HEADER = "x-debug-dynamodb"
REQUEST_ID_HEADER = "x-request-id"
_POST_OPERATIONS = frozenset({OperationType.QUERY, OperationType.MUTATION})
# Accept headers that ask for a streamed answer (multipart, server-sent events): the view's.
_STREAMING = ("multipart/mixed", "text/event-stream")
# A caller's request id is kept when it is a plain token; anything else gets a fresh one, so
# no header can write arbitrary text into the logs.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# A socket that sends no `connection_init` within this is closed (4408).
CONNECTION_INIT_WAIT = timedelta(seconds=10)


class TextFrames(ASGIWebSocketAdapter):
    """graphql-transport-ws speaks in text frames; `encode_json` gives bytes (orjson)."""

    async def send_json(self, message: Mapping[str, object]) -> None:
        try:
            await self.ws.send_text(orjson.dumps(message).decode())
        except WebSocketDisconnect as closed:
            raise WebSocketDisconnected from closed


class PaymentsGraphQL(GraphQL[Context, None]):
    websocket_adapter_class = TextFrames

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
        queries_via_get: bool,
        max_subscriptions_per_connection: int = 20,
        keep_alive_interval: float = 15.0,
        strong_reads: bool = False,
    ) -> None:
        # Only JSON bodies are parsed (no multipart, no forms, no text/plain), so a cross-site
        # form cannot post an operation; mutations never run over GET.
        super().__init__(
            schema,
            graphql_ide="graphiql" if graphiql is not None else None,
            allow_queries_via_get=queries_via_get,
            multipart_uploads_enabled=False,
            keep_alive=True,
            keep_alive_interval=keep_alive_interval,
            connection_init_wait_timeout=CONNECTION_INIT_WAIT,
            max_subscriptions_per_connection=max_subscriptions_per_connection,
        )
        self._auth = auth
        # Seconds since the epoch, as tokens carry them; `clock` is the payments' own time.
        self._token_clock = token_clock
        self._max_attempts = max_attempts
        self._clock = clock
        self._accounting_allowed = accounting_allowed
        self._graphiql = graphiql
        self._strong_reads = strong_reads

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
        if isinstance(request, Request) and context is UNSET and _plain_json_post(request):
            return await self._answer_json_post(request)
        return await super().run(request, context, root_value)

    async def _answer_json_post(self, request: Request) -> Response:
        context = self._context(request)
        data = self.parse_json(await request.body())
        if isinstance(data, list):
            raise HTTPException(400, "Batching is not enabled")
        if not isinstance(data, dict):
            raise HTTPException(400, "The request body must be a JSON object")
        for name, kind in _REQUEST_FIELDS.items():
            value = data.get(name)
            if value is not None and not isinstance(value, kind):
                raise HTTPException(400, _REFUSED_FIELD[name])
        try:
            result = await self.schema.execute(
                data.get("query"),
                variable_values=data.get("variables"),
                context_value=context,
                operation_name=data.get("operationName"),
                allowed_operation_types=_POST_OPERATIONS,
                operation_extensions=data.get("extensions"),
            )
        except CannotGetOperationTypeError as error:
            raise HTTPException(400, error.as_http_error_reason()) from error
        except InvalidOperationTypeError as error:
            raise HTTPException(400, error.as_http_error_reason("POST")) from error
        except MissingQueryError as error:
            raise HTTPException(400, "No GraphQL query found in the request") from error
        # Made whole at the end: its headers in one list, where setting each on a response made
        # earlier searched the list again.
        headers = {REQUEST_ID_HEADER: context.request_id}
        if context.span is not None:
            headers[TRACE_RESPONSE_HEADER] = trace_response(context.span)
        return Response(
            self.encode_json(process_result(result)),
            media_type="application/json",
            headers=headers,
        )

    async def execute_operation(
        self,
        request: Request,
        request_adapter: Any,
        request_data: Any,
        context: Context,
        root_value: None,
        sub_response: Response,
    ) -> Any:
        """The view's own path (GraphiQL, GET queries): `traceresponse` as the fast path has it."""
        result = await super().execute_operation(
            request=request,
            request_adapter=request_adapter,
            request_data=request_data,
            context=context,
            root_value=root_value,
            sub_response=sub_response,
        )
        if context.span is not None:
            sub_response.headers[TRACE_RESPONSE_HEADER] = trace_response(context.span)
        return result

    def encode_json(self, data: object) -> bytes:
        # orjson: several times faster than json.dumps on a page of payments.
        return orjson.dumps(data)

    def decode_json(self, data: str | bytes) -> object:
        # orjson's decode error is a json.JSONDecodeError: Strawberry still answers 400.
        return orjson.loads(data)

    async def on_ws_connect(self, context: Context) -> UnsetType | dict[str, object] | None:
        """Authenticate the connection from `connection_init`'s payload; refuse it without a
        token the HTTP endpoint would accept."""
        params = context.connection_params or {}
        header = params.get("Authorization", params.get("authorization"))
        try:
            context.authenticated = authenticate(
                header if isinstance(header, str) else None, self._auth, now=self._token_clock()
            )
        except CallerError as refusal:
            raise ConnectionRejectionError({"message": str(refusal)}) from None
        if context.tracer is not None:
            context.trace_parent = connection_trace(params) or context.trace_parent
        acknowledged: UnsetType = UNSET  # `connection_ack` without a payload
        return acknowledged

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> Context:
        context = self._context(request)
        if isinstance(response, Response):
            response.headers[REQUEST_ID_HEADER] = context.request_id
        return context

    def _context(self, request: Request | WebSocket) -> Context:
        authenticated: Caller | CallerError
        try:
            authenticated = authenticate(
                request.headers.get("authorization"), self._auth, now=self._token_clock()
            )
        except CallerError as refusal:
            authenticated = refusal
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
                # Until `connection_init` brings a token (`on_ws_connect`).
                authenticated=authenticated,
                live=request.app.state.live.hub,
                close_connection=functools.partial(_close, request),
                trace_parent=trace_parent,
            )
        return Context(
            request_id=request_id,
            store=store,
            max_attempts=self._max_attempts,
            clock=self._clock,
            strong_reads=self._strong_reads,
            authenticated=authenticated,
            debug_dynamodb=(
                self._accounting_allowed and request.headers.get(DEBUG_DYNAMODB_HEADER) == "1"
            ),
            trace_parent=trace_parent,
        )


_REQUEST_FIELDS: dict[str, type] = {"query": str, "variables": dict, "extensions": dict}
# Strawberry's own words for each refusal.
_REFUSED_FIELD = {
    "query": "The GraphQL operation's `query` must be a string or null, if provided.",
    "variables": "The GraphQL operation's `variables` must be an object or null, if provided.",
    "extensions": "The GraphQL operation's `extensions` must be an object or null, if provided.",
}


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    with contextlib.suppress(RuntimeError):  # closed already
        await websocket.close(code, reason)


def _plain_json_post(request: Request) -> bool:
    if request.method != "POST":
        return False
    headers = request.headers
    content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    accept = headers.get("accept", "")
    return content_type == "application/json" and not any(kind in accept for kind in _STREAMING)
