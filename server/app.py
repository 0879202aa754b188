"""The Starlette application: `/graphql`, `/subgraph`, `/healthz`, `/readyz`, on one shared store.

`/graphql` serves the public schema (schema.graphql), `/subgraph` the same schema as a
federation subgraph (schema.subgraph.graphql, for a gateway): one set of types and resolvers,
the same callers, limits, document policy and protocols, each its own endpoint so that a client
downloading the schema by introspection never meets federation's names (SPEC §6, §15).

The store is opened by the app's lifespan and held on `app.state.store`; the endpoints read it
from there. `/graphql` bounds request bodies itself (`LOC_MAX_REQUEST_BYTES`): a Content-Length
over it, or a body without one that grows past it, is answered 413 with a GraphQL response,
where Starlette's own limit would answer in plain text; no other endpoint reads a body.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from datasource import LOCAL_SETUP, acting_as
from domain.webhooks import EventsPolicy
from engine import (
    DocumentPolicy,
    Documents,
    ManifestsRefused,
    QueryLimits,
    load_trusted_documents,
)
from process.bootstrap import payment_store
from process.settings import Settings
from process.status_log import log_status_every
from process.tracing import open_tracing
from schema import PaymentsSchema, build_schema
from schema.costs import page_reads
from server.auth import AuthConfig, mint_development_token
from server.background import running
from server.budgets import BudgetPolicy, Budgets
from server.demo_data import seed_demo_payments
from server.graphiql import ASSETS_PATH as GRAPHIQL_ASSETS
from server.graphiql import GraphiQLPage
from server.graphql_view import PaymentsGraphQL
from server.jwks import jwks_reading
from server.live_feed import live_feed
from server.readiness import TableCheck, readyz
from server.request_records import Metrics
from server.subscription_budgets import SubscriptionBudgets
from server.subscription_slots import SubscriptionSlots
from server.webhook_worker.delivery import address_lookup, webhook_delivery

if TYPE_CHECKING:
    from aiohttp.abc import AbstractResolver
    from opentelemetry.sdk.trace import TracerProvider
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = ["create_app", "operators_routes", "query_limits"]

log = logging.getLogger("loc_payments.server")

# Who the token in a local GraphiQL's Headers tab names (as `loc-payments serve` prints one).
GRAPHIQL_TOKEN_USER = "local-developer"


def utc_now() -> datetime:
    return datetime.now(UTC)


def create_app(
    settings: Settings,
    *,
    dynamodb_endpoint: str | None = None,
    clock: Callable[[], datetime] = utc_now,
    token_clock: Callable[[], float] = time.time,
    seed_demo_data: bool = False,
    dynamodb_client: DynamoDBClient | None = None,
    tracer_provider: TracerProvider | None = None,
    webhook_dns: AbstractResolver | None = None,
) -> Starlette:
    """The ASGI app; `dynamodb_endpoint` (the embedded one, if any) wins over the settings'.

    `clock` is the payments' time; `token_clock` (seconds since the epoch) is what tokens'
    `iat`/`nbf`/`exp` are checked against: tokens carry the wall clock's seconds.

    With `seed_demo_data`, a table this start creates gets the demonstration payments.
    `dynamodb_client`, an open client the caller owns (the benchmark's fake DynamoDB), replaces
    the one the app would open. `tracer_provider` (the tests' in-memory exporter) takes the
    spans instead of the one `LOC_OTEL_EXPORTER` names (`process.tracing`). `webhook_dns` (the
    tests' stub DNS) resolves webhook receivers' names, at registration and at each delivery,
    instead of the system's.
    """
    metrics = Metrics(field_usage=settings.field_usage)
    auth = AuthConfig.from_settings(settings)
    # One per app: `/graphql` and `/subgraph` charge the same budgets.
    budgets = (
        Budgets(BudgetPolicy.from_settings(settings), on_throttled=metrics.throttled)
        if settings.budgets
        else None
    )
    subscriptions = None if budgets is None else subscription_budgets(settings, budgets)
    routes = [
        *graphql_routes(
            Endpoints(
                settings,
                auth,
                budgets=budgets,
                subscriptions=subscriptions,
                metrics=metrics,
                clock=clock,
                token_clock=token_clock,
                webhook_dns=webhook_dns,
            )
        ),
        *health_routes(settings),
    ]
    if settings.metrics == "app":
        routes.append(Route("/metrics", metrics_page))
    app = Starlette(
        routes=routes,
        lifespan=functools.partial(
            store_lifespan,
            settings=settings,
            endpoint_url=dynamodb_endpoint,
            client=dynamodb_client,
            seed_demo_data=seed_demo_data,
            clock=clock,
            tracer_provider=tracer_provider,
            webhook_dns=webhook_dns,
        ),
    )
    app.state.metrics = metrics
    app.state.auth = auth
    app.state.budgets = budgets
    app.state.subscriptions = subscriptions
    app.state.table_check = TableCheck()
    return app


@contextlib.asynccontextmanager
async def store_lifespan(
    app: Starlette,
    *,
    settings: Settings,
    endpoint_url: str | None,
    client: DynamoDBClient | None,
    seed_demo_data: bool,
    clock: Callable[[], datetime],
    tracer_provider: TracerProvider | None = None,
    webhook_dns: AbstractResolver | None = None,
) -> AsyncIterator[None]:
    """The store on `app.state.store`, the live updates on `app.state.live` and the webhook
    dispatcher on `app.state.webhooks` for the app's life; with `seed_demo_data`, a table this
    start creates gets the demonstration payments. A table of `test` or `prod` not as the
    service needs it is compared again until it is (`TableCheck.watch`).
    The tracer (if any) is the store's, and sends what is left of its spans at the end."""
    metrics: Metrics = app.state.metrics
    auth: AuthConfig = app.state.auth
    table_check: TableCheck = app.state.table_check
    async with (
        # The provider's keys are read in the background: the start does not wait for them.
        jwks_reading(auth.jwks),
        budgets_sharing(settings, app.state.budgets, app.state.subscriptions),
        open_tracing(settings, provider=tracer_provider) as tracer,
        payment_store(
            settings, endpoint_url=endpoint_url, client=client, tracer=tracer, compare_table=True
        ) as opened,
    ):
        if opened.created_table and seed_demo_data:
            with acting_as(LOCAL_SETUP):
                await seed_demo_payments(
                    opened.store, clock=clock, max_attempts=settings.max_attempts
                )
        app.state.store = opened.store
        metrics.watch_breaker(opened.store.breaker)
        metrics.watch_throttles(opened.store.throttles)
        async with (
            live_feed(
                settings, opened.store, endpoint_url=endpoint_url, reads_stream=client is None
            ) as feed,
            # Not on a client the caller brings (the benchmark's fake DynamoDB, which has no feed).
            webhook_delivery(
                settings,
                opened.store,
                clock=clock,
                enabled=client is None,
                observe=metrics.webhook_attempt,
                dns=webhook_dns,
                hub=feed.hub,
            ) as sender,
            running(table_check.watch(opened.store), name="table check"),
        ):
            app.state.live = feed
            app.state.webhooks = sender
            metrics.watch_subscriptions(feed.hub)
            if settings.status_log_interval == 0:
                yield
                return
            status = log_status_every(
                settings.status_log_interval,
                opened.store.breaker,
                opened.store.throttles,
                lambda: feed.stream_seconds_behind,
            )
            async with running(status, name="status log"):
                yield


@contextlib.asynccontextmanager
async def budgets_sharing(
    settings: Settings, budgets: Budgets | None, subscriptions: SubscriptionBudgets | None
) -> AsyncIterator[None]:
    """The budgets and the count of subscriptions shared through the fleet's broker, if it has
    one (`server.budgets`, `server.subscription_slots`)."""
    broker = settings.live_broker_url
    if budgets is None or broker is None:
        yield
        return
    url = broker.get_secret_value()
    async with contextlib.AsyncExitStack() as sharing:
        await sharing.enter_async_context(
            budgets.sharing(url, charge_within=settings.budget_broker_timeout)
        )
        if subscriptions is not None:
            await sharing.enter_async_context(subscriptions.slots.sharing(url))
        yield


def subscription_budgets(settings: Settings, budgets: Budgets) -> SubscriptionBudgets:
    """Subscriptions charged to `budgets`, each caller's capped (`server.subscription_budgets`)."""
    caps = {
        "customer": settings.budget_customer_max_subscriptions,
        "service": settings.budget_service_max_subscriptions,
    }
    slots = SubscriptionSlots(
        caps,
        instances=settings.budget_expected_instances,
        lease_seconds=settings.budget_subscription_lease_seconds,
    )
    return SubscriptionBudgets(budgets, slots)


@dataclass(frozen=True, slots=True)
class Endpoints:
    """What the GraphQL endpoints are made of, one app's: its settings and caller auth, the
    budgets (none when off), its metrics, and its clocks and resolver (the tests' to set)."""

    settings: Settings
    auth: AuthConfig
    budgets: Budgets | None
    subscriptions: SubscriptionBudgets | None
    metrics: Metrics
    clock: Callable[[], datetime]
    token_clock: Callable[[], float]
    webhook_dns: AbstractResolver | None


def graphql_routes(parts: Endpoints) -> list[BaseRoute]:
    """`/graphql` and `/subgraph` over HTTP, and over WebSocket for subscriptions (and any
    operation); GraphiQL (outside `prod`) explores `/graphql`."""
    settings = parts.settings
    graphiql = (
        None
        if settings.production
        else GraphiQLPage(
            endpoint="/graphql",
            headers=functools.partial(_graphiql_headers, settings, parts.token_clock),
        )
    )
    routes: list[BaseRoute] = []
    for path, subgraph in (("/graphql", False), ("/subgraph", True)):
        endpoint = graphql_endpoint(
            parts, subgraph=subgraph, graphiql=None if subgraph else graphiql
        )
        # Every method: the view answers those it does not serve (405, with a GraphQL response).
        routes += [Route(path, endpoint), WebSocketRoute(path, endpoint)]
    if graphiql is not None:
        routes.append(Route(f"{GRAPHIQL_ASSETS}/{{digest}}/{{name}}", graphiql.asset))
    return routes


def graphql_endpoint(
    parts: Endpoints, *, subgraph: bool, graphiql: GraphiQLPage | None
) -> PaymentsGraphQL:
    settings, budgets, subscriptions = parts.settings, parts.budgets, parts.subscriptions
    schema = build_schema(
        query_limits(settings),
        production=settings.production,
        observers=[parts.metrics.observe],
        dynamodb_budget=settings.dynamodb_budget,
        trace_documents=settings.otel_graphql_document,
        subgraph=subgraph,
        admit=None if budgets is None else budgets.admit,
        first_parse=None if budgets is None else budgets.first_parse,
        hold=None if subscriptions is None else subscriptions.hold,
        leaves_from_items=settings.leaves_from_items,
    )
    return PaymentsGraphQL(
        schema,
        auth=parts.auth,
        token_clock=parts.token_clock,
        max_attempts=settings.max_attempts,
        clock=parts.clock,
        accounting_allowed=settings.debug_dynamodb_header_allowed,
        graphiql=graphiql,
        documents=trusted_documents(settings, schema),
        text_via_get=not settings.production,
        max_body_bytes=settings.max_request_bytes,
        max_subscriptions_per_connection=settings.max_subscriptions_per_connection,
        keep_alive_interval=settings.websocket_keep_alive_interval,
        connection_init_wait=timedelta(seconds=settings.websocket_init_timeout),
        strong_reads=settings.strong_reads,
        events=EventsPolicy(
            public_only=settings.public_webhook_targets_only,
            secret_grace=timedelta(seconds=settings.webhook_secret_grace_seconds),
            settle_seconds=settings.events_settle_seconds,
            lookup=address_lookup(parts.webhook_dns),
            # A name that does not answer in the time a receiver has is as good as none.
            lookup_timeout=settings.webhook_timeout,
            retention=timedelta(days=settings.events_retention_days),
        ),
    )


def query_limits(settings: Settings) -> QueryLimits:
    """The settings' limits; a sharded list's page costs what it reads over the partitions the
    settings' layouts keep it in (`schema.costs`)."""
    return QueryLimits(
        max_depth=settings.max_query_depth,
        max_aliases=settings.max_query_aliases,
        max_tokens=settings.max_query_tokens,
        max_cost=settings.max_query_cost,
        page_reads=page_reads(
            status_partitions=len(settings.status_layout.read_partitions()),
            feed_partitions=settings.events_shards,
        ),
    )


def trusted_documents(settings: Settings, schema: PaymentsSchema) -> Documents:
    """The manifests of `LOC_TRUSTED_DOCUMENTS`, each document prepared by the schema once, and
    the policy over them; `ManifestsRefused` (naming every problem) stops the start."""
    trusted, _checked, problems = load_trusted_documents(
        settings.trusted_documents, schema.prepare_trusted
    )
    if problems:
        raise ManifestsRefused(problems)
    if settings.trusted_documents and not schema.subgraph:
        log.info(
            "trusted documents: %d loaded from %s; document policy %s",
            len(trusted),
            ", ".join(str(path) for path in settings.trusted_documents),
            settings.document_policy,
        )
    return Documents(trusted, DocumentPolicy(settings.document_policy), is_valid=schema.is_valid)


def _graphiql_headers(settings: Settings, token_clock: Callable[[], float]) -> str | None:
    """GraphiQL's Headers tab in `local`: a development service token, minted for the page."""
    if not settings.uses_development_jwt_secret:
        return None
    token = mint_development_token(
        settings, user_id=GRAPHIQL_TOKEN_USER, service=True, now=token_clock()
    )
    return json.dumps({"Authorization": f"Bearer {token}"}, indent=2)


def health_routes(settings: Settings) -> list[Route]:
    """`/healthz`: the process answers; `/readyz`: the table answers too (`server.readiness`),
    with its detail only in `local`: anyone who reaches the API port may ask."""
    return [
        Route("/healthz", healthz),
        Route("/readyz", functools.partial(readyz, detail=settings.env == "local")),
    ]


def operators_routes() -> list[Route]:
    """The metrics port's (`server.operators_port`): `/metrics`, and `/readyz` in detail."""
    return [
        Route("/metrics", metrics_page),
        Route("/readyz", functools.partial(readyz, detail=True)),
    ]


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def metrics_page(request: Request) -> Response:
    metrics: Metrics = request.app.state.metrics
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
