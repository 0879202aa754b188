"""A service configured with an identity provider's JWKS (`LOC_AUTH_JWKS_URL`, SPEC §7), through
the API: tokens of its keys over HTTP and over WebSocket (`connection_init`), `/readyz` showing
the keys' state, a start that does not wait for the provider, and HS256 still there beside it."""

from __future__ import annotations

import asyncio
import time

import httpx
import jwt
import pytest
from websockets.asyncio.client import connect

from datasource import DynamoConfig
from tests.api.conftest import Api, api_client, error_codes
from tests.api.websocket_client import TRANSPORT_WS, acknowledged, close_of, send
from tests.backends import Backend, fresh_table
from tests.server.jwks_server import jwks_server, signing_key
from tests.servers import served

LOAN = '{ loan(userId: "user-1", loanId: "loan-1") { loanId userId } }'
SERVICE_KEY = signing_key("svc-key", "ES256")
CUSTOMER_KEY = signing_key("web-key", "RS256")


async def wait_for_keys(api: Api) -> dict[str, object]:
    deadline = time.monotonic() + 10
    while True:
        ready: dict[str, object] = (await api.http.get("/readyz")).json()
        if ready.get("jwks") == "ok":
            return ready
        assert time.monotonic() < deadline, ready
        await asyncio.sleep(0.05)


async def test_tokens_of_the_providers_keys_call_the_api(moto_config: DynamoConfig) -> None:
    with jwks_server(SERVICE_KEY, CUSTOMER_KEY) as provider:
        async with api_client(moto_config, auth_jwks_url=provider.url) as api:
            ready = await wait_for_keys(api)
            service = SERVICE_KEY.token({"sub": "autopay", "scope": "payments:service"})
            customer = CUSTOMER_KEY.token({"sub": "user-1"})
            other = CUSTOMER_KEY.token({"sub": "user-2"})

            as_service = await api.post(LOAN, as_=service)
            as_customer = await api.post(LOAN, as_=customer)
            as_another = await api.post('{ loan(loanId: "loan-1") { userId } }', as_=other)
            by_status = await api.post(
                "{ paymentsByStatus(status: RETRY) { edges { cursor } } }", as_=customer
            )

    assert ready["jwksKeys"] == 2
    assert as_service == {"data": {"loan": {"loanId": "loan-1", "userId": "user-1"}}}
    assert as_customer == as_service
    assert as_another["data"] == {"loan": {"userId": "user-2"}}
    assert error_codes(by_status) == ["FORBIDDEN"]


async def test_the_start_does_not_wait_for_an_unreachable_provider(
    moto_config: DynamoConfig,
) -> None:
    with jwks_server(SERVICE_KEY) as provider:
        url = provider.url
    # The provider is down from the start: the app serves, says so, and refuses its tokens.
    async with api_client(moto_config, auth_jwks_url=url, auth_jwks_timeout=0.5) as api:
        started = time.monotonic()
        body = await api.post(LOAN, as_=SERVICE_KEY.token({"sub": "autopay"}))
        refused_in = time.monotonic() - started
        ready = (await api.http.get("/readyz")).json()

    assert error_codes(body) == ["UNAUTHENTICATED"]
    assert refused_in < 2.0
    assert ready["status"] == "ok" and ready["jwks"] == "unavailable"


async def test_hs256_works_beside_the_provider(moto_config: DynamoConfig) -> None:
    with jwks_server(SERVICE_KEY) as provider:
        async with api_client(
            moto_config, auth_jwks_url=provider.url, auth_jwt_secret="s" * 40
        ) as api:
            hs256 = jwt.encode({"sub": "user-1", "exp": int(time.time()) + 60}, "s" * 40)
            body = await api.post(LOAN, as_=hs256)
    assert body["data"]["loan"]["userId"] == "user-1"


@pytest.mark.ddblocal
async def test_a_websocket_is_accepted_with_a_providers_token_and_refused_without(
    ddblocal_backend: Backend,
) -> None:
    table_name = await fresh_table(ddblocal_backend)
    try:
        with jwks_server(SERVICE_KEY) as provider:
            async with served(
                ddblocal_backend.endpoint_url,
                table_name,
                auth_jwks_url=provider.url,
                auth_jwks_timeout="0.5",
            ) as [url]:
                ws_url = url.replace("http://", "ws://") + "/graphql"
                token = SERVICE_KEY.token({"sub": "autopay", "scope": "payments:service"})
                async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
                    await acknowledged(socket, token)
                    await send(
                        socket,
                        {
                            "id": "1",
                            "type": "subscribe",
                            "payload": {
                                "query": 'subscription { paymentEvents(userId: "u") { version } }'
                            },
                        },
                    )
                unknown = signing_key("not-published", "ES256").token({"sub": "x"})
                async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
                    await send(
                        socket,
                        {
                            "type": "connection_init",
                            "payload": {"Authorization": f"Bearer {unknown}"},
                        },
                    )
                    code, _reason = await close_of(socket)
                async with httpx.AsyncClient() as http:
                    ready = (await http.get(f"{url}/readyz")).json()
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)

    assert code == 4403
    assert ready["jwks"] == "ok"
