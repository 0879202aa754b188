"""The feed-only reshard (`loc-payments reshard` with a new `LOC_EVENTS_SHARDS`, SPEC §20): the
feed's new layout is recorded from a position ahead (`datasource.layouts.switch_at`), and while
instances write and read the feed across that position none loses or repeats an event.

What keeps a writer off the old layout past the switch: an instance trusts its copy of the
record for at most twice `LOC_LAYOUT_REFRESH_SECONDS` (older, a use reads it first), an event's
position is its time taken before the write asks for the layout, and the switch is that long
ahead plus the settling time and a margin. Readers list only settled events, before the switch
until they know of it. A short refresh interval here puts the switch seconds away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from datasource import (
    CLOCK_MARGIN_SECONDS,
    GSI4PK,
    GSI4SK,
    Item,
    PaymentStore,
    settled_before,
    switch_at,
)
from domain import keys
from domain.enums import PaymentStatus
from domain.keys import FeedLayout, StatusLayout
from domain.transitions import TransitionRequest, apply_transition
from jobs.reshard import reshard_feed
from tests.backends import CURSOR_SECRET, Backend, fresh_table
from tests.eventually import eventually
from tests.payment_samples import sample_payment, stored_move, stored_new

REFRESH_SECONDS = 1.0  # LOC_LAYOUT_REFRESH_SECONDS' least
SETTLE_SECONDS = 0.5
OLD_SHARDS, NEW_SHARDS = 4, 8
INSTANCES = 3
SIDE = 40  # events written on each side of the switch, at least (20 are asserted)

EventId = tuple[str, int]


@pytest.fixture
async def table(ddblocal_backend: Backend) -> AsyncIterator[str]:
    table_name = await fresh_table(ddblocal_backend)
    yield table_name
    await ddblocal_backend.client.delete_table(TableName=table_name)


async def instance(backend: Backend, table: str) -> PaymentStore:
    store = PaymentStore(
        backend.client,
        table_name=table,
        cursor_secret=CURSOR_SECRET,
        layout=StatusLayout(keys.DEFAULT_GSI2_SHARDS),
        feed=FeedLayout.of(OLD_SHARDS),
    )
    await store.follow_layout_record(
        feed_shards=OLD_SHARDS, refresh_seconds=REFRESH_SECONDS, settle_seconds=SETTLE_SECONDS
    )
    return store


async def scan(store: PaymentStore) -> list[Item]:
    items: list[Item] = []
    more: dict[str, Any] = {}
    while True:
        page = await store.client.scan(TableName=store.table_name, ConsistentRead=True, **more)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return items
        more = {"ExclusiveStartKey": page["LastEvaluatedKey"]}


def now() -> datetime:
    return datetime.now(UTC)


async def test_a_feed_reshard_under_live_writes_and_pages_loses_and_repeats_nothing(
    ddblocal_backend: Backend, table: str
) -> None:
    stores = [await instance(ddblocal_backend, table) for _ in range(INSTANCES)]
    assert stores[0].feed_layout == FeedLayout.of(OLD_SHARDS)
    written: list[EventId] = []
    stamped: list[datetime] = []  # each written event's time: its position in the feed
    stop = asyncio.Event()

    async def write(store: PaymentStore, n: int) -> None:
        """Payments created and skipped as fast as the instance goes, each event stamped now."""
        while not stop.is_set():
            at = now()
            payment = sample_payment(user_id=f"user-{n}", created_at=at, updated_at=at)
            created = await stored_new(store, payment)
            written.append((created.payment_id, created.version))
            stamped.append(at)
            request = TransitionRequest.checked(PaymentStatus.SKIPPED, "customer asked")
            moved_at = now()
            moved = apply_transition(created, request, max_attempts=3, now=moved_at)
            moved = await stored_move(store, created, moved)
            written.append((moved.payment_id, moved.version))
            stamped.append(moved_at)
            await asyncio.sleep(0.01)

    async def follow(store: PaymentStore, first: int, done: asyncio.Event) -> list[EventId]:
        """The feed from its start, a page at a time, as a webhook or an app polls its head,
        until a page is empty once `done` is set."""
        listed: list[EventId] = []
        cursor = None
        while True:
            upper = settled_before(now(), SETTLE_SECONDS)
            page = await store.events(
                first=first, after=cursor, types=None, created_after=None, upper=upper
            )
            listed += [(edge.node.payment_id, edge.node.version) for edge in page.edges]
            cursor = page.end_cursor or cursor
            if not page.edges:
                if done.is_set():
                    return listed
                await asyncio.sleep(0.05)

    writers = [asyncio.create_task(write(store, n)) for n, store in enumerate(stores)]
    caught_up = asyncio.Event()
    readers = [asyncio.create_task(follow(store, 7, caught_up)) for store in stores[1:]]
    await eventually(lambda: len(written) >= SIDE, what="writes under way")
    resharded = now()
    at = switch_at(resharded, refresh_seconds=REFRESH_SECONDS, settle_seconds=SETTLE_SECONDS)
    changed = await reshard_feed(stores[0], NEW_SHARDS, at=at)
    assert changed == FeedLayout.of(OLD_SHARDS).then(at, NEW_SHARDS)
    # Writes and pages go on until as many events again are written past the switch.
    ahead = 2 * REFRESH_SECONDS + SETTLE_SECONDS + CLOCK_MARGIN_SECONDS
    switch = resharded + timedelta(seconds=ahead)
    await eventually(
        lambda: sum(stamp > switch for stamp in stamped) >= SIDE,
        what="events past the switch",
        within=ahead + 30,
    )
    stop.set()
    await asyncio.gather(*writers)
    # Each reader's last pages once every event has settled (readers list only settled ones).
    last = max(stamped)
    await eventually(
        lambda: now() - last > timedelta(seconds=SETTLE_SECONDS), what="every event settled"
    )
    # Each reader's last pages, then the whole feed read again by a new instance.
    caught_up.set()
    followed = await asyncio.gather(*readers)
    late = await instance(ddblocal_backend, table)
    whole = await follow(late, 100, caught_up)

    assert late.feed_layout == changed
    assert len(whole) == len(set(whole)) and set(whole) == set(written), "none lost or repeated"
    for listed in followed:
        assert listed == whole
    # Every event is in its shard of the layout in force at its position: no writer wrote the
    # old layout past the switch; some were written on each side of it.
    events = [item for item in await scan(late) if GSI4PK in item]
    assert len(events) == len(written)
    sides = {False: 0, True: 0}
    for item in events:
        position = item[GSI4SK]["S"]
        expected = changed.partition(item["loc_payment_id"]["S"], position)
        assert item[GSI4PK]["S"] == expected, (position, at)
        sides[position > at] += 1
    assert min(sides.values()) > 20, sides
