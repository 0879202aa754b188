import time

import jwt
import pytest
from pydantic import SecretStr

from resolvers.callers import Caller, Unauthenticated
from server.auth import (
    SERVICE_SCOPE,
    AuthConfig,
    TokenRefused,
    authenticate,
    mint_development_token,
)
from server.settings import DEV_JWT_SECRET, Settings

MINTED_AT = 1_000_000


def _bearer(token: str) -> str:
    return f"Bearer {token}"


def test_a_customer_token_round_trips() -> None:
    token = mint_development_token(Settings(), user_id="u-1", ttl_seconds=600, now=MINTED_AT)

    claims = jwt.decode(token, DEV_JWT_SECRET, algorithms=["HS256"], options={"verify_exp": False})

    assert claims == {"sub": "u-1", "iat": MINTED_AT, "exp": MINTED_AT + 600}


def test_a_service_token_carries_the_service_scope() -> None:
    token = mint_development_token(Settings(), user_id="autopay", service=True, now=time.time())

    claims = jwt.decode(token, DEV_JWT_SECRET, algorithms=["HS256"])

    assert claims["scope"] == SERVICE_SCOPE


def test_a_token_carries_the_configured_issuer_and_audience() -> None:
    settings = Settings(auth_jwt_issuer="https://issuer.local", auth_jwt_audience="payments")

    token = mint_development_token(settings, user_id="u-1", now=time.time())

    claims = jwt.decode(
        token,
        DEV_JWT_SECRET,
        algorithms=["HS256"],
        issuer="https://issuer.local",
        audience="payments",
    )
    assert claims["sub"] == "u-1"


def test_tokens_are_refused_for_any_other_secret() -> None:
    with pytest.raises(TokenRefused, match="development secret"):
        mint_development_token(
            Settings(auth_jwt_secret=SecretStr("x" * 40)), user_id="u-1", now=time.time()
        )


async def test_the_time_passed_in_decides_expiry_even_for_a_remembered_token() -> None:
    settings = Settings()
    config = AuthConfig.from_settings(settings)
    token = mint_development_token(
        settings, user_id="svc", service=True, ttl_seconds=60, now=MINTED_AT
    )

    # Accepted, and so remembered: its signature is not checked again.
    assert await authenticate(_bearer(token), config, now=MINTED_AT + 59) == Caller("svc", True)
    with pytest.raises(Unauthenticated, match="Signature has expired"):
        await authenticate(_bearer(token), config, now=MINTED_AT + 60)


async def test_a_token_is_refused_before_it_was_issued() -> None:
    settings = Settings()
    token = mint_development_token(settings, user_id="u-1", now=MINTED_AT)

    with pytest.raises(Unauthenticated, match=r"not yet valid \(iat\)"):
        await authenticate(_bearer(token), AuthConfig.from_settings(settings), now=MINTED_AT - 1)


async def test_an_expiry_that_is_not_a_time_is_refused() -> None:
    token = jwt.encode({"sub": "u-1", "exp": "soon"}, DEV_JWT_SECRET, algorithm="HS256")

    with pytest.raises(Unauthenticated, match=r"Expiration Time claim \(exp\) must be an integer"):
        await authenticate(_bearer(token), AuthConfig.from_settings(Settings()), now=MINTED_AT)
