"""A real OpenID provider (npm `oidc-provider`, pinned by `identity-provider/package-lock.json`)
in front of a real `python -m cli serve` (SPEC §7): a service's token by the client-credentials
grant, a customer's by the authorization-code grant with PKCE, both JWT access tokens checked
by the provider's JWKS with its issuer and audience; and the provider rotating its keys without
the service restarting: the new key's tokens are accepted, the removed key's refused."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from harness.processes import Process
from tests.api.conftest import error_codes, without_cost
from tests.backends import Backend, fresh_table
from tests.servers import served

pytestmark = pytest.mark.ddblocal

REPO = Path(__file__).resolve().parents[2]
PROVIDER = REPO / "tools" / "identity-provider"
RESOURCE = "urn:loc-payments"
LOAN = '{ loan(loanId: "loan-1") { userId loanId } }'
BY_STATUS = "{ paymentsByStatus(status: RETRY) { edges { cursor } } }"


def private_jwk(kid: str, algorithm: str) -> dict[str, Any]:
    if algorithm == "ES256":
        exported = ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP256R1()), as_dict=True)
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        exported = RSAAlgorithm.to_jwk(key, as_dict=True)
    return {**exported, "kid": kid, "alg": algorithm, "use": "sig"}


@contextlib.contextmanager
def identity_provider(keys_file: Path) -> Iterator[Process]:
    process = Process("oidc-provider", ["node", PROVIDER / "provider.mjs", "{port}", keys_file])
    process.start()
    process.wait_listening()
    try:
        yield process
    finally:
        process.stop()


def service_token(issuer: str) -> str:
    answer = httpx.post(
        f"{issuer}/token",
        auth=("autopay", "autopay-secret"),
        data={
            "grant_type": "client_credentials",
            "scope": "payments:service",
            "resource": RESOURCE,
        },
    )
    answer.raise_for_status()
    token: str = answer.json()["access_token"]
    return token


def customer_token(issuer: str, user: str) -> str:
    """The authorization-code grant with PKCE, through the provider's development login, as a
    customer's browser would go through it."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    challenge = base64.urlsafe_b64encode(digest).decode().rstrip("=")
    callback = f"{issuer}/callback"
    with httpx.Client(base_url=issuer) as browser:
        answer = browser.get(
            "/auth",
            params={
                "client_id": "web",
                "response_type": "code",
                "scope": "openid payments:read",
                "redirect_uri": callback,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "resource": RESOURCE,
                "state": "s",
            },
        )
        for _ in range(10):
            location = answer.headers.get("location", "")
            if location.startswith(callback):
                break
            if answer.is_redirect:
                answer = browser.get(location)
                continue
            page = answer.text
            action = re.search(r'action="([^"]+)"', page)
            assert action is not None, page
            fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page))
            if 'name="login"' in page:
                fields |= {"login": user, "password": "any"}
            answer = browser.post(action.group(1), data=fields)
        code = parse_qs(urlsplit(location).query)["code"][0]
        tokens = browser.post(
            "/token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": callback,
                "client_id": "web",
                "code_verifier": verifier,
                "resource": RESOURCE,
            },
        )
    tokens.raise_for_status()
    token: str = tokens.json()["access_token"]
    return token


async def ask(url: str, query: str, token: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"{url}/graphql", json={"query": query}, headers={"Authorization": f"Bearer {token}"}
        )
    body: dict[str, Any] = answer.json()
    return body


async def test_tokens_from_a_real_provider_and_a_rotation_without_a_restart(
    ddblocal_backend: Backend, tmp_path: Path
) -> None:
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(json.dumps([private_jwk("first", "ES256")]))
    table_name = await fresh_table(ddblocal_backend)
    try:
        with identity_provider(keys_file) as provider:
            issuer = f"http://127.0.0.1:{provider.port}"
            async with served(
                ddblocal_backend.endpoint_url,
                table_name,
                auth_jwks_url=f"{issuer}/jwks",
                auth_jwt_issuer=issuer,
                auth_jwt_audience=RESOURCE,
                auth_jwks_refresh_interval="0.5",
            ) as [url]:
                old_service = service_token(issuer)
                customer = customer_token(issuer, "user-1")
                before = [
                    await ask(url, BY_STATUS, old_service),
                    await ask(url, LOAN, customer),
                    await ask(url, BY_STATUS, customer),
                ]

                # Rotation: the provider restarts signing with a new RS256 key, the old one gone.
                keys_file.write_text(json.dumps([private_jwk("second", "RS256")]))
                provider.kill()
                provider.start()
                provider.wait_listening()
                new_service = service_token(issuer)
                after = [await ask(url, BY_STATUS, new_service), await ask(url, LOAN, old_service)]
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)

    assert without_cost(before[0]) == {"data": {"paymentsByStatus": {"edges": []}}}
    assert without_cost(before[1]) == {"data": {"loan": {"userId": "user-1", "loanId": "loan-1"}}}
    assert error_codes(before[2]) == ["FORBIDDEN"]
    assert without_cost(after[0]) == {"data": {"paymentsByStatus": {"edges": []}}}
    assert error_codes(after[1]) == ["UNAUTHENTICATED"]
