"""The descriptions that several elements of the public schema share, each written once.

GraphiQL's explorer shows a schema's descriptions and nothing else, so every type, field,
argument, input field and enum value has one (`tests/schema/test_descriptions.py`), written for a
front-end developer: what it is, its unit (money in integer cents, instants as `DateTime`), who
may use it (customers, services), and for a status or an error code what a client should do.
A text said of one element only stays beside that element. The paging arguments and a
mutation's `input` come as `Annotated` types, so that a resolver's signature carries them whole.
"""

from __future__ import annotations

from typing import Annotated, TypeVar

import strawberry

from datasource import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE

__all__ = [
    "AMOUNT",
    "CENTS",
    "CURSOR",
    "EDGES",
    "ENDPOINT_ID",
    "EVENT_ID",
    "GLOBAL_ID",
    "INSTALLMENT_ID",
    "LOAN_ID",
    "OWNER",
    "OWN_ENDPOINTS",
    "PAGE_INFO",
    "PAYMENT_ID",
    "SERVICES_ONLY",
    "USER_ID",
    "After",
    "Before",
    "First",
    "Last",
    "MutationInput",
]

SERVICES_ONLY = "Services only: a customer is refused (`FORBIDDEN` in `errors`)."
OWN_ENDPOINTS = (
    "Services only (a customer is refused: `FORBIDDEN` in `errors`), on the endpoints their "
    "client registered: another client's is NOT_FOUND, as one that does not exist. An operator "
    "of webhooks (its own scope) acts on every endpoint."
)

# Ids.
GLOBAL_ID = (
    "A global id, opaque: what `node` and `nodes` take, and what normalized client caches "
    "(Relay, Apollo, urql) key records by."
)
OWNER = (
    "The user whose data it is: a customer may omit it (its own id is then taken) or pass its "
    "own; a service must pass it. Another user's id answers as if there were nothing there."
)
USER_ID = "The customer it belongs to: the user id its tokens carry."
LOAN_ID = "The loan's id, as the loans service knows it (not a global `id`)."
PAYMENT_ID = "The payment's id: a UUID (version 7) given at creation, so ids sort by creation time."
INSTALLMENT_ID = "The installment's id, as the loans service knows it."
ENDPOINT_ID = "The webhook endpoint's id, given at registration."
EVENT_ID = "The event's id: a webhook's `webhook-id` and JSON `id`, the same on every delivery."

# Money.
CENTS = "in integer cents (12500 is $125.00)"
AMOUNT = f"The amount, {CENTS}: more than 0, at most 2,147,483,647."

# Mutations.
MUTATION_INPUT = "What the mutation needs: each field of the input type says what it is."
InputT = TypeVar("InputT")
MutationInput = Annotated[InputT, strawberry.argument(description=MUTATION_INPUT)]

# Lists: Relay's connections, newest first unless a field says otherwise.
EDGES = "The page's edges, in the list's order."
PAGE_INFO = "Whether edges come after (or before) this page, and the cursors to ask for them."
CURSOR = (
    "This edge's place in its list: pass it as `after` (or `before`) to page on from it. "
    "Opaque and signed; another list refuses it (INVALID_INPUT)."
)
FIRST = (
    f"Paging forward: at most this many edges, 1 to {MAX_PAGE_SIZE} "
    f"({DEFAULT_PAGE_SIZE} by default)."
)
AFTER = (
    "Paging forward: the edges after this cursor (an edge's `cursor`, or "
    "`pageInfo.endCursor`); omitted, from the list's start."
)
LAST = (
    f"Paging backward: at most this many edges, 1 to {MAX_PAGE_SIZE} "
    f"({DEFAULT_PAGE_SIZE} with `before` alone); not with `first` or `after`."
)
BEFORE = (
    "Paging backward: the edges before this cursor (an edge's `cursor`, or "
    "`pageInfo.startCursor`); omitted with `last`, from the list's end."
)

First = Annotated[int | None, strawberry.argument(description=FIRST)]
After = Annotated[str | None, strawberry.argument(description=AFTER)]
Last = Annotated[int | None, strawberry.argument(description=LAST)]
Before = Annotated[str | None, strawberry.argument(description=BEFORE)]
