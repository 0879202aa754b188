"""What the events fields do (SPEC §18): webhook endpoints, their deliveries, the events feed,
and the body every delivery of an event carries. Services only.

An endpoint belongs to the service client that registered it (`Caller.service_client`): a client
lists and changes its own, and another's is NOT_FOUND, as one that does not exist. An operator
of webhooks (`Caller.is_webhooks_admin`) sees and changes every endpoint, those stored before
endpoints had owners included, and gives them owners; each change it makes to an endpoint that
is not its own client's is written to the audit log once made (`domain.audit`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from uuid_utils.compat import uuid7

from datasource import EndpointState, HistoryPage, PageOf, WebhookStore, settled_before
from domain import validation
from domain.audit import EndpointChange, audit_endpoint_change
from domain.errors import InvalidInput, NotFound
from domain.history import PaymentEvent
from domain.payment import Payment
from domain.validation import format_timestamp
from domain.webhooks import (
    EVENT_TYPES,
    MAX_WEBHOOK_ENDPOINTS,
    OPERATIONAL_EVENT_TYPES,
    EndpointStatus,
    WebhookDelivery,
    WebhookEndpoint,
    beyond_retention,
    checked_event_types,
    checked_receiver,
    event_id,
    event_of_id,
    event_type,
    new_secret,
)
from resolvers.callers import Caller
from resolvers.context import Context
from resolvers.errors import Forbidden
from resolvers.node_ids import payment_node_id

__all__ = [
    "assign_owner",
    "create_endpoint",
    "delete_endpoint",
    "deliveries",
    "enable_endpoint",
    "endpoints",
    "event_body",
    "events",
    "resend_event",
    "rotate_secret",
]


def _webhooks(context: Context) -> tuple[WebhookStore, Caller]:
    """The endpoints, for a service or an operator of webhooks; FORBIDDEN to anyone else."""
    caller = context.caller()
    if not (caller.is_service or caller.is_webhooks_admin):
        raise Forbidden("this field is for services only")
    return context.store.webhooks, caller


def _client(caller: Caller) -> str | None:
    """The client whose endpoints `caller` may see and change; None: every endpoint (an
    operator's)."""
    return None if caller.is_webhooks_admin else caller.service_client


def _sees(caller: Caller, endpoint: WebhookEndpoint) -> bool:
    client = _client(caller)
    return client is None or endpoint.owner == client


def _audited(
    context: Context,
    caller: Caller,
    change: EndpointChange,
    endpoint_id: str,
    *,
    owner: str | None,
    **details: str,
) -> None:
    """The audit line of an operator's change to an endpoint that was not its own client's
    (`owner`: whose it was)."""
    if not caller.is_webhooks_admin or owner == caller.service_client:
        return
    audit_endpoint_change(
        change,
        endpoint_id=endpoint_id,
        owner=owner,
        operator=context.actor(),
        operator_client=caller.service_client,
        at=context.clock(),
        **details,
    )


async def _endpoint(webhooks: WebhookStore, caller: Caller, endpoint_id: str) -> EndpointState:
    """The endpoint, if `caller` may see it; NotFound as for one that does not exist."""
    state = await webhooks.endpoint(_checked_id(endpoint_id))
    if state is None or not _sees(caller, state.endpoint):
        raise NotFound("webhook endpoint not found")
    return state


async def create_endpoint(
    context: Context, *, url: str, event_types: Sequence[str] | None, description: str | None
) -> tuple[WebhookEndpoint, str]:
    """The new endpoint, its caller's client's, and its signing secret (shown this once); none
    past `MAX_WEBHOOK_ENDPOINTS` (two registrations at once may pass it by one)."""
    webhooks, caller = _webhooks(context)
    if description is not None:
        validation.reason("description", description)
    if len(await webhooks.endpoints()) >= MAX_WEBHOOK_ENDPOINTS:
        raise InvalidInput(
            "url",
            f"the service holds at most {MAX_WEBHOOK_ENDPOINTS} webhook endpoints, every "
            "client's together: delete one first",
        )
    endpoint = WebhookEndpoint(
        endpoint_id=str(uuid7()),
        url=await checked_receiver(url, context.events),
        event_types=checked_event_types(
            "eventTypes", event_types, known=EVENT_TYPES + OPERATIONAL_EVENT_TYPES
        ),
        description=description,
        status=EndpointStatus.ENABLED,
        created_at=context.clock(),
        owner=caller.service_client,
    )
    secret = new_secret()
    await webhooks.create(endpoint, secret=secret)
    return endpoint, secret


async def endpoints(context: Context) -> list[WebhookEndpoint]:
    """The caller's client's endpoints; an operator's: every one."""
    webhooks, caller = _webhooks(context)
    listed = [state.endpoint for state in await webhooks.endpoints()]
    return [endpoint for endpoint in listed if _sees(caller, endpoint)]


async def delete_endpoint(context: Context, *, endpoint_id: str) -> str:
    webhooks, caller = _webhooks(context)
    deleted = await webhooks.delete(_checked_id(endpoint_id), of_client=_client(caller))
    _audited(context, caller, EndpointChange.DELETED, endpoint_id, owner=deleted.owner)
    return endpoint_id


async def rotate_secret(context: Context, *, endpoint_id: str) -> tuple[WebhookEndpoint, str]:
    """A new secret; the old one signs beside it for the policy's grace period."""
    webhooks, caller = _webhooks(context)
    secret = new_secret()
    state = await webhooks.rotate(
        _checked_id(endpoint_id),
        of_client=_client(caller),
        secret=secret,
        now=context.clock(),
        grace=context.events.secret_grace,
    )
    _audited(
        context, caller, EndpointChange.SECRET_ROTATED, endpoint_id, owner=state.endpoint.owner
    )
    return state.endpoint, secret


async def enable_endpoint(context: Context, *, endpoint_id: str, from_now: bool) -> WebhookEndpoint:
    """ENABLED again, from where it stopped (within the feed's retention) or from now."""
    webhooks, caller = _webhooks(context)
    state = await _endpoint(webhooks, caller, endpoint_id)
    now = context.clock()
    if not from_now:
        retention = context.events.retention
        horizon = now - retention
        if state.stopped_at < format_timestamp(horizon):
            raise beyond_retention("from", retention, horizon)
    enabled = await webhooks.enable(
        state.endpoint.endpoint_id,
        of_client=_client(caller),
        from_now=now if from_now else None,
    )
    _audited(context, caller, EndpointChange.ENABLED, endpoint_id, owner=enabled.endpoint.owner)
    return enabled.endpoint


async def resend_event(context: Context, *, endpoint_id: str, event_id: str) -> WebhookEndpoint:
    """The event delivered to the endpoint again, as a new series of attempts, due now."""
    webhooks, caller = _webhooks(context)
    ref, version = event_of_id("eventId", event_id)
    state = await _endpoint(webhooks, caller, endpoint_id)
    if await context.store.event(ref, version) is None:
        raise NotFound("event not found")
    await webhooks.schedule(
        state.endpoint.endpoint_id, event_id=event_id, due=context.clock(), attempt=1
    )
    _audited(
        context,
        caller,
        EndpointChange.EVENT_RESENT,
        endpoint_id,
        owner=state.endpoint.owner,
        event_id=event_id,
    )
    return state.endpoint


async def assign_owner(context: Context, *, endpoint_id: str, owner: str) -> WebhookEndpoint:
    """The endpoint given to the service client `owner` (its tokens' `azp` or `client_id`, else
    `sub`): operators only."""
    webhooks, caller = _webhooks(context)
    if not caller.is_webhooks_admin:
        raise Forbidden("this field is for operators of webhooks only")
    checked = validation.identifier("owner", owner)
    previous, state = await webhooks.assign_owner(_checked_id(endpoint_id), owner=checked)
    _audited(
        context,
        caller,
        EndpointChange.OWNER_ASSIGNED,
        endpoint_id,
        owner=previous,
        new_owner=checked,
    )
    return state.endpoint


async def deliveries(
    context: Context, endpoint: WebhookEndpoint, *, first: int | None, after: str | None
) -> PageOf[WebhookDelivery]:
    webhooks, caller = _webhooks(context)
    # Every endpoint a caller is given is one it sees; a check here keeps it so.
    if not _sees(caller, endpoint):
        raise NotFound("webhook endpoint not found")
    return await webhooks.deliveries(endpoint.endpoint_id, first=first, after=after)


async def events(
    context: Context,
    *,
    first: int | None,
    after: str | None,
    types: Sequence[str] | None,
    created_after: datetime | None,
) -> HistoryPage:
    """Every user's settled events within the feed's retention, oldest first; a position
    older than the retention is refused, not answered with an empty page."""
    context.service()
    now = context.clock()
    retention = context.events.retention
    horizon = now - retention
    if created_after is not None and created_after < horizon:
        raise beyond_retention("createdAfter", retention, horizon)
    return await context.store.events(
        first=first,
        after=after,
        types=checked_event_types("types", types),
        created_after=created_after or horizon,
        upper=settled_before(now, context.events.settle_seconds),
        horizon=(horizon, beyond_retention("after", retention, horizon)),
    )


def _checked_id(endpoint_id: str) -> str:
    # Ours are UUIDs; anything else (a `#` could reach another item's key) is not one of them.
    try:
        return validation.payment_id("endpointId", endpoint_id)
    except InvalidInput:
        raise InvalidInput("endpointId", "must be a webhook endpoint id (a UUID)") from None


def event_body(event: PaymentEvent) -> dict[str, Any]:
    """What a webhook POSTs for `event` (SPEC §18): the payment as its write left it, named as
    the GraphQL API names its fields."""
    if event.payment is None:
        raise ValueError("an event is delivered with the payment its write left")
    return {
        "id": event_id(event.ref, event.version),
        "type": event_type(event.from_status, event.to_status),
        "createdAt": format_timestamp(event.at),
        "data": {
            "payment": payment_fields(event.payment),
            "version": event.version,
            "fromStatus": None if event.from_status is None else event.from_status.value,
            "toStatus": event.to_status.value,
            "reason": event.reason,
        },
    }


def payment_fields(payment: Payment) -> dict[str, Any]:
    """The payment's stored fields, with `Payment`'s GraphQL names and serializations."""

    def moment(value: datetime | None) -> str | None:
        return None if value is None else format_timestamp(value)

    return {
        "id": payment_node_id(payment.ref),
        "paymentId": payment.payment_id,
        "userId": payment.user_id,
        "loanId": payment.loan_id,
        "amountCents": payment.amount_cents,
        "status": payment.status.value,
        "method": payment.method.name,
        "process": payment.process.value,
        "confirmationId": payment.confirmation_id,
        "accountLastFour": payment.account_last_four,
        "intendedInstallmentId": payment.intended_installment_id,
        "attempts": payment.attempts,
        "applications": [
            {
                "paymentId": application.payment_id,
                "installmentId": application.installment_id,
                "amountCents": application.amount_cents,
                "paymentDate": format_timestamp(application.payment_date),
            }
            for application in payment.applications
        ],
        "updateReason": payment.update_reason,
        "returnCode": payment.return_code,
        "version": payment.version,
        "createdAt": format_timestamp(payment.created_at),
        "updatedAt": format_timestamp(payment.updated_at),
        "firstPresentedAt": moment(payment.first_presented_at),
        "completedAt": moment(payment.completed_at),
    }
