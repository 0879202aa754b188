"""The events types (SPEC §18): webhook endpoints, their deliveries, and the results of the
webhook mutations. Services only, each on its own client's endpoints; operators on all."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, cast

import strawberry

from datasource import PageOf
from domain.errors import PaymentsError
from domain.webhooks import WebhookDelivery, WebhookEndpoint
from resolvers import webhooks
from resolvers.context import Context
from schema.descriptions import (
    CURSOR,
    EDGES,
    ENDPOINT_ID,
    EVENT_ID,
    OWN_ENDPOINTS,
    PAGE_INFO,
    SERVICES_ONLY,
    After,
    First,
    MutationInput,
)
from schema.types import PageInfo, page_info
from schema.user_errors import InvalidInputError, NotFoundError, UnavailableError, user_error

__all__ = ["WebhookEndpointType", "WebhookMutations"]

Info = strawberry.Info[Context, None]


@strawberry.enum(name="WebhookEndpointStatus", description="Whether an endpoint's events arrive.")
class WebhookEndpointStatusType(Enum):
    ENABLED = strawberry.enum_value("ENABLED", description="Its events are being delivered.")
    FAILING = strawberry.enum_value(
        "FAILING",
        description=(
            "An event was given up after its last retry; new events are still sent, and the "
            "first answered with a 2xx makes it ENABLED again."
        ),
    )
    DISABLED = strawberry.enum_value(
        "DISABLED",
        description=(
            "It answered no 2xx to any event for the whole retry schedule (3 days by default): "
            "nothing is sent until `enableWebhookEndpoint`; `disabledReason` says why."
        ),
    )


@strawberry.enum(
    name="WebhookEnableFrom", description="Where an endpoint enabled again resumes its events."
)
class WebhookEnableFromType(Enum):
    WHERE_IT_STOPPED = strawberry.enum_value(
        "WHERE_IT_STOPPED",
        description=(
            "From the first event it had not received, with the retries it had pending; "
            "refused (INVALID_INPUT on `from`) once that is older than the feed's retention."
        ),
    )
    NOW = strawberry.enum_value(
        "NOW", description="From the events after now; those it missed are not sent."
    )


@strawberry.type(name="WebhookDelivery", description="One attempt to deliver one event.")
class WebhookDeliveryType:
    event_id: strawberry.ID = strawberry.field(description="The event's id (`webhook-id`).")
    event_type: str = strawberry.field(description="The event's type, e.g. `payment.completed`.")
    attempt: int = strawberry.field(
        description="1 for the first attempt, counting on through its retries."
    )
    at: datetime = strawberry.field(description="When the attempt was made.")
    duration_ms: int = strawberry.field(description="Milliseconds until the answer, or the error.")
    status_code: int | None = strawberry.field(
        description="The receiver's HTTP status; null when it did not answer (see `error`)."
    )
    error: str | None = strawberry.field(
        description="Why there was no answer: a timeout, a refused connection, a refused address."
    )
    response_body: str | None = strawberry.field(
        description=(
            "The first 2 KB of the receiver's answer to a failed attempt; null once delivered."
        )
    )
    succeeded: bool = strawberry.field(description="Whether the receiver answered with a 2xx.")

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return isinstance(obj, WebhookDelivery)


@strawberry.type(
    name="WebhookDeliveryEdge", description="A delivery attempt in a page, with its cursor."
)
class WebhookDeliveryEdge:
    cursor: str = strawberry.field(description=CURSOR)
    node: WebhookDeliveryType = strawberry.field(description="The delivery attempt.")


@strawberry.type(
    name="WebhookDeliveryConnection", description="A page of an endpoint's delivery attempts."
)
class WebhookDeliveryConnection:
    edges: list[WebhookDeliveryEdge] = strawberry.field(description=EDGES)
    page_info: PageInfo = strawberry.field(description=PAGE_INFO)

    @classmethod
    def from_page(cls, page: PageOf[WebhookDelivery]) -> WebhookDeliveryConnection:
        return cls(edges=cast(list[WebhookDeliveryEdge], page.edges), page_info=page_info(page))


@strawberry.type(
    name="WebhookEndpoint", description="A receiver of payment events, signed as Standard Webhooks."
)
class WebhookEndpointType:
    endpoint_id: strawberry.ID = strawberry.field(description=ENDPOINT_ID)
    url: str = strawberry.field(description="Where each event is POSTed.")
    event_types: list[str] | None = strawberry.field(
        description="The event types sent to it; null: every type."
    )
    description: str | None = strawberry.field(
        description="The note given at registration, for people; null if none."
    )
    status: WebhookEndpointStatusType = strawberry.field(
        description="Whether its events arrive: ENABLED, or FAILING since an event was given up."
    )
    created_at: datetime = strawberry.field(description="When it was registered.")
    secret_rotated_at: datetime | None = strawberry.field(
        description="When its signing secret was last rotated."
    )
    disabled_at: datetime | None = strawberry.field(
        description="When it was disabled; null unless it is DISABLED."
    )
    disabled_reason: str | None = strawberry.field(
        description=(
            "Why it was disabled: since when no event got a 2xx, and the last attempt's error "
            "or status; null unless it is DISABLED."
        )
    )
    owner: str | None = strawberry.field(
        description=(
            "The service client it belongs to: the one that registered it, as its token named "
            "it (`azp` or `client_id`, else `sub`). Null for an endpoint stored before endpoints "
            "had owners: only operators see it, until one gives it an owner."
        )
    )

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return isinstance(obj, WebhookEndpoint)

    @strawberry.field(description="Its delivery attempts, newest first (kept 30 days).")
    async def deliveries(
        self,
        root: strawberry.Parent[WebhookEndpoint],
        info: Info,
        first: First = None,
        after: After = None,
    ) -> WebhookDeliveryConnection:
        page = await webhooks.deliveries(info.context, root, first=first, after=after)
        return WebhookDeliveryConnection.from_page(page)


@strawberry.type(description="An endpoint registered or given a new secret, and that secret.")
class WebhookEndpointPayload:
    endpoint: WebhookEndpointType = strawberry.field(description="The endpoint as it is now.")
    secret: str = strawberry.field(
        description="The signing secret (`whsec_…`): shown this once; keep it to verify events."
    )


@strawberry.type(description="The endpoint deleted: no more events are sent to it.")
class DeleteWebhookEndpointPayload:
    endpoint_id: strawberry.ID = strawberry.field(description="The id of the endpoint deleted.")


@strawberry.type(description="The endpoint enabled again.")
class EnableWebhookEndpointPayload:
    endpoint: WebhookEndpointType = strawberry.field(description="The endpoint as it is now.")


@strawberry.type(description="The endpoint given to a service client.")
class AssignWebhookEndpointOwnerPayload:
    endpoint: WebhookEndpointType = strawberry.field(description="The endpoint as it is now.")


@strawberry.type(description="An event to be sent to an endpoint again, now, with its retries.")
class ResendWebhookEventPayload:
    endpoint: WebhookEndpointType = strawberry.field(description="The endpoint it is sent to.")
    event_id: strawberry.ID = strawberry.field(description=EVENT_ID)


WebhookEndpointResult = Annotated[
    WebhookEndpointPayload | NotFoundError | InvalidInputError | UnavailableError,
    strawberry.union(
        "WebhookEndpointResult",
        description="The endpoint and its new secret, or a `UserError` that says why not.",
    ),
]
DeleteWebhookEndpointResult = Annotated[
    DeleteWebhookEndpointPayload | NotFoundError | InvalidInputError | UnavailableError,
    strawberry.union(
        "DeleteWebhookEndpointResult",
        description="The endpoint deleted, or a `UserError` that says why not.",
    ),
]
EnableWebhookEndpointResult = Annotated[
    EnableWebhookEndpointPayload | NotFoundError | InvalidInputError | UnavailableError,
    strawberry.union(
        "EnableWebhookEndpointResult",
        description="The endpoint enabled, or a `UserError` that says why not.",
    ),
]
AssignWebhookEndpointOwnerResult = Annotated[
    AssignWebhookEndpointOwnerPayload | NotFoundError | InvalidInputError | UnavailableError,
    strawberry.union(
        "AssignWebhookEndpointOwnerResult",
        description="The endpoint with its new owner, or a `UserError` that says why not.",
    ),
]
ResendWebhookEventResult = Annotated[
    ResendWebhookEventPayload | NotFoundError | InvalidInputError | UnavailableError,
    strawberry.union(
        "ResendWebhookEventResult",
        description="The event to be sent again, or a `UserError` that says why not.",
    ),
]


@strawberry.input(description="A new receiver of payment events.")
class CreateWebhookEndpointInput:
    url: str = strawberry.field(description="An https URL (http and loopback outside prod).")
    event_types: list[str] | None = strawberry.field(
        default=None, description="The types to send, e.g. `payment.completed`; null: all."
    )
    description: str | None = strawberry.field(
        default=None, description="A note for people, e.g. the receiving service's name."
    )


@strawberry.input(description="Names one webhook endpoint.")
class WebhookEndpointInput:
    endpoint_id: strawberry.ID = strawberry.field(description=ENDPOINT_ID)


@strawberry.input(description="An endpoint to enable again, and where it resumes.")
class EnableWebhookEndpointInput:
    endpoint_id: strawberry.ID = strawberry.field(description=ENDPOINT_ID)
    from_: WebhookEnableFromType = strawberry.field(
        name="from",
        default=WebhookEnableFromType.WHERE_IT_STOPPED,
        description="Where its events resume: where it stopped (the default), or now.",
    )


@strawberry.input(description="An event to send again, and the endpoint to send it to.")
class ResendWebhookEventInput:
    endpoint_id: strawberry.ID = strawberry.field(description=ENDPOINT_ID)
    event_id: strawberry.ID = strawberry.field(description=EVENT_ID)


@strawberry.input(description="An endpoint, and the service client to give it to.")
class AssignWebhookEndpointOwnerInput:
    endpoint_id: strawberry.ID = strawberry.field(description=ENDPOINT_ID)
    owner: str = strawberry.field(
        description=(
            "The service client's id as its tokens carry it (`azp` or `client_id`, else `sub`): "
            "1 to 128 characters, no `#`, no control characters."
        )
    )


async def _refused(info: Info, work: Awaitable[Any]) -> Any:
    try:
        return await work
    except PaymentsError as error:
        info.context.user_errors.append(error.code)
        return user_error(error)


@strawberry.type
class WebhookMutations:
    @strawberry.mutation(
        description=(
            "A new webhook endpoint, belonging to the caller's service client (its token's `azp` "
            "or `client_id`, else `sub`); its secret is in the answer only. The service holds "
            "at most 10, every client's together: past them, INVALID_INPUT on `url`. "
            f"{SERVICES_ONLY}"
        )
    )
    async def create_webhook_endpoint(
        self, info: Info, input: MutationInput[CreateWebhookEndpointInput]
    ) -> WebhookEndpointResult:
        async def create() -> WebhookEndpointPayload:
            endpoint, secret = await webhooks.create_endpoint(
                info.context,
                url=input.url,
                event_types=input.event_types,
                description=input.description,
            )
            return WebhookEndpointPayload(
                endpoint=cast(WebhookEndpointType, endpoint), secret=secret
            )

        return cast(WebhookEndpointResult, await _refused(info, create()))

    @strawberry.mutation(
        description=f"Stop sending events to an endpoint, and forget it. {OWN_ENDPOINTS}"
    )
    async def delete_webhook_endpoint(
        self, info: Info, input: MutationInput[WebhookEndpointInput]
    ) -> DeleteWebhookEndpointResult:
        async def delete() -> DeleteWebhookEndpointPayload:
            deleted = await webhooks.delete_endpoint(info.context, endpoint_id=input.endpoint_id)
            return DeleteWebhookEndpointPayload(endpoint_id=strawberry.ID(deleted))

        return cast(DeleteWebhookEndpointResult, await _refused(info, delete()))

    @strawberry.mutation(
        description=(
            "A new signing secret, in the answer only; the old one signs beside it for a grace "
            "period (a day by default), so receivers can switch without losing an event. "
            f"{OWN_ENDPOINTS}"
        )
    )
    async def rotate_webhook_secret(
        self, info: Info, input: MutationInput[WebhookEndpointInput]
    ) -> WebhookEndpointResult:
        async def rotate() -> WebhookEndpointPayload:
            endpoint, secret = await webhooks.rotate_secret(
                info.context, endpoint_id=input.endpoint_id
            )
            return WebhookEndpointPayload(
                endpoint=cast(WebhookEndpointType, endpoint), secret=secret
            )

        return cast(WebhookEndpointResult, await _refused(info, rotate()))

    @strawberry.mutation(
        description=(
            "Turn a DISABLED (or any) endpoint back on, from where it stopped or from now. "
            f"{OWN_ENDPOINTS}"
        )
    )
    async def enable_webhook_endpoint(
        self, info: Info, input: MutationInput[EnableWebhookEndpointInput]
    ) -> EnableWebhookEndpointResult:
        async def enable() -> EnableWebhookEndpointPayload:
            endpoint = await webhooks.enable_endpoint(
                info.context,
                endpoint_id=input.endpoint_id,
                from_now=input.from_ is WebhookEnableFromType.NOW,
            )
            return EnableWebhookEndpointPayload(endpoint=cast(WebhookEndpointType, endpoint))

        return cast(EnableWebhookEndpointResult, await _refused(info, enable()))

    @strawberry.mutation(
        description=f"Send an event to an endpoint again, now, with its retries. {OWN_ENDPOINTS}"
    )
    async def resend_webhook_event(
        self, info: Info, input: MutationInput[ResendWebhookEventInput]
    ) -> ResendWebhookEventResult:
        async def resend() -> ResendWebhookEventPayload:
            endpoint = await webhooks.resend_event(
                info.context, endpoint_id=input.endpoint_id, event_id=input.event_id
            )
            return ResendWebhookEventPayload(
                endpoint=cast(WebhookEndpointType, endpoint), event_id=input.event_id
            )

        return cast(ResendWebhookEventResult, await _refused(info, resend()))

    @strawberry.mutation(
        description=(
            "Give an endpoint to a service client: one stored before endpoints had owners (no "
            "client's), or another client's. Operators of webhooks only (their own scope): "
            "anyone else is refused (`FORBIDDEN` in `errors`); the change is audited."
        )
    )
    async def assign_webhook_endpoint_owner(
        self, info: Info, input: MutationInput[AssignWebhookEndpointOwnerInput]
    ) -> AssignWebhookEndpointOwnerResult:
        async def assign() -> AssignWebhookEndpointOwnerPayload:
            endpoint = await webhooks.assign_owner(
                info.context, endpoint_id=input.endpoint_id, owner=input.owner
            )
            return AssignWebhookEndpointOwnerPayload(endpoint=cast(WebhookEndpointType, endpoint))

        return cast(AssignWebhookEndpointOwnerResult, await _refused(info, assign()))
