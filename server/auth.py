"""Who is calling, read from a request's `Authorization: Bearer <JWT>`; and the development
tokens a local server accepts.

A token is signed with HS256 (the shared secret) or RS256 (checked with the public key); a
service's `scope` holds `payments:service`. The signature and claims are verified once and
remembered, since a client sends the same token with every request. The times (`iat`, `nbf`,
`exp`) are checked on every use against the `now` the server passes in, so a remembered token
still expires.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import jwt

from resolvers.callers import Caller, Unauthenticated
from server.settings import Settings

SERVICE_SCOPE = "payments:service"
DEFAULT_TOKEN_TTL_SECONDS = 12 * 60 * 60
# PyJWT's words, so that a refusal reads as it did when PyJWT checked the times itself.
_NOT_AN_INTEGER = {
    "iat": "Issued At claim (iat) must be an integer.",
    "nbf": "Not Before claim (nbf) must be an integer.",
    "exp": "Expiration Time claim (exp) must be an integer.",
}


class TokenRefused(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """Verification keys; HS256 with a shared secret, RS256 with a public key, or both."""

    secret: str | None = None
    public_key: str | None = None
    issuer: str | None = None
    audience: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> AuthConfig:
        secret, key_file = settings.auth_jwt_secret, settings.auth_jwt_public_key_file
        return cls(
            secret=secret.get_secret_value() if secret is not None else None,
            public_key=key_file.read_text() if key_file is not None else None,
            issuer=settings.auth_jwt_issuer,
            audience=settings.auth_jwt_audience,
        )


def authenticate(authorization: str | None, config: AuthConfig, *, now: float) -> Caller:
    """The caller named by an `Authorization: Bearer <JWT>` header at `now` (seconds since the
    epoch), or Unauthenticated."""
    if not authorization:
        raise Unauthenticated("an Authorization: Bearer token is required")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("the Authorization header must be 'Bearer <token>'")
    verified = _verified(token.strip(), config)
    for claim in ("iat", "nbf"):
        if verified.times.get(claim, now) > now:
            raise Unauthenticated(f"the token is not valid: The token is not yet valid ({claim})")
    if verified.times["exp"] <= now:
        raise Unauthenticated("the token is not valid: Signature has expired")
    return verified.caller


def token_expiry(authorization: str, config: AuthConfig) -> int:
    """The `exp` (seconds since the epoch) of the token in a header `authenticate` accepted."""
    return _verified(authorization.partition(" ")[2].strip(), config).times["exp"]


@dataclass(frozen=True, slots=True)
class _Verified:
    caller: Caller
    # The time claims the token carries (`exp` always), in seconds since the epoch.
    times: dict[str, int]


@functools.lru_cache(maxsize=4096)
def _verified(token: str, config: AuthConfig) -> _Verified:
    try:
        algorithm = str(jwt.get_unverified_header(token).get("alg"))
        key = {"HS256": config.secret, "RS256": config.public_key}.get(algorithm)
        if key is None:
            raise Unauthenticated("the token's signing algorithm is not accepted")
        claims = jwt.decode(
            token,
            key,
            algorithms=[algorithm],
            issuer=config.issuer,
            audience=config.audience,
            options={
                "require": ["exp", "sub"],
                # An `aud` claim is checked only when an audience is configured.
                "verify_aud": config.audience is not None,
                # PyJWT would read the system clock, once; `authenticate` checks at every use.
                "verify_iat": False,
                "verify_nbf": False,
                "verify_exp": False,
            },
        )
    except jwt.PyJWTError as error:
        raise Unauthenticated(f"the token is not valid: {error}") from None
    subject = claims["sub"]
    if not isinstance(subject, str) or not subject:
        raise Unauthenticated("the token's subject is not a user id")
    scopes = str(claims.get("scope", "")).split()
    return _Verified(Caller(user_id=subject, is_service=SERVICE_SCOPE in scopes), _times(claims))


def _times(claims: dict[str, Any]) -> dict[str, int]:
    times = {}
    for claim, malformed in _NOT_AN_INTEGER.items():
        if claims.get(claim) is not None:
            try:
                times[claim] = int(claims[claim])
            except (ValueError, TypeError, OverflowError):
                raise Unauthenticated(f"the token is not valid: {malformed}") from None
    return times


def mint_development_token(
    settings: Settings,
    *,
    user_id: str,
    now: float,
    service: bool = False,
    ttl_seconds: int = DEFAULT_TOKEN_TTL_SECONDS,
) -> str:
    """An HS256 token signed with the development secret, valid from `now` (seconds since the
    epoch) for `ttl_seconds`: a local server accepts it.

    Refused for any other secret: a tool that mints tokens for a real key is a way to forge them.
    """
    if not settings.uses_development_jwt_secret or settings.auth_jwt_secret is None:
        raise TokenRefused(
            "tokens are minted only with the development secret (LOC_ENV=local and no "
            "LOC_AUTH_JWT_SECRET / LOC_AUTH_JWT_PUBLIC_KEY_FILE); get real tokens from the issuer"
        )
    if ttl_seconds <= 0:
        raise TokenRefused("--ttl must be a positive number of seconds")
    issued_at = int(now)
    claims: dict[str, object] = {"sub": user_id, "iat": issued_at, "exp": issued_at + ttl_seconds}
    if service:
        claims["scope"] = SERVICE_SCOPE
    # The server checks these when configured, so a token without them would be refused.
    if settings.auth_jwt_issuer is not None:
        claims["iss"] = settings.auth_jwt_issuer
    if settings.auth_jwt_audience is not None:
        claims["aud"] = settings.auth_jwt_audience
    return jwt.encode(claims, settings.auth_jwt_secret.get_secret_value(), algorithm="HS256")
