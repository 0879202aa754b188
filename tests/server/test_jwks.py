"""Tokens from an identity provider's JWKS (SPEC §7, `server.jwks`, `server.auth`), against a
loopback JWKS server the test controls: the kid picks the key and the key its algorithm, a key
published after start is taken without a restart and a removed one stops working, unknown kids
do not flood the provider, and an outage or a broken answer locks no known key out and hangs no
request."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID

from resolvers.callers import Caller
from resolvers.errors import Unauthenticated
from server.auth import AuthConfig, authenticate
from server.jwks import MAX_BODY_BYTES, JwksKeys, JwksPolicy, jwks_reading
from tests.eventually import eventually
from tests.server.jwks_server import JwksServer, SigningKey, jwks_server, signing_key

# Short, so that the tests wait little: reads at most every 0.2 s, each given 0.5 s.
POLICY = JwksPolicy(min_cache_seconds=0.2, max_cache_seconds=0.5, refresh_interval=0.2, timeout=0.5)
RSA = signing_key("rsa-1", "RS256")
KEYS = [
    RSA,
    signing_key("ps-1", "PS256"),
    signing_key("ec-1", "ES256"),
    signing_key("ed-1", "EdDSA"),
]


def bearer(token: str) -> str:
    return f"Bearer {token}"


class Clock:
    """The keys' clock, which says when an unknown kid may read the set again."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def provider_config(
    server: JwksServer,
    policy: JwksPolicy = POLICY,
    *,
    clock: Callable[[], float] = time.monotonic,
    **config: Any,
) -> AsyncIterator[AuthConfig]:
    """The service's config on `server`'s keys, read in the background as the app reads them."""
    keys = JwksKeys([server.url], policy, clock=clock)
    async with jwks_reading(keys):
        yield AuthConfig(jwks=keys, **config)


def keys_of(config: AuthConfig) -> JwksKeys:
    assert config.jwks is not None
    return config.jwks


async def check(config: AuthConfig, token: str) -> Caller:
    return await authenticate(bearer(token), config, now=time.time())


async def accepted(config: AuthConfig, token: str) -> bool:
    try:
        await check(config, token)
    except Unauthenticated:
        return False
    return True


def state_of(keys: JwksKeys) -> str:
    return keys.state


@pytest.fixture
def published() -> Iterator[JwksServer]:
    with jwks_server(*KEYS) as server:
        yield server


@pytest.mark.parametrize("key", KEYS, ids=[key.algorithm for key in KEYS])
async def test_a_token_of_each_key_type_is_verified_by_its_kid(
    published: JwksServer, key: SigningKey
) -> None:
    async with provider_config(published) as config:
        assert await check(config, key.token({"sub": "user-1"})) == Caller("user-1", False)


def _unsigned(header: dict[str, Any], claims: dict[str, Any]) -> str:
    return _b64(header | {"alg": "none"}) + "." + _b64(claims) + "."


