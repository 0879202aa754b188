"""The HTTP edge's exceptions, each where it is answered:

Exception
├── Refused                  a request answered without running anything: its status, code and
│                            headers (`server.graphql_over_http` writes its answer)
├── JwksUnreadable           a JWKS URL answered no usable key set (`server.jwks` keeps the last)
└── RuntimeError
    └── TokenRefused         a development token `loc-payments token` will not mint, and why
engine.Refusal               an operation refused before it ran (`Hooks.admit`, `Hooks.hold`)
├── Throttled                THROTTLED: over its caller's budget (HTTP 429, `Retry-After`)
└── TooManySubscriptions     TOO_MANY_SUBSCRIPTIONS: over its caller's cap of open subscriptions
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graphql import GraphQLError

from engine import Refusal

__all__ = [
    "TOO_MANY_SUBSCRIPTIONS",
    "JwksUnreadable",
    "Refused",
    "Throttled",
    "TokenRefused",
    "TooManySubscriptions",
]

TOO_MANY_SUBSCRIPTIONS = "TOO_MANY_SUBSCRIPTIONS"


class Refused(Exception):
    """A request answered without running anything: its status (None: a GraphQL request error,
    whose status follows the answer's media type, `request_error_status`), words, code
    (`extensions.code`) and extra headers. The one refusal of the HTTP edge: `server.graphql_view`
    translates the engine's and Strawberry's into it, in one place."""

    def __init__(
        self,
        status: int | None,
        message: str,
        *,
        code: str | None = None,
        allow: str | None = None,
        headers: Mapping[str, str] | None = None,
        error: Mapping[str, object] | None = None,
        extensions: Mapping[str, object] | None = None,
    ) -> None:
        """`error`: the error's whole `extensions` (else `code` alone); `extensions`: the
        answer's."""
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = {**(headers or {}), **({"allow": allow} if allow is not None else {})}
        self.error = error
        self.extensions = extensions


class JwksUnreadable(Exception):
    """A JWKS URL answered no usable set: not reachable, not 200, not a JSON key set."""


class TokenRefused(RuntimeError):
    """A development token not minted (`server.auth.mint_development_token`): the message
    says why."""


class Throttled(Refusal):
    """An operation over its caller's budget: refused before it ran (`server.budgets` words
    its error); `retry_after`, whole seconds, is the answer's `Retry-After`."""

    def __init__(
        self, error: GraphQLError, extensions: dict[str, Any], *, retry_after: int
    ) -> None:
        super().__init__(error, extensions)
        self.retry_after = retry_after


class TooManySubscriptions(Refusal):
    """A subscription over its caller's cap: refused before it started (nothing charged)."""

    def __init__(self, cap: int) -> None:
        error = GraphQLError(
            f"Too many subscriptions: this caller has {cap} open already, the most it may hold; "
            "complete one first",
            extensions={"code": TOO_MANY_SUBSCRIPTIONS, "maxSubscriptions": cap},
        )
        super().__init__(error, {})
