"""Who is calling, read from a request's `Authorization: Bearer <JWT>`; and the development
tokens a local server accepts.

`authenticate` verifies a token with the key its `kid` names among an identity provider's keys
(`server.jwks`), under that key's own algorithm only, or with HS256 or RS256 as configured
(`AuthConfig`), and answers the caller: the user (`LOC_AUTH_USER_CLAIM`), or a service, a
federation gateway or an operator of webhooks by its scopes; else `TokenRefused`. Signature and
claims are verified once and remembered with the keys' generation; the times (`iat`, `nbf`,
`exp`) are checked on every use against the `now` passed in, with `LOC_AUTH_LEEWAY_SECONDS` of
leeway (`token_expiry`: when a WebSocket is closed). `mint_development_token` makes a local
server's tokens.

Why: docs/callers-and-errors.md#callers.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import jwt

from process.settings import Settings
from resolvers.callers import Caller
from resolvers.errors import Unauthenticated
from server.errors import TokenRefused
from server.jwks import JwksKeys, JwksPolicy

__all__ = [
    "DEFAULT_TOKEN_TTL_SECONDS",
    "SERVICE_SCOPE",
    "WEBHOOKS_ADMIN_SCOPE",
    "AuthConfig",
    "authenticate",
    "mint_development_token",
    "token_expiry",
]

SERVICE_SCOPE = "payments:service"
GATEWAY_SCOPE = "payments:gateway"
WEBHOOKS_ADMIN_SCOPE = "payments:webhooks-admin"
DEFAULT_TOKEN_TTL_SECONDS = 12 * 60 * 60
# PyJWT's words, so that a refusal reads as it did when PyJWT checked the times itself.
_NOT_AN_INTEGER = {
    "iat": "Issued At claim (iat) must be an integer.",
    "nbf": "Not Before claim (nbf) must be an integer.",
    "exp": "Expiration Time claim (exp) must be an integer.",
}


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """Verification keys (an identity provider's JWKS, a shared secret for HS256, a public key
    for RS256: any of them) and how claims are read."""

    secret: str | None = None
    public_key: str | None = None
    issuer: str | None = None
    audience: str | None = None
    jwks: JwksKeys | None = None
    user_claim: str = "sub"
    service_scope: str = SERVICE_SCOPE
    gateway_scope: str = GATEWAY_SCOPE
    webhooks_admin_scope: str = WEBHOOKS_ADMIN_SCOPE
    # Accepted app clients (Cognito): a token's `client_id`, or its `aud`, must be one.
    client_ids: tuple[str, ...] = ()
    # Clock skew allowed on `iat`, `nbf` and `exp`, in seconds.
    leeway_seconds: float = 60.0

    @classmethod
    def from_settings(cls, settings: Settings) -> AuthConfig:
        secret, key_file = settings.auth_jwt_secret, settings.auth_jwt_public_key_file
        jwks = None
        if settings.auth_jwks_url:
            policy = JwksPolicy(
                min_cache_seconds=settings.auth_jwks_cache_min_seconds,
                max_cache_seconds=settings.auth_jwks_cache_max_seconds,
                refresh_interval=settings.auth_jwks_refresh_interval,
                timeout=settings.auth_jwks_timeout,
            )
            jwks = JwksKeys(settings.auth_jwks_url, policy)
        return cls(
            secret=secret.get_secret_value() if secret is not None else None,
            public_key=key_file.read_text() if key_file is not None else None,
            issuer=settings.auth_jwt_issuer,
            audience=settings.auth_jwt_audience,
            jwks=jwks,
            user_claim=settings.auth_user_claim,
            service_scope=settings.auth_service_scope,
            gateway_scope=settings.auth_gateway_scope,
            webhooks_admin_scope=settings.auth_webhooks_admin_scope,
            client_ids=settings.auth_jwt_client_ids,
            leeway_seconds=settings.auth_leeway_seconds,
        )


async def authenticate(authorization: str | None, config: AuthConfig, *, now: float) -> Caller:
    """The caller named by an `Authorization: Bearer <JWT>` header at `now` (seconds since the
    epoch), or Unauthenticated. A token whose `kid` is not among the provider's keys waits for
    the set to be read again (`JwksKeys.refresh_for`: at most its timeout)."""
    if not authorization:
        raise Unauthenticated("an Authorization: Bearer token is required")
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthenticated("the Authorization header must be 'Bearer <token>'")
    if config.jwks is not None:
        kid = _header(token).get("kid")
        if isinstance(kid, str) and config.jwks.get(kid) is None:
            await config.jwks.refresh_for(kid)
    verified = _verified(token, config, _generation(config))
    for claim in ("iat", "nbf"):
        if verified.times.get(claim, now) > now + config.leeway_seconds:
            raise Unauthenticated(f"the token is not valid: The token is not yet valid ({claim})")
    if _expiry(verified, config) <= now:
        raise Unauthenticated("the token is not valid: Signature has expired")
    return verified.caller


def token_expiry(authorization: str, config: AuthConfig) -> float:
    """When (seconds since the epoch) `authenticate` stops accepting the token in a header it
    accepted: its `exp` plus the leeway."""
    token = authorization.partition(" ")[2].strip()
    return _expiry(_verified(token, config, _generation(config)), config)


def _expiry(verified: _Verified, config: AuthConfig) -> float:
    return verified.times["exp"] + config.leeway_seconds


def _generation(config: AuthConfig) -> int:
    return 0 if config.jwks is None else config.jwks.generation


def _header(token: str) -> dict[str, Any]:
    try:
        header: dict[str, Any] = jwt.get_unverified_header(token)
    except jwt.PyJWTError as error:
        raise Unauthenticated(f"the token is not valid: {error}") from None
    return header


@dataclass(frozen=True, slots=True)
class _Verified:
    caller: Caller
    # The time claims the token carries (`exp` always), in seconds since the epoch.
    times: dict[str, int]


@functools.lru_cache(maxsize=4096)
def _verified(token: str, config: AuthConfig, generation: int) -> _Verified:
    """The token verified with the provider's keys of `generation` (part of the cache's key)."""
    del generation
    header = _header(token)
    kid, algorithm = header.get("kid"), str(header.get("alg"))
    key: Any
    published = config.jwks.get(kid) if config.jwks is not None and isinstance(kid, str) else None
    if published is not None:
        # The key's own algorithm, never the header's choice (PyJWT checks the two agree).
        key, algorithms = published, [published.algorithm_name]
    elif algorithm == "HS256" and config.secret is not None:
        key, algorithms = config.secret, [algorithm]
    elif algorithm == "RS256" and config.public_key is not None:
        key, algorithms = config.public_key, [algorithm]
    elif config.jwks is not None and isinstance(kid, str):
        raise Unauthenticated("the token's key is not among the identity provider's keys")
    else:
        raise Unauthenticated("the token's signing algorithm is not accepted")
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=algorithms,
            issuer=config.issuer,
            audience=config.audience,
            options={
                "require": ["exp", config.user_claim],
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
    if config.client_ids and not _client_accepted(claims, config.client_ids):
        raise Unauthenticated("the token's client is not accepted")
    subject = claims[config.user_claim]
    if not isinstance(subject, str) or not subject:
        raise Unauthenticated("the token's subject is not a user id")
    scopes = _scopes(claims)
    client_id = claims.get("azp", claims.get("client_id"))
    caller = Caller(
        user_id=subject,
        is_service=config.service_scope in scopes,
        is_gateway=config.gateway_scope in scopes,
        client_id=client_id if isinstance(client_id, str) and client_id else None,
        is_webhooks_admin=config.webhooks_admin_scope in scopes,
    )
    return _Verified(caller, _times(claims))


def _scopes(claims: dict[str, Any]) -> set[str]:
    """`scope` (space separated, OAuth's) and `scp` (an array, Okta's and Entra's; or a string)."""
    scopes: set[str] = set()
    for claim in ("scope", "scp"):
        value = claims.get(claim)
        if isinstance(value, str):
            scopes.update(value.split())
        elif isinstance(value, list):
            scopes.update(item for item in value if isinstance(item, str))
    return scopes


def _client_accepted(claims: dict[str, Any], client_ids: tuple[str, ...]) -> bool:
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    return claims.get("client_id") in client_ids or any(a in client_ids for a in audiences)


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
    webhooks_admin: bool = False,
    ttl_seconds: int = DEFAULT_TOKEN_TTL_SECONDS,
) -> str:
    """An HS256 token signed with the development secret, valid from `now` (seconds since the
    epoch) for `ttl_seconds`, of a service and/or an operator of webhooks (their scopes) or a
    customer: a local server accepts it.

    Refused for any other secret: a tool that mints tokens for a real key is a way to forge them.
    """
    if settings.auth_jwks_url:
        raise TokenRefused(
            "tokens come from the identity provider that LOC_AUTH_JWKS_URL names, not from "
            "this command: get them from that provider"
        )
    if not settings.uses_development_jwt_secret or settings.auth_jwt_secret is None:
        raise TokenRefused(
            "tokens are minted only with the development secret (LOC_ENV=local and no "
            "LOC_AUTH_JWT_SECRET / LOC_AUTH_JWT_PUBLIC_KEY_FILE / LOC_AUTH_JWKS_URL); get real "
            "tokens from the issuer"
        )
    if ttl_seconds <= 0:
        raise TokenRefused("--ttl must be a positive number of seconds")
    issued_at = int(now)
    claims: dict[str, object] = {
        settings.auth_user_claim: user_id,
        "iat": issued_at,
        "exp": issued_at + ttl_seconds,
    }
    scopes = [settings.auth_service_scope] if service else []
    if webhooks_admin:
        scopes.append(settings.auth_webhooks_admin_scope)
    if scopes:
        claims["scope"] = " ".join(scopes)
    # The server checks these when configured, so a token without them would be refused.
    if settings.auth_jwt_issuer is not None:
        claims["iss"] = settings.auth_jwt_issuer
    if settings.auth_jwt_audience is not None:
        claims["aud"] = settings.auth_jwt_audience
    return jwt.encode(claims, settings.auth_jwt_secret.get_secret_value(), algorithm="HS256")
