"""`/subgraph` in prod (SPEC §15): text runs from the gateway alone (its token holds
`payments:gateway`), as the client whose token it forwards in `X-Forwarded-Authorization`; a
gateway request forwarding no valid client token (or a gateway's) is refused before its text is
parsed; a forwarded header from anyone else is refused, and `/graphql` takes none of it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import jwt
import pytest

from datasource import DynamoConfig
from domain.payment import PaymentRef
from resolvers.node_ids import payment_node_id
from tests.api.conftest import (
    PROD_SETTINGS,
    SERVICE,
    Api,
    api_client,
    error_codes,
    prod_token,
    without_cost,
)

ENTITIES = """query($representations: [_Any!]!) {
  _entities(representations: $representations) { ... on Payment { userId amountCents } } }"""


def gateway_token(scope: str = "payments:gateway") -> str:
    claims = {"sub": "hive-gateway", "scope": scope, "exp": int(time.time()) + 60}
    return jwt.encode(claims, PROD_SETTINGS["auth_jwt_secret"], algorithm="HS256")


async def ask(
    api: Api, representations: list[dict[str, str]], *, token: str, forwarded: str | None
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    if forwarded is not None:
        headers["X-Forwarded-Authorization"] = f"Bearer {forwarded}"
    response = await api.http.post(
        api.endpoint,
        json={"query": ENTITIES, "variables": {"representations": representations}},
        headers=headers,
    )
    assert response.status_code == 200, response.text
    return without_cost(response.json())


@pytest.fixture
async def prod(moto_config: DynamoConfig) -> AsyncIterator[tuple[Api, list[dict[str, str]]]]:
    """The subgraph in prod, and the representations of a payment of alice's and one of bob's."""
    async with api_client(moto_config, **PROD_SETTINGS) as api:
        service = prod_token("collections-job", service=True)
        payments = [await api.create(user=user, as_=service) for user in ("alice", "bob")]
        yield api.at("/subgraph"), [{"__typename": "Payment", "id": p["id"]} for p in payments]


async def test_the_gateways_text_runs_as_the_client_it_forwards(
    prod: tuple[Api, list[dict[str, str]]],
) -> None:
    subgraph, payments = prod

    body = await ask(subgraph, payments, token=gateway_token(), forwarded=prod_token("alice"))

    assert body == {"data": {"_entities": [{"userId": "alice", "amountCents": 5000}, None]}}


async def test_the_gateways_text_runs_under_the_trusted_policy_too(
    moto_config: DynamoConfig,
) -> None:
    async with api_client(moto_config, **PROD_SETTINGS, documents="trusted") as api:
        service = prod_token("collections-job", service=True)
        subgraph = api.at("/subgraph")
        absent = PaymentRef("alice", "loan-1", "0190f5a4-0000-7000-8000-000000000000")
        representation = {"__typename": "Payment", "id": payment_node_id(absent)}

        through_gateway = await ask(
            subgraph, [representation], token=gateway_token(), forwarded=service
        )
        direct = await ask(subgraph, [representation], token=service, forwarded=None)

    assert through_gateway == {"data": {"_entities": [None]}}
    assert error_codes(direct) == ["DOCUMENT_NOT_TRUSTED"]


@pytest.mark.parametrize(
    "forwarded",
    [None, SERVICE],  # nothing forwarded; a token prod does not accept (the development secret)
    ids=["none", "refused"],
)
async def test_without_a_valid_forwarded_token_there_is_no_caller(
    prod: tuple[Api, list[dict[str, str]]], forwarded: str | None
) -> None:
    subgraph, payments = prod

    body = await ask(subgraph, payments, token=gateway_token(), forwarded=forwarded)

    # The gateway's own token is no caller: a client without a token gets nothing through it.
    assert body.get("data") is None
    assert error_codes(body) == ["UNAUTHENTICATED"]


@pytest.mark.parametrize(
    "sender", ["customer", "service", "another scope"], ids=lambda sender: sender
)
async def test_a_forwarded_token_from_any_other_sender_is_refused(
    prod: tuple[Api, list[dict[str, str]]], sender: str
) -> None:
    subgraph, payments = prod
    token = {
        "customer": prod_token("bob"),
        "service": prod_token("collections-job", service=True),
        "another scope": gateway_token(scope="payments:read"),
    }[sender]

    body = await ask(subgraph, payments, token=token, forwarded=prod_token("alice"))

    assert body.get("data") is None
    assert error_codes(body) == ["FORBIDDEN"]


async def test_graphql_takes_no_gateway(prod: tuple[Api, list[dict[str, str]]]) -> None:
    subgraph, _payments = prod
    public = subgraph.at("/graphql")

    body = await public.post(
        "{ paymentsByStatus(status: PENDING) { edges { cursor } } }", as_=gateway_token()
    )

    assert error_codes(body) == ["DOCUMENT_NOT_TRUSTED"]


@pytest.mark.parametrize(
    "forwarded",
    ["none", "refused", "the gateway's own", "another gateway's"],
    ids=lambda forwarded: forwarded,
)
async def test_a_gateway_request_without_a_caller_is_refused_before_its_text_is_parsed(
    prod: tuple[Api, list[dict[str, str]]], forwarded: str
) -> None:
    subgraph, _payments = prod
    gateway = gateway_token()
    headers = {"Authorization": f"Bearer {gateway}"}
    header = {
        "none": None,
        "refused": SERVICE,  # a token prod does not accept (the development secret)
        "the gateway's own": gateway,
        "another gateway's": gateway_token(scope="payments:read payments:gateway"),
    }[forwarded]
    if header is not None:
        headers["X-Forwarded-Authorization"] = f"Bearer {header}"

    # Text that does not parse: refused for the caller, not for the text, and never run.
    response = await subgraph.http.post(
        subgraph.endpoint, json={"query": "{ _entities(representations: "}, headers=headers
    )

    body = response.json()
    assert response.status_code == 200, response.text
    assert error_codes(body) == ["UNAUTHENTICATED"], body
    assert "data" not in body and "cost" not in body.get("extensions", {}), body


async def test_a_forwarded_gateway_token_is_no_customer(
    prod: tuple[Api, list[dict[str, str]]],
) -> None:
    subgraph, _payments = prod
    gateway = gateway_token()

    body = await subgraph.http.post(
        subgraph.endpoint,
        json={"query": '{ loan(userId: "hive-gateway", loanId: "loan-1") { loanId } }'},
        headers={
            "Authorization": f"Bearer {gateway}",
            "X-Forwarded-Authorization": f"Bearer {gateway}",
        },
    )

    assert error_codes(body.json()) == ["UNAUTHENTICATED"], body.text
