"""`LOC_ENV=prod`: nothing for explorers, nothing leaked, nothing debug."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import jwt
import pytest

from datasource import DynamoConfig
from tests.api.conftest import Api, api_client, error_codes

PROD_SETTINGS = {
    "env": "prod",
    "region": "us-west-2",  # where the test table lives; prod's default is us-east-2
    "auth_jwt_secret": "a-production-secret-that-is-long-enough-0123",
    "cursor_secret": "a-production-cursor-secret-long-enough-0123",
}
PAYMENT_ID = "0190f5a4-0000-7000-8000-000000000000"


@pytest.fixture
async def prod(moto_config: DynamoConfig) -> AsyncIterator[Api]:
    async with api_client(moto_config, **PROD_SETTINGS) as api:
        yield api


def prod_token(user: str, *, service: bool = False) -> str:
    claims: dict[str, Any] = {"sub": user, "exp": int(time.time()) + 60}
    if service:
        claims["scope"] = "payments:service"
    return jwt.encode(claims, PROD_SETTINGS["auth_jwt_secret"], algorithm="HS256")


async def test_introspection_is_off(prod: Api) -> None:
    body = await prod.post("{ __schema { types { name } } }", as_=prod_token("svc", service=True))
    assert body.get("data") is None
    assert "introspection" in body["errors"][0]["message"].lower()


async def test_graphiql_and_get_queries_are_off(prod: Api) -> None:
    page = await prod.http.get("/graphql", headers={"Accept": "text/html"})
    assert page.status_code != 200 or "graphiql" not in page.text.lower()
    query = await prod.http.get(
        "/graphql",
        params={"query": "{ __typename }"},
        headers={"Authorization": f"Bearer {prod_token('svc', service=True)}"},
    )
    assert query.status_code in (400, 404, 405)


async def test_the_development_tokens_are_refused(prod: Api) -> None:
    body = await prod.post("query { paymentsByStatus(status: RETRY) { edges { cursor } } }")
    # The default token of `api.post` is signed with the published development secret.
    assert error_codes(body) == ["UNAUTHENTICATED"]


async def test_unexpected_errors_are_masked_and_leak_nothing(
    prod: Api, monkeypatch: pytest.MonkeyPatch, moto_config: DynamoConfig
) -> None:
    async def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"Traceback: table {moto_config.table_name} "
            "arn:aws:dynamodb:us-east-2:123456789012:table/prod-loc-service at /app/datasource"
        )

    monkeypatch.setattr(prod.app.state.store, "batch_get", boom)
    body = await prod.post(
        f'query {{ payment(userId: "u", loanId: "l", paymentId: "{PAYMENT_ID}") {{ id }} }}',
        as_=prod_token("svc", service=True),
    )

    assert body["errors"][0]["message"] == "Unexpected error."
    assert body["errors"][0]["extensions"] == {"code": "INTERNAL"}
    text = str(body)
    for leak in ("Traceback", moto_config.table_name, "arn:aws", "/app/", "RuntimeError"):
        assert leak not in text


async def test_expected_failures_still_come_through(prod: Api) -> None:
    customer = prod_token("alice")
    service = prod_token("svc", service=True)
    ghost = {"userId": "u", "loanId": "l", "paymentId": PAYMENT_ID, "reason": "r"}

    missing = await prod.mutate("skipPayment", ghost, as_=service)
    assert missing["code"] == "NOT_FOUND"
    forbidden = await prod.post(
        "query { paymentsByStatus(status: RETRY) { edges { cursor } } }", as_=customer
    )
    assert error_codes(forbidden) == ["FORBIDDEN"]
    anonymous = await prod.post('query { loan(loanId: "l") { id } }', as_=None)
    assert error_codes(anonymous) == ["UNAUTHENTICATED"]
    bad = await prod.mutate(
        "createPayment",
        {"userId": "u", "loanId": "l#1", "amountCents": 5, "method": "ACH"},
        as_=service,
    )
    assert (bad["code"], bad["field"]) == ("INVALID_INPUT", "loanId")


async def test_request_accounting_is_off(prod: Api) -> None:
    body = await prod.post(
        "query { paymentsByStatus(status: RETRY) { edges { cursor } } }",
        as_=prod_token("svc", service=True),
        debug=True,
    )
    assert "errors" not in body
    assert "dynamodb" not in body.get("extensions", {})


async def test_field_suggestions_do_not_map_the_schema(prod: Api) -> None:
    body = await prod.post("{ paymentz }", as_=prod_token("svc", service=True))
    message = body["errors"][0]["message"]
    assert "paymentz" in message
    assert "Did you mean" not in message
