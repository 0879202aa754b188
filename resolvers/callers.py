"""Who is calling: a customer (one user) or a service, read from a bearer JWT (SPEC §7).

A customer reads its own data and creates MANUAL payments on its own loans; a service, whose
`scope` holds `payments:service`, does everything for any user. Another user's data reads as not
found, never as forbidden, so a customer cannot learn what exists.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path

import jwt

SERVICE_SCOPE = "payments:service"


class CallerError(Exception):
    """A refusal about the caller, not the data: reported as `errors[].extensions.code`."""

    code = "UNAUTHENTICATED"


class Unauthenticated(CallerError):
    code = "UNAUTHENTICATED"


class Forbidden(CallerError):
    code = "FORBIDDEN"


@dataclass(frozen=True, slots=True)
class Caller:
    user_id: str
    is_service: bool = False

    def sees(self, user_id: str) -> bool:
        return self.is_service or user_id == self.user_id


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """Verification keys; HS256 with a shared secret, RS256 with a public key, or both."""

    secret: str | None = None
    public_key: str | None = None
    issuer: str | None = None
    audience: str | None = None

    @classmethod
    def build(
        cls,
        *,
        secret: str | None,
        public_key_file: Path | None,
        issuer: str | None,
        audience: str | None,
    ) -> AuthConfig:
        public_key = public_key_file.read_text() if public_key_file is not None else None
        return cls(secret=secret, public_key=public_key, issuer=issuer, audience=audience)


def authenticate(authorization: str | None, config: AuthConfig) -> Caller:
    """The caller named by an `Authorization: Bearer <JWT>` header, or Unauthenticated."""
    if not authorization:
        raise Unauthenticated("an Authorization: Bearer token is required")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("the Authorization header must be 'Bearer <token>'")
    caller, expires = _verified(token.strip(), config)
    # A verified token is remembered, but its expiry is checked on every use.
    if time.time() >= expires:
        raise Unauthenticated("the token is not valid: Signature has expired")
    return caller


# A client sends the same token with every request; verifying its signature once is enough.
@functools.lru_cache(maxsize=4096)
def _verified(token: str, config: AuthConfig) -> tuple[Caller, float]:
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
            # An `aud` claim is checked only when an audience is configured.
            options={"require": ["exp", "sub"], "verify_aud": config.audience is not None},
        )
    except jwt.PyJWTError as error:
        raise Unauthenticated(f"the token is not valid: {error}") from None
    subject = claims["sub"]
    if not isinstance(subject, str) or not subject:
        raise Unauthenticated("the token's subject is not a user id")
    scopes = str(claims.get("scope", "")).split()
    return Caller(user_id=subject, is_service=SERVICE_SCOPE in scopes), float(claims["exp"])
