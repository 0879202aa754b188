"""An HTTP client on the real ASGI app, backed by moto, with tokens for every kind of caller; and
a DynamoDB that only fails (`faulty`)."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import httpx
import jwt
import pytest
from aiohttp.abc import AbstractResolver
from opentelemetry.sdk.trace import TracerProvider
from starlette.applications import Starlette

from datasource import DynamoConfig
from domain import keys
from process.settings import DEV_JWT_SECRET, Settings
from server.app import create_app
from tests.api.faults import THROTTLED, FaultyDynamoDB

PAYMENT_FIELDS = """
    id paymentId userId loanId amountCents status method process confirmationId
    accountLastFour intendedInstallmentId attempts updateReason returnCode version
    createdAt updatedAt firstPresentedAt completedAt allowedTransitions
    applications { paymentId installmentId amountCents paymentDate }
    loan { id loanId userId }
"""

RESULT_FIELDS = f"""
    __typename
    ... on PaymentPayload {{ payment {{ {PAYMENT_FIELDS} }} }}
    ... on UserError {{ code message }}
    ... on InvalidInputError {{ field }}
    ... on InvalidTransitionError {{ currentStatus targetStatus }}
    ... on ConflictError {{ foundStatus }}
"""


def token(user_id: str, *, service: bool = False, ttl: int = 3600, **claims: Any) -> str:
    payload: dict[str, Any] = {"sub": user_id, "exp": int(time.time()) + ttl, **claims}
    if service:
        payload["scope"] = "payments:read payments:service"
    return jwt.encode(payload, DEV_JWT_SECRET, algorithm="HS256")


SERVICE = token("collections-job", service=True)

# `LOC_ENV=prod` on the tests' table, with secrets of its own (prod refuses the development ones).
PROD_SETTINGS: dict[str, Any] = {
    "env": "prod",
    "region": "us-west-2",  # where the test table lives; prod's default is us-east-2
    "auth_jwt_secret": "a-production-secret-that-is-long-enough-0123",
    "cursor_secret": "a-production-cursor-secret-long-enough-0123",
}


def prod_token(user: str, *, service: bool = False) -> str:
    claims: dict[str, Any] = {"sub": user, "exp": int(time.time()) + 60}
    if service:
        claims["scope"] = "payments:service"
    return jwt.encode(claims, PROD_SETTINGS["auth_jwt_secret"], algorithm="HS256")


ALICE = token("alice")
BOB = token("bob")


class Clock:
    """The service's clock, moved by tests."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 2, 15, 30, tzinfo=UTC)

    def __call__(self) -> datetime:
        # Every read moves a millisecond on, so successive writes get distinct times.
        self.now += timedelta(milliseconds=1)
        return self.now


@dataclass
class Api:
    http: httpx.AsyncClient
    app: Starlette
    # `/graphql`, or `/subgraph` (`at`): the same schema as a federation subgraph.
    endpoint: str = "/graphql"

    def at(self, endpoint: str) -> Api:
        return dataclasses.replace(self, endpoint=endpoint)

    async def post(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        *,
        as_: str | None = SERVICE,
        debug: bool = False,
    ) -> dict[str, Any]:
        headers = {}
        if as_ is not None:
            headers["Authorization"] = f"Bearer {as_}"
        if debug:
            headers["X-Debug-DynamoDB"] = "1"
        response = await self.http.post(
            self.endpoint, json={"query": query, "variables": variables or {}}, headers=headers
        )
        assert response.status_code == 200, response.text
        return without_cost(response.json())

    async def data(
        self, query: str, variables: dict[str, Any] | None = None, *, as_: str | None = SERVICE
    ) -> dict[str, Any]:
        body = await self.post(query, variables, as_=as_)
        assert "errors" not in body, body["errors"]
        data: dict[str, Any] = body["data"]
        return data

    async def mutate(
        self, mutation: str, input: dict[str, Any], *, as_: str | None = SERVICE
    ) -> dict[str, Any]:
        type_name = mutation[0].upper() + mutation[1:] + "Input"
        data = await self.data(
            f"mutation($input: {type_name}!) {{ {mutation}(input: $input) {{ {RESULT_FIELDS} }} }}",
            {"input": input},
            as_=as_,
        )
        result: dict[str, Any] = data[mutation]
        return result

    async def create(
        self,
        *,
        user: str = "alice",
        loan: str = "loan-1",
        amount: int = 5000,
        method: str = "ACH",
        as_: str | None = SERVICE,
        **extra: Any,
    ) -> dict[str, Any]:
        fields = {
            "userId": user,
            "loanId": loan,
            "amountCents": amount,
            "method": method,
            "intendedInstallmentId": "inst-1",
            "accountLastFour": "6789",
            **extra,
        }
        result = await self.mutate("createPayment", fields, as_=as_)
        assert result["__typename"] == "PaymentPayload", result
        payment: dict[str, Any] = result["payment"]
        return payment

    async def move(
        self, mutation: str, payment: dict[str, Any], *, reason: str = "test", **extra: Any
    ) -> dict[str, Any]:
        named = {
            "userId": payment["userId"],
            "loanId": payment["loanId"],
            "paymentId": payment["paymentId"],
            "reason": reason,
        }
        return await self.mutate(mutation, {**named, **extra})


