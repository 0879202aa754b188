import time

import jwt
import pytest
from pydantic import SecretStr

from process.settings import DEV_JWT_SECRET, Settings
from resolvers.callers import Caller
from resolvers.errors import Unauthenticated
from server.auth import (
    SERVICE_SCOPE,
    AuthConfig,
    authenticate,
    mint_development_token,
)
from server.errors import TokenRefused

MINTED_AT = 1_000_000
LEEWAY = 60  # seconds of clock skew allowed, LOC_AUTH_LEEWAY_SECONDS's default


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
    expires = MINTED_AT + 60 + LEEWAY

    # Accepted, and so remembered: its signature is not checked again.
    assert await authenticate(_bearer(token), config, now=expires - 1) == Caller("svc", True)
    with pytest.raises(Unauthenticated, match="Signature has expired"):
        await authenticate(_bearer(token), config, now=expires)


def _signed(**claims: int) -> str:
    return jwt.encode({"sub": "u-1", **claims}, DEV_JWT_SECRET, algorithm="HS256")


@pytest.mark.parametrize("claim", ["iat", "nbf"])
async def test_a_token_from_a_clock_a_little_ahead_is_accepted(claim: str) -> None:
    # The identity provider's clock runs ahead of ours: within the leeway, that is no refusal.
    token = _signed(**{claim: MINTED_AT + 5, "exp": MINTED_AT + 600})

    caller = await authenticate(_bearer(token), AuthConfig.from_settings(Settings()), now=MINTED_AT)

    assert caller == Caller("u-1", False)


@pytest.mark.parametrize("claim", ["iat", "nbf"])
async def test_a_token_from_beyond_the_leeway_is_refused(claim: str) -> None:
    token = _signed(**{claim: MINTED_AT + LEEWAY + 1, "exp": MINTED_AT + 600})

    with pytest.raises(Unauthenticated, match=rf"not yet valid \({claim}\)"):
        await authenticate(_bearer(token), AuthConfig.from_settings(Settings()), now=MINTED_AT)


async def test_a_token_just_expired_is_accepted_within_the_leeway_and_refused_beyond() -> None:
    config = AuthConfig.from_settings(Settings())
    just_expired = _signed(iat=MINTED_AT - 600, exp=MINTED_AT - 5)
    long_expired = _signed(iat=MINTED_AT - 600, exp=MINTED_AT - LEEWAY - 1)

    assert await authenticate(_bearer(just_expired), config, now=MINTED_AT) == Caller("u-1", False)
    with pytest.raises(Unauthenticated, match="Signature has expired"):
        await authenticate(_bearer(long_expired), config, now=MINTED_AT)


async def test_the_leeway_is_a_setting() -> None:
    config = AuthConfig.from_settings(Settings(auth_leeway_seconds=0))
    ahead = _signed(iat=MINTED_AT + 1, exp=MINTED_AT + 600)
    expired = _signed(exp=MINTED_AT)

    for token in (ahead, expired):
        with pytest.raises(Unauthenticated):
            await authenticate(_bearer(token), config, now=MINTED_AT)
    assert AuthConfig().leeway_seconds == Settings().auth_leeway_seconds == LEEWAY


async def test_an_expiry_that_is_not_a_time_is_refused() -> None:
    token = jwt.encode({"sub": "u-1", "exp": "soon"}, DEV_JWT_SECRET, algorithm="HS256")

    with pytest.raises(Unauthenticated, match=r"Expiration Time claim \(exp\) must be an integer"):
        await authenticate(_bearer(token), AuthConfig.from_settings(Settings()), now=MINTED_AT)
