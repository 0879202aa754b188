"""Two tables holding the same payments and events, one in the seed's one-shard layouts and one
sharded: for the tests that the sharded lists answer what one shard answers
(tests/datasource/test_sharded_lists.py) and the reshard job's (tests/jobs/test_reshard.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from datasource import PaymentStore
from datasource.history import HistoryPage, event_item
from datasource.items import Item, to_item
from domain import keys
from domain.enums import PaymentStatus
from domain.history import PaymentEvent, event_of
from domain.keys import FeedLayout, StatusLayout
from domain.payment import Payment
from domain.transitions import TransitionRequest, apply_transition
from domain.validation import format_timestamp
from tests.datasource.shard_pages import mixed_payments
from tests.datasource.stored_items import put_items
from tests.payment_samples import TEST_ACTOR

S = PaymentStatus
BASE = datetime(2031, 5, 1, 9, 0, 0, tzinfo=UTC)


def lives(count: int, *, start: datetime = BASE) -> tuple[list[Payment], list[PaymentEvent]]:
    """`count` payments created 40 ms apart (several users, loans and statuses), every third
    PENDING one skipped 15 ms later: the payments as they end, and every event, in time order."""
    payments, events = [], []
    for n, payment in enumerate(mixed_payments(count)):
        at = start + timedelta(milliseconds=40 * n)
        created = dataclasses.replace(payment, created_at=at, updated_at=at)
        events.append(event_of(None, created, TEST_ACTOR))
        if created.status is S.PENDING and n % 3 == 0:
            request = TransitionRequest.checked(S.SKIPPED, "customer asked")
            moved = apply_transition(
                created, request, max_attempts=3, now=at + timedelta(milliseconds=15)
            )
            events.append(event_of(created, moved, TEST_ACTOR))
            created = moved
        payments.append(created)
    return payments, events


def items_of(
    payments: Sequence[Payment],
    events: Sequence[PaymentEvent],
    status: StatusLayout,
    feed: FeedLayout,
) -> list[Item]:
    return [to_item(p, status) for p in payments] + [event_item(e, feed) for e in events]


async def seed(
    store: PaymentStore, payments: Sequence[Payment], events: Sequence[PaymentEvent]
) -> None:
    await put_items(store, items_of(payments, events, store.layout, store.feed_layout))


def position(at: datetime) -> str:
    """The feed position just after every event of `at`'s millisecond (a `feed_bound`)."""
    return keys.feed_bound(format_timestamp(at))


def event_ids(pages: Sequence[HistoryPage]) -> list[list[tuple[str, int]]]:
    return [[(edge.node.payment_id, edge.node.version) for edge in page.edges] for page in pages]
