"""Who made a write, and the audit log line of every write.

The history of record is the stored events (`domain.history`), written in the write's own
transaction; the log line, on its own logger, carries the same facts to the log pipeline: which
payment, from which status to which, why, who (the actor's kind and id), when, and the version
the write produced. Every write emits both through `resolvers.workflow`, but the demonstration
data's, which a local start logs as one line (`unlogged`). An operator's change to a webhook
endpoint that is not its own client's is a line too (`audit_endpoint_change`), once it is made.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from domain.payment import Payment
from domain.validation import format_timestamp

__all__ = [
    "Actor",
    "ActorKind",
    "EndpointChange",
    "audit_endpoint_change",
    "audit_write",
    "unlogged",
]

audit_log = logging.getLogger("loc_payments.audit")

# Set only inside `unlogged()`: a context variable, so that it quiets the task that set it (and
# the tasks it starts), never a request served meanwhile.
_unlogged: ContextVar[bool] = ContextVar("unlogged_writes", default=False)


@contextlib.contextmanager
def unlogged() -> Iterator[None]:
    """The writes made inside emit no audit log line; their history is stored as always.

    For the demonstration data of a local start, which would otherwise print some forty lines
    ahead of what a person needs to read (`server.demo_data` says what it wrote in one)."""
    token = _unlogged.set(True)
    try:
        yield
    finally:
        _unlogged.reset(token)


class ActorKind(StrEnum):
    CUSTOMER = "customer"
    SERVICE = "service"
    # The service's own jobs: the collection run, the demonstration data.
    JOB = "job"


@dataclass(frozen=True, slots=True)
class Actor:
    """Who writes: a caller of the API (its token's `sub`) or a job, and the request if any."""

    kind: ActorKind
    id: str
    request_id: str | None = None


def audit_write(before: Payment | None, after: Payment, actor: Actor) -> None:
    if _unlogged.get():
        return
    event = "payment.created" if before is None else "payment.transitioned"
    audit_log.info(
        "%s %s/%s/%s %s -> %s",
        event,
        after.user_id,
        after.loan_id,
        after.payment_id,
        "-" if before is None else before.status.value,
        after.status.value,
        extra={
            "event": event,
            "user_id": after.user_id,
            "loan_id": after.loan_id,
            "payment_id": after.payment_id,
            "from_status": None if before is None else before.status.value,
            "to_status": after.status.value,
            "reason": after.update_reason,
            "actor_id": actor.id,
            "actor_kind": actor.kind.value,
            "at": format_timestamp(after.updated_at),
            "version": after.version,
            "request_id": actor.request_id,
        },
    )


class EndpointChange(StrEnum):
    """What an operator did to another client's webhook endpoint (SPEC §18)."""

    SECRET_ROTATED = "webhook_endpoint.secret_rotated"
    DELETED = "webhook_endpoint.deleted"
    ENABLED = "webhook_endpoint.enabled"
    EVENT_RESENT = "webhook_endpoint.event_resent"
    OWNER_ASSIGNED = "webhook_endpoint.owner_assigned"


def audit_endpoint_change(
    change: EndpointChange,
    *,
    endpoint_id: str,
    owner: str | None,
    operator: Actor,
    operator_client: str,
    at: datetime,
    **details: str,
) -> None:
    """The line of an operator's change to an endpoint of `owner` (None: one stored before
    endpoints had owners): who (the operator's subject and client), when, and `details` (the
    event resent, the owner given)."""
    if _unlogged.get():
        return
    audit_log.info(
        "%s %s of %s by %s",
        change.value,
        endpoint_id,
        owner or "no client",
        operator_client,
        extra={
            "event": change.value,
            "endpoint_id": endpoint_id,
            "owner": owner,
            "actor_id": operator.id,
            "actor_kind": "operator",
            "actor_client": operator_client,
            "at": format_timestamp(at),
            "request_id": operator.request_id,
            **details,
        },
    )