def _b64(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


async def test_the_algorithm_is_the_keys_never_the_tokens(published: JwksServer) -> None:
    claims = {"sub": "mallory", "exp": int(time.time()) + 600, "scope": "payments:service"}
    public_pem = RSA.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    forged = {
        # The RSA key's kid, signed with the RSA key but under PS256: another algorithm.
        "another algorithm for the key": RSA.token(claims, algorithm="PS256"),
        # The classic confusion: HS256 with the public key as the shared secret.
        "HS256 keyed with the public key": _hs256_with(public_pem, claims, RSA.kid),
        "alg none": _unsigned({"kid": RSA.kid, "typ": "JWT"}, claims),
        "an ES256 signature under the RSA key's kid": signing_key(RSA.kid, "ES256").token(claims),
    }
    async with provider_config(published) as config:
        assert await check(config, RSA.token({"sub": "user-1"}))  # the key itself works
        for what, token in forged.items():
            with pytest.raises(Unauthenticated):
                await check(config, token)
                pytest.fail(f"accepted: {what}")


def _hs256_with(secret: bytes, claims: dict[str, Any], kid: str) -> str:
    """An HS256 token keyed with `secret`, signed by hand (PyJWT refuses a PEM as an HMAC key)."""
    signing_input = _b64({"alg": "HS256", "typ": "JWT", "kid": kid}) + "." + _b64(claims)
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + base64.urlsafe_b64encode(signature).decode().rstrip("=")


async def test_a_key_published_after_start_is_accepted_and_a_removed_one_stops_working(
    published: JwksServer,
) -> None:
    new = signing_key("rsa-2", "RS256")
    async with provider_config(published) as config:
        old_token = RSA.token({"sub": "user-1"})
        assert await check(config, old_token)
        with pytest.raises(Unauthenticated):
            await check(config, new.token({"sub": "user-2"}))  # not published yet

        published.published.keys = [new.jwk]  # the provider rotates: rsa-1 out, rsa-2 in
        # Its kid unknown, a token reads the set again (once an interval has passed since the
        # last read): until a read after the rotation.
        await eventually(
            lambda: accepted(config, new.token({"sub": "user-2"})), what="rsa-2 accepted"
        )
        assert await check(config, new.token({"sub": "user-2"})) == Caller("user-2", False)
        # The read that found rsa-2 dropped rsa-1: its token, verified before, is refused now.
        with pytest.raises(Unauthenticated, match="not among the identity provider's keys"):
            await check(config, old_token)


async def test_a_flood_of_unknown_kids_reads_the_set_at_most_once_per_interval(
    published: JwksServer,
) -> None:
    slow = JwksPolicy(min_cache_seconds=60, max_cache_seconds=60, refresh_interval=30, timeout=1)
    async with provider_config(published, slow) as config:
        await check(config, RSA.token({"sub": "user-1"}))
        before = published.published.requests
        flood = [signing_key(f"random-{n}", "ES256").token({"sub": "mallory"}) for n in range(100)]
        results = await asyncio.gather(*(check(config, t) for t in flood), return_exceptions=True)

    assert all(isinstance(result, Unauthenticated) for result in results)
    assert published.published.requests - before <= 1


async def test_unknown_kids_one_after_another_read_the_set_at_most_once_per_interval(
    published: JwksServer,
) -> None:
    slow = JwksPolicy(min_cache_seconds=60, max_cache_seconds=60, refresh_interval=30, timeout=1)
    async with provider_config(published, slow) as config:
        await check(config, RSA.token({"sub": "user-1"}))
        before = published.published.requests
        for _ in range(50):
            # Anyone can send these: a random kid, no signature at all.
            claims = {"sub": "mallory", "exp": int(time.time()) + 600}
            with pytest.raises(Unauthenticated):
                await check(config, _unsigned({"kid": str(uuid.uuid4())}, claims))

    assert published.published.requests - before <= 1


async def test_while_the_jwks_is_down_known_keys_work_and_unknown_kids_fail_fast(
    published: JwksServer,
) -> None:
    async with provider_config(published) as config:
        assert await check(config, RSA.token({"sub": "user-1"}))
        published.stop()
        keys = keys_of(config)
        await eventually(lambda: keys.state == "unavailable", what="a read failing")

        assert await check(config, KEYS[2].token({"sub": "user-2"})) == Caller("user-2", False)
        started = time.monotonic()
        with pytest.raises(Unauthenticated):
            await check(config, signing_key("new-1", "ES256").token({"sub": "user-3"}))
        assert time.monotonic() - started < POLICY.timeout + 1.0

        published.start()
        await eventually(lambda: state_of(keys) == "ok", what="a read succeeding again")


async def test_a_jwks_that_takes_30_seconds_hangs_no_request(published: JwksServer) -> None:
    clock = Clock()
    async with provider_config(published, clock=clock) as config:
        await check(config, RSA.token({"sub": "user-1"}))
        published.published.delay = 30.0
        clock.now += POLICY.refresh_interval  # an unknown kid may read the set again
        started = time.monotonic()
        with pytest.raises(Unauthenticated):
            await check(config, signing_key("new-1", "ES256").token({"sub": "user-3"}))
        waited = time.monotonic() - started
        assert await check(config, RSA.token({"sub": "user-1"}))  # known keys still work
        published.published.delay = 0.0

    assert waited < POLICY.timeout + 1.0


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"<html><body>Sign in</body></html>", "text/html"),
        (b"\x00\x01 not json", "application/json"),
        (b'{"keys": "none"}', "application/json"),
    ],
    ids=["html", "garbage", "not-a-key-set"],
)
async def test_a_broken_answer_keeps_the_service_answering(body: bytes, content_type: str) -> None:
    with jwks_server() as server:
        server.published.body, server.published.content_type = body, content_type
        async with provider_config(server) as config:
            with pytest.raises(Unauthenticated):
                await check(config, RSA.token({"sub": "user-1"}))
            assert config.jwks is not None and config.jwks.state == "unavailable"


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_set_sent_in_pieces_is_read_whole(chunked: bool) -> None:
    with jwks_server(RSA) as server:
        server.published.pieces, server.published.pause = 2, 0.05
        server.published.chunked = chunked
        async with provider_config(server) as config:
            assert await check(config, RSA.token({"sub": "user-1"})) == Caller("user-1", False)


