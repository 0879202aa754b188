"""The Starlette application: `/graphql`, `/healthz`, `/readyz`, on one shared store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from datasource import PaymentStore, open_store
from datasource.table import create_table_if_missing
from domain.errors import StorageUnavailable
from resolvers.callers import AuthConfig
from schema import build_schema
from schema.limits import QueryLimits
from server.demo_data import seed_demo_payments
from server.graphql_http import PaymentsGraphQL
from server.observability import Metrics
from server.request_limits import RequestBodyLimit
from server.settings import Settings

# A readiness probe that waits out the client's retries would time out itself; answer quickly.
READINESS_TIMEOUT_SECONDS = 2.0


def utc_now() -> datetime:
    return datetime.now(UTC)


def create_app(
    settings: Settings,
    *,
    dynamodb_endpoint: str | None = None,
    clock: Callable[[], datetime] = utc_now,
    seed_demo_data: bool = False,
    dynamodb_client: Any | None = None,
) -> Starlette:
    """The ASGI app; `dynamodb_endpoint` (the embedded one, if any) wins over the settings'.

    With `seed_demo_data`, a table this start creates gets the demonstration payments.
    `dynamodb_client`, an open client the caller owns (the benchmark's fake DynamoDB), replaces
    the one the app would open.
    """
    config = settings.dynamo_config(dynamodb_endpoint)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        secret = settings.cursor_secret.get_secret_value().encode()
        opened = (
            open_store(config, cursor_secret=secret)
            if dynamodb_client is None
            else contextlib.nullcontext(
                PaymentStore(dynamodb_client, table_name=config.table_name, cursor_secret=secret)
            )
        )
        async with opened as store:
            if settings.creates_missing_table:
                created = await create_table_if_missing(store.client, settings.table_name)
                if created and seed_demo_data:
                    await seed_demo_payments(store, clock=clock, max_attempts=settings.max_attempts)
            app.state.store = store
            yield

    def current_store() -> PaymentStore:
        store: PaymentStore = app.state.store
        return store

    metrics = Metrics()
    graphql = PaymentsGraphQL(
        build_schema(
            QueryLimits(
                max_depth=settings.max_query_depth,
                max_aliases=settings.max_query_aliases,
                max_tokens=settings.max_query_tokens,
                max_cost=settings.max_query_cost,
            ),
            production=settings.production,
            observers=[metrics.observe],
            dynamodb_budget=settings.dynamodb_budget,
        ),
        store=current_store,
        auth=AuthConfig.build(
            secret=(
                settings.auth_jwt_secret.get_secret_value()
                if settings.auth_jwt_secret is not None
                else None
            ),
            public_key_file=settings.auth_jwt_public_key_file,
            issuer=settings.auth_jwt_issuer,
            audience=settings.auth_jwt_audience,
        ),
        max_attempts=settings.max_attempts,
        clock=clock,
        accounting_allowed=settings.debug_dynamodb_header_allowed,
        graphiql=not settings.production,
        queries_via_get=not settings.production,
    )

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        try:
            async with asyncio.timeout(READINESS_TIMEOUT_SECONDS):
                await current_store().ping()
        except (StorageUnavailable, TimeoutError) as error:
            return JSONResponse(
                {"status": "unavailable", "reason": type(error).__name__}, status_code=503
            )
        return JSONResponse({"status": "ok", "table": settings.table_name})

    async def metrics_page(request: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    routes = [
        Route("/graphql", graphql, methods=["GET", "POST"]),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
    ]
    if settings.metrics == "app":
        routes.append(Route("/metrics", metrics_page))
    app = Starlette(
        routes=routes,
        middleware=[Middleware(RequestBodyLimit, max_bytes=settings.max_request_bytes)],
        lifespan=lifespan,
    )
    app.state.metrics = metrics
    return app
