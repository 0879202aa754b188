"""`/graphql` over HTTP: Strawberry's ASGI view, with a fresh context for every request."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import datetime

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL

from datasource import PaymentStore
from resolvers.callers import AuthConfig, Caller, CallerError, authenticate
from resolvers.context import Context
from schema import PaymentsSchema

DEBUG_DYNAMODB_HEADER = "x-debug-dynamodb"
REQUEST_ID_HEADER = "x-request-id"
# A caller's request id is kept when it is a plain token; anything else gets a fresh one, so
# no header can write arbitrary text into the logs.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class PaymentsGraphQL(GraphQL[Context, None]):
    def __init__(
        self,
        schema: PaymentsSchema,
        *,
        store: Callable[[], PaymentStore],
        auth: AuthConfig,
        max_attempts: int,
        clock: Callable[[], datetime],
        accounting_allowed: bool,
        graphiql: bool,
        queries_via_get: bool,
    ) -> None:
        # Only JSON bodies are parsed (no multipart, no forms, no text/plain), so a cross-site
        # form cannot post an operation; mutations never run over GET.
        super().__init__(
            schema,
            graphql_ide="graphiql" if graphiql else None,
            allow_queries_via_get=queries_via_get,
            multipart_uploads_enabled=False,
        )
        self._store = store
        self._auth = auth
        self._max_attempts = max_attempts
        self._clock = clock
        self._accounting_allowed = accounting_allowed

    def encode_json(self, data: object) -> bytes:
        # orjson: several times faster than json.dumps on a page of payments.
        return orjson.dumps(data)

    def decode_json(self, data: str | bytes) -> object:
        # orjson's decode error is a json.JSONDecodeError: Strawberry still answers 400.
        return orjson.loads(data)

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> Context:
        authenticated: Caller | CallerError
        try:
            authenticated = authenticate(request.headers.get("authorization"), self._auth)
        except CallerError as refusal:
            authenticated = refusal
        request_id = request.headers.get(REQUEST_ID_HEADER, "")
        if not _REQUEST_ID.fullmatch(request_id):
            request_id = uuid.uuid4().hex
        if isinstance(response, Response):
            response.headers[REQUEST_ID_HEADER] = request_id
        return Context(
            request_id=request_id,
            store=self._store(),
            max_attempts=self._max_attempts,
            clock=self._clock,
            authenticated=authenticated,
            debug_dynamodb=(
                self._accounting_allowed and request.headers.get(DEBUG_DYNAMODB_HEADER) == "1"
            ),
        )
