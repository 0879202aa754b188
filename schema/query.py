"""The root query: the five access patterns, and `node`."""

from __future__ import annotations

from datetime import datetime
from typing import cast

import strawberry

from resolvers import queries, webhooks
from resolvers.context import Context
from schema.enums import PaymentStatus
from schema.types import LoanType, Node, PaymentConnection, PaymentEventConnection, PaymentType
from schema.webhooks import WebhookEndpointType

Info = strawberry.Info[Context, None]


@strawberry.type
class Query:
    @strawberry.field(description="A payment or loan by its global id.")
    async def node(self, info: Info, id: strawberry.ID) -> Node | None:
        return cast("Node | None", await queries.node(info.context, node_id=id))

    @strawberry.field(description="Payments or loans by their global ids (at most 100), in order.")
    async def nodes(self, info: Info, ids: list[strawberry.ID]) -> list[Node | None]:
        found = await queries.nodes(info.context, node_ids=list(ids))
        return cast("list[Node | None]", found)

    @strawberry.field(description="A payment by its loan and payment id.")
    async def payment(
        self,
        info: Info,
        user_id: strawberry.ID | None = None,
        *,
        loan_id: strawberry.ID,
        payment_id: strawberry.ID,
    ) -> PaymentType | None:
        found = await queries.payment(
            info.context, user_id=user_id, loan_id=loan_id, payment_id=payment_id
        )
        return cast("PaymentType | None", found)

    @strawberry.field(description="A loan; its payments are listed newest first.")
    def loan(
        self, info: Info, user_id: strawberry.ID | None = None, *, loan_id: strawberry.ID
    ) -> LoanType:
        return cast(LoanType, queries.loan(info.context, user_id=user_id, loan_id=loan_id))

    @strawberry.field(description="The payment the payments service confirmed with this id.")
    async def payment_by_confirmation(
        self, info: Info, user_id: strawberry.ID | None = None, *, confirmation_id: str
    ) -> PaymentType | None:
        found = await queries.payment_by_confirmation(
            info.context, user_id=user_id, confirmation_id=confirmation_id
        )
        return cast("PaymentType | None", found)

    @strawberry.field(description="Every user's payments in one status, newest first (services).")
    async def payments_by_status(
        self,
        info: Info,
        status: PaymentStatus,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
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
        after: str | None = None,
        first: int | None = None,
        types: list[str] | None = None,
        created_after: datetime | None = None,
    ) -> PaymentEventConnection:
        page = await webhooks.events(
            info.context, first=first, after=after, types=types, created_after=created_after
        )
        return PaymentEventConnection.from_page(page, complete=True)

    @strawberry.field(description="The webhook endpoints, oldest first (services).")
    async def webhook_endpoints(self, info: Info) -> list[WebhookEndpointType]:
        return cast(list[WebhookEndpointType], await webhooks.endpoints(info.context))