@pytest.fixture
def clock() -> Clock:
    return Clock()


TEST_BUDGET = 30.0


@asynccontextmanager
async def api_client(
    config: DynamoConfig,
    *,
    clock: Clock | None = None,
    token_clock: Callable[[], float] = time.time,
    seed_demo_data: bool = False,
    tracer_provider: TracerProvider | None = None,
    webhook_dns: AbstractResolver | None = None,
    **settings: Any,
) -> AsyncIterator[Api]:
    """The real app on moto's table, its lifespan run as uvicorn would run it. No stream reader
    and no webhook dispatcher unless asked for (`live_updates=True`, `webhooks=True`): both are
    tested on real servers (`tests/api/test_live_updates.py`, `tests/server/test_webhook_*`).

    The DynamoDB budget is 30 s unless a test sets its own: the shared emulators stall for
    seconds on a loaded machine (DynamoDB Local's JVM under `make test-races` held a creation
    past 3 s), and the budget's own behaviour is tested where it is the point (`test_faults`,
    `test_outages`, `tests/datasource/test_breaker.py`)."""
    options: dict[str, Any] = {
        "env": "local",
        "live_updates": False,
        # Webhook delivery polls the table each second: on only where it is the point.
        "webhooks": False,
        "dynamodb_budget": TEST_BUDGET,
        **settings,
    }
    app = create_app(
        Settings(table_name=config.table_name, dynamodb_endpoint=config.endpoint_url, **options),
        clock=clock or Clock(),
        token_clock=token_clock,
        seed_demo_data=seed_demo_data,
        tracer_provider=tracer_provider,
        webhook_dns=webhook_dns,
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://payments.test") as http:
            yield Api(http, app)


@pytest.fixture
async def api(moto_config: DynamoConfig, clock: Clock) -> AsyncIterator[Api]:
    async with api_client(moto_config, clock=clock) as client:
        yield client


def without_cost(body: dict[str, Any]) -> dict[str, Any]:
    """An answer without its `extensions.cost` (SPEC §21), which moves with the caller's budget
    from one request to the next: tests/api/test_budgets.py reads it."""
    extensions = {k: v for k, v in body.get("extensions", {}).items() if k != "cost"}
    rest = {k: v for k, v in body.items() if k != "extensions"}
    return rest | ({"extensions": extensions} if extensions else {})


def error_codes(body: dict[str, Any]) -> list[str]:
    return [error.get("extensions", {}).get("code") for error in body.get("errors", [])]


def stored_items(config: DynamoConfig) -> list[dict[str, Any]]:
    """Every item in the table as DynamoDB holds it (low-level JSON), sorted by key; but the
    layout record, which says where the items are (`datasource.layouts`), not one of them."""
    client = boto3.client(
        "dynamodb",
        region_name=config.region,
        endpoint_url=config.endpoint_url,
        aws_access_key_id="testkey",
        aws_secret_access_key="testkey",
    )
    items: list[dict[str, Any]] = client.scan(TableName=config.table_name, ConsistentRead=True)[
        "Items"
    ]
    return sorted(
        (item for item in items if item["PK"]["S"] != keys.LAYOUT_PARTITION),
        key=lambda item: (item["PK"]["S"], item["SK"]["S"]),
    )


def payment_items(config: DynamoConfig) -> list[dict[str, Any]]:
    """The payment items alone, without the other kinds of item the table holds."""
    return [item for item in stored_items(config) if item["SK"]["S"].startswith("LOAN#")]


@pytest.fixture
def faulty() -> Iterator[FaultyDynamoDB]:
    """A `FaultyDynamoDB` (tests/api/faults.py) listening on a port of its own, for the tests of
    reads and writes under faults (`test_faults.py`) and of their traces (`test_tracing.py`)."""
    fault = FaultyDynamoDB()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            fault.requests.append(self.headers.get("X-Amz-Target", ""))
            if fault.mode == "slow":
                fault.released.wait(fault.delay)
            body = json.dumps(THROTTLED).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/x-amz-json-1.0")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            # A slow answer finds the client gone (it timed out): that is the point.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    fault.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    # These tests give DynamoDB budgets of tenths of a second. In the full suite, a full
    # collection freeing earlier tests' apps can stall this process for longer than that before
    # the first request is sent (CI saw a throttled mutation answer with no request made), so
    # that garbage is collected here, before the clock starts.
    gc.collect()
    yield fault
    server.shutdown()
    server.server_close()
