"""The per-request context every resolver receives (`strawberry.Info[Context, None]`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from datasource import CallCount, PaymentStore
from domain.audit import Actor, ActorKind
from domain.enums import PaymentStatus
from domain.errors import InvalidInput
from domain.webhooks import EventsPolicy
from resolvers.callers import Caller
from resolvers.errors import CallerError, Forbidden
from resolvers.loaders import Loaders

if TYPE_CHECKING:
    from opentelemetry.context import Context as TraceContext
    from opentelemetry.trace import Span, Tracer

    from resolvers.event_hub import EventHub

__all__ = ["Context"]


@dataclass
class Context:
    store: PaymentStore
    max_attempts: int
    clock: Callable[[], datetime]
    # The caller, or why there is none; raised only when a field needs a caller, so
    # introspection and GraphiQL work without a token.
    authenticated: Caller | CallerError
    # Sent by the federation gateway, proven by its own token (SPEC §15): its text runs, and
    # `authenticated` is the client it forwarded.
    from_gateway: bool = False
    debug_dynamodb: bool = False
    # Every read strongly consistent (the `strong_reads` setting); otherwise only the reads
    # that decide a write or must see one (`Loaders.read_strongly`).
    strong_reads: bool = False
    request_id: str = ""
    # Who sent the operation, for the field-usage metric: the `apollographql-client-name` (and
    # `-version`) headers, or the manifest of the trusted document it named.
    client: str | None = None
    # What the operation did, for its request log line, metrics and audit: the DynamoDB calls,
    # the status moves it wrote ((None, PENDING) for a creation), the UserError codes it answered.
    calls: CallCount | None = None
    writes: list[tuple[PaymentStatus | None, PaymentStatus]] = field(default_factory=list)
    user_errors: list[str] = field(default_factory=list)
    # Its cost charged to the caller's budget (`server.budgets`): (requested, actual); and the
    # least it is charged, whatever it selects (its text's first parse here, `first_parse`).
    cost: tuple[int, int] | None = None
    least_cost: int = 0
    # Over WebSocket: this instance's live events, `connection_init`'s payload (set by
    # Strawberry), and how a subscription closes its connection (a subscriber too slow).
    live: EventHub | None = None
    connection_params: dict[str, Any] | None = None
    close_connection: Callable[[int, str], Awaitable[None]] | None = None
    # Traces (`schema.tracing`), when the store has a tracer: the caller's trace (W3C
    # `traceparent`, from the request or `connection_init`'s payload) and the operation's span.
    trace_parent: TraceContext | None = None
    span: Span | None = None
    # What the events fields (webhooks, the feed) follow: SPEC §18.
    events: EventsPolicy = field(default_factory=EventsPolicy)

    @functools.cached_property
    def loaders(self) -> Loaders:
        """The request's DataLoaders, made when it first reads: a request refused before it
        runs (over its budget, invalid) makes none."""
        return Loaders(self.store, consistent=self.strong_reads)

    def fresh(self) -> Context:
        """A context for one more operation on the same connection: its own loaders (no reads
        cached by an earlier operation), its own record of what it did and its own span."""
        return dataclasses.replace(
            self, calls=None, writes=[], user_errors=[], cost=None, least_cost=0, span=None
        )

    @property
    def tracer(self) -> Tracer | None:
        """The process's tracer; None when tracing is off (or for a store without one: the
        tests' stand-ins)."""
        tracer: Tracer | None = getattr(self.store, "tracer", None)
        return tracer

    @property
    def caller_kind(self) -> str:
        if isinstance(self.authenticated, CallerError):
            return "anonymous"
        return "service" if self.authenticated.is_service else "customer"

    def caller(self) -> Caller:
        if isinstance(self.authenticated, CallerError):
            raise self.authenticated
        return self.authenticated

    def service(self) -> Caller:
        caller = self.caller()
        if not caller.is_service:
            raise Forbidden("this field is for services only")
        return caller

    def actor(self) -> Actor:
        """Who the audit trail names for this request's writes."""
        caller = self.caller()
        kind = ActorKind.SERVICE if caller.is_service else ActorKind.CUSTOMER
        return Actor(kind, caller.user_id, self.request_id or None)

    def owner(self, user_id: str | None) -> str:
        """The user a request is about: a customer's own by default; a service must say.

        Not checked here: it is checked with the rest of the key it is part of (`PaymentRef`,
        `LoanRef`, `new_payment`).
        """
        caller = self.caller()
        if user_id is None:
            if caller.is_service:
                raise InvalidInput("userId", "is required when a service calls")
            return caller.user_id
        return user_id
