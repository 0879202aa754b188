"""The root query: the five access patterns, and `node`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, cast

import strawberry

from resolvers import queries, webhooks
from resolvers.context import Context
from schema.descriptions import LOAN_ID, OWNER, PAYMENT_ID, After, Before, First, Last
from schema.enums import PaymentStatus
from schema.types import LoanType, Node, PaymentConnection, PaymentEventConnection, PaymentType
from schema.webhooks import WebhookEndpointType

__all__ = ["Query"]

Info = strawberry.Info[Context, None]

Owner = Annotated[strawberry.ID | None, strawberry.argument(description=OWNER)]
LoanId = Annotated[strawberry.ID, strawberry.argument(description=LOAN_ID)]


@strawberry.type(
    description="What a client reads: a customer its own payments and loans, a service anyone's."
)
class Query:
    @strawberry.field(
        description=(
            "A payment or loan by its global id; null when there is none, or it is another user's."
        )
    )
    async def node(
        self,
        info: Info,
        id: Annotated[
            strawberry.ID, strawberry.argument(description="A `Payment`'s or a `Loan`'s `id`.")
        ],
    ) -> Node | None:
        return cast("Node | None", await queries.node(info.context, node_id=id))

    @strawberry.field(description="Payments or loans by their global ids (at most 100), in order.")
    async def nodes(
        self,
        info: Info,
        ids: Annotated[
            list[strawberry.ID],
            strawberry.argument(
                description=(
                    "`Payment` and `Loan` ids, at most 100; each answer is at its id's place, "
                    "null for one that does not exist or is another user's."
                )
            ),
        ],
    ) -> list[Node | None]:
        found = await queries.nodes(info.context, node_ids=list(ids))
        return cast("list[Node | None]", found)

    @strawberry.field(
        description=(
            "A payment by its loan and payment id; null when there is none, or it is another "
            "user's."
        )
    )
    async def payment(
        self,
        info: Info,
        user_id: Owner = None,
        *,
        loan_id: LoanId,
        payment_id: Annotated[strawberry.ID, strawberry.argument(description=PAYMENT_ID)],
    ) -> PaymentType | None:
        found = await queries.payment(
            info.context, user_id=user_id, loan_id=loan_id, payment_id=payment_id
        )
        return cast("PaymentType | None", found)

    @strawberry.field(description="A loan; its payments are listed newest first.")
    def loan(self, info: Info, user_id: Owner = None, *, loan_id: LoanId) -> LoanType:
        return cast(LoanType, queries.loan(info.context, user_id=user_id, loan_id=loan_id))

    @strawberry.field(
        description=(
            "The payment the payments service confirmed with this id; null when the user has none."
        )
    )
    async def payment_by_confirmation(
        self,
        info: Info,
        user_id: Owner = None,
        *,
        confirmation_id: Annotated[
            str,
            strawberry.argument(
                description="The id the payments service gave a presentment (`confirmationId`)."
            ),
        ],
    ) -> PaymentType | None:
        found = await queries.payment_by_confirmation(
            info.context, user_id=user_id, confirmation_id=confirmation_id
        )
        return cast("PaymentType | None", found)

    @strawberry.field(description="Every user's payments in one status, newest first (services).")
    async def payments_by_status(
        self,
        info: Info,
        status: Annotated[
            PaymentStatus, strawberry.argument(description="The status of the payments listed.")
        ],
        first: First = None,
        after: After = None,
        last: Last = None,
        before: Before = None,
    ) -> PaymentConnection:
        page = await queries.payments_by_status(
            info.context, status=status, first=first, after=after, last=last, before=before
        )
        return PaymentConnection.from_page(page)

    @strawberry.field(
        description=(
            "Every user's payment events, oldest first (services): each edge's cursor resumes "
            "exactly after it. An event is listed once settled, a few seconds after its write."
        )
    )
    async def events(
        self,
        info: Info,
        after: Annotated[
            str | None,
            strawberry.argument(
                description=(
                    "Where to resume: the `cursor` of the last edge processed (or "
                    "`pageInfo.endCursor`); omitted, from the feed's start."
                )
            ),
        ] = None,
        first: First = None,
        types: Annotated[
            list[str] | None,
            strawberry.argument(
                description=(
                    "Only these event types (`payment.created`, `payment.completed`, …); "
                    "omitted, every type. An unknown one is INVALID_INPUT."
                )
            ),
        ] = None,
        created_after: Annotated[
            datetime | None,
            strawberry.argument(
                description=(
                    "Only the events after this instant's millisecond; a recent or future one "
                    "answers no edges until its events settle."
                )
            ),
        ] = None,
    ) -> PaymentEventConnection:
        page = await webhooks.events(
            info.context, first=first, after=after, types=types, created_after=created_after
        )
        return PaymentEventConnection.from_page(page, complete=True)

    @strawberry.field(
        description=(
            "The caller's client's webhook endpoints, oldest first (services); an operator of "
            "webhooks (its own scope) sees every client's. The service holds at most 10."
        )
    )
    async def webhook_endpoints(self, info: Info) -> list[WebhookEndpointType]:
        return cast(list[WebhookEndpointType], await webhooks.endpoints(info.context))
