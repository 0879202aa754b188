"""The root subscription: a payment's events as they are stored (SPEC §10)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Annotated, cast

import strawberry

from resolvers import live
from resolvers.context import Context
from schema.tracing import delivery
from schema.types import PaymentEventType

__all__ = ["Subscription"]

Info = strawberry.Info[Context, None]


@strawberry.type(
    description=(
        "Payment events as they are stored, over WebSocket (`graphql-transport-ws`) at "
        "`/graphql`, with the token in `connection_init`'s payload."
    )
)
class Subscription:
    @strawberry.subscription(
        description=(
            "Every event stored from now on that the caller may see: a customer its own "
            "payments', a service one user's (`userId`) or every user's. With `paymentId` and "
            "`afterVersion`, that payment's stored events after the version come first."
        )
    )
    async def payment_events(
        self,
        info: Info,
        user_id: Annotated[
            strawberry.ID | None,
            strawberry.argument(
                description=(
                    "Whose events: a customer omits it or passes its own (another user's is a "
                    "stream that stays quiet); a service names one user, or omits it for every "
                    "user's."
                )
            ),
        ] = None,
        loan_id: Annotated[
            strawberry.ID | None,
            strawberry.argument(description="Only this loan's payments' events."),
        ] = None,
        payment_id: Annotated[
            strawberry.ID | None,
            strawberry.argument(
                description="Only this payment's events; it needs `loanId` (and the user)."
            ),
        ] = None,
        after_version: Annotated[
            int | None,
            strawberry.argument(
                description=(
                    "First the payment's stored events after this version (0: all of them), "
                    "then the live ones, none missed or repeated: after a reconnect, pass the "
                    "last `version` received. Needs `paymentId` and `loanId`."
                )
            ),
        ] = None,
    ) -> AsyncGenerator[PaymentEventType, None]:
        context = info.context
        # An event announces a write: the payment it names is read as that write left it.
        context.loaders.read_strongly()
        async for event in live.payment_events(
            context,
            user_id=user_id,
            loan_id=loan_id,
            payment_id=payment_id,
            after_version=after_version,
        ):
            # `payment` is read as stored now: not as an earlier event of this stream saw it.
            context.loaders.forget(event.ref)
            # Its span (linked to the write) is current while its fields resolve and it is sent.
            with delivery(context, event):
                yield cast(PaymentEventType, event)