async def test_a_set_of_a_megabyte_with_certificate_chains_is_read_whole() -> None:
    # Entra ID and Keycloak publish each key's `x5c` chain: many keys make a large set.
    chain = _certificate_chain(RSA)
    padding = [{**RSA.jwk, "kid": f"old-{n}", "x5c": chain} for n in range(400)]
    with jwks_server() as server:
        server.published.keys = [*padding, {**RSA.jwk, "x5c": chain}]
        size = len(json.dumps({"keys": server.published.keys}))
        async with provider_config(server) as config:
            assert await check(config, RSA.token({"sub": "user-1"})) == Caller("user-1", False)
            assert config.jwks is not None and len(config.jwks) == 401
    assert 900_000 < size < MAX_BODY_BYTES


def _certificate_chain(key: SigningKey, length: int = 3) -> list[str]:
    """`length` base64 DER certificates of `key` (self-signed: the size is the point)."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "idp.test")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key.private, hashes.SHA256())
    )
    der = certificate.public_bytes(serialization.Encoding.DER)
    return [base64.b64encode(der).decode()] * length


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_set_over_the_limit_is_refused_and_the_last_keys_kept(chunked: bool) -> None:
    with jwks_server(RSA) as server:
        async with provider_config(server) as config:
            assert await check(config, RSA.token({"sub": "user-1"}))
            server.published.chunked = chunked
            server.published.body = b'{"keys": [' + b" " * MAX_BODY_BYTES + b"]}"
            keys = keys_of(config)
            reads = keys.reads
            await eventually(lambda: keys.state == "unavailable", what="a read refused")
            assert keys.reads > reads
            assert await check(config, RSA.token({"sub": "user-1"})) == Caller("user-1", False)


async def test_a_key_of_an_unsupported_type_is_skipped_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    unsupported = {"kty": "XYZ", "kid": "odd-1", "use": "sig", "x": "AAAA"}
    with jwks_server(RSA) as server:
        server.published.keys.append(unsupported)
        with caplog.at_level(logging.WARNING, logger="loc_payments.auth"):
            async with provider_config(server) as config:
                assert await check(config, RSA.token({"sub": "user-1"}))
                keys = keys_of(config)
                await eventually(lambda: keys.reads >= 3, what="several reads")

    skipped = [r for r in caplog.records if "odd-1" in r.getMessage()]
    assert len(skipped) == 1, [r.getMessage() for r in skipped]


@pytest.mark.parametrize(
    ("cache_control", "expected"),
    [("max-age=0", 0.2), ("public, max-age=3600", 0.5), ("max-age=0.3x", 0.2), (None, 0.2)],
)
async def test_keys_are_kept_as_cache_control_says_within_the_floor_and_ceiling(
    cache_control: str | None, expected: float
) -> None:
    with jwks_server(RSA) as server:
        server.published.cache_control = cache_control
        keys = JwksKeys([server.url], POLICY)
        async with jwks_reading(keys):
            deadline = time.monotonic() + 5
            while keys.next_read_in is None:
                assert time.monotonic() < deadline, "no read was scheduled"
                await asyncio.sleep(0.01)
    assert keys.next_read_in == expected


async def test_scopes_and_the_user_come_from_the_claims_providers_write(
    published: JwksServer,
) -> None:
    key = KEYS[2]
    async with provider_config(published, user_claim="uid", client_ids=("app-1",)) as config:
        okta = key.token(
            {"uid": "svc-1", "scp": ["payments:read", "payments:service"], "aud": "app-1"}
        )
        cognito = key.token({"uid": "u-7", "client_id": "app-1", "scope": "openid"})
        another_client = key.token({"uid": "u-8", "client_id": "app-2"})
        without_user = key.token({"sub": "u-9", "client_id": "app-1"})

        assert await check(config, okta) == Caller("svc-1", True)
        # Cognito names the app in `client_id`, which the budgets charge (SPEC §21).
        assert await check(config, cognito) == Caller("u-7", False, client_id="app-1")
        with pytest.raises(Unauthenticated, match="client is not accepted"):
            await check(config, another_client)
        with pytest.raises(Unauthenticated):
            await check(config, without_user)


async def test_issuer_and_audience_are_checked_when_set(published: JwksServer) -> None:
    key = KEYS[3]
    async with provider_config(published, issuer="https://idp.test", audience="payments") as config:
        good = key.token({"sub": "u", "iss": "https://idp.test", "aud": "payments"})
        assert await check(config, good) == Caller("u", False)
        for claims in (
            {"sub": "u", "iss": "https://evil.test", "aud": "payments"},
            {"sub": "u", "iss": "https://idp.test", "aud": "another"},
            {"sub": "u", "iss": "https://idp.test"},
        ):
            with pytest.raises(Unauthenticated):
                await check(config, key.token(claims))


async def test_a_malformed_token_is_unauthenticated(published: JwksServer) -> None:
    async with provider_config(published) as config:
        for token in ("not-a-jwt", "a.b.c", str(uuid.uuid4()), "eyJhbGciOi.x.y"):
            with pytest.raises(Unauthenticated):
                await check(config, token)
