"""The layout record's conditional writes under races (SPEC §20): instances starting together on
an empty table, reshards recording their ends or a feed change at once. Whoever loses a write
reads the winner's record and goes on: none fails, none overwrites what another recorded."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator

import pytest

from datasource import PaymentStore
from datasource.layouts import establish
from domain import keys
from domain.enums import PaymentStatus
from domain.keys import FeedLayout, StatusLayout
from jobs.errors import CheckpointRefused
from jobs.reshard import reshard_feed
from tests.backends import CURSOR_SECRET, Backend, fresh_table
from tests.eventually import eventually

INSTANCES = 8
REFRESH_SECONDS = 1.0
SWITCH = keys.feed_bound("2031-05-01T09:00:00.000Z")
LATER_SWITCH = keys.feed_bound("2031-05-01T09:00:05.000Z")


@pytest.fixture
async def table(ddblocal_backend: Backend) -> AsyncIterator[str]:
    table_name = await fresh_table(ddblocal_backend)
    yield table_name
    await ddblocal_backend.client.delete_table(TableName=table_name)


def instance(backend: Backend, table: str, gsi2_shards: int) -> PaymentStore:
    return PaymentStore(
        backend.client,
        table_name=table,
        cursor_secret=CURSOR_SECRET,
        layout=StatusLayout(gsi2_shards),
        feed=FeedLayout.of(keys.DEFAULT_FEED_SHARDS),
    )


@pytest.mark.race
async def test_instances_starting_together_on_an_empty_table_all_go_on_with_one_record(
    ddblocal_backend: Backend, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    # One instance of the fleet already runs a new GSI2 setting (a rolling deploy).
    stores = [
        instance(ddblocal_backend, table, 16 if n == 0 else keys.DEFAULT_GSI2_SHARDS)
        for n in range(INSTANCES)
    ]

    with caplog.at_level(logging.WARNING, logger="loc_payments"):
        await asyncio.gather(
            *(
                store.follow_layout_record(
                    feed_shards=keys.DEFAULT_FEED_SHARDS,
                    refresh_seconds=REFRESH_SECONDS,
                    settle_seconds=5,
                )
                for store in stores
            )
        )

    assert [r.getMessage() for r in caplog.records] == [], "every instance read the record"
    record = await stores[0].layout_record()
    assert record is not None
    assert record.status == {16, keys.DEFAULT_GSI2_SHARDS}
    assert record.feed == FeedLayout.of(keys.DEFAULT_FEED_SHARDS)
    for store in stores:
        assert store.feed_layout == record.feed
        assert {store.layout.shards, *store.layout.also_read} <= record.status

    # Each reads every layout written once its copy is refreshed: a use past the interval
    # refreshes it in the background, past twice the interval first.
    async def every_store_reads_every_layout() -> bool:
        for store in stores:
            await store.payments_by_status(status=PaymentStatus.PENDING, first=1)
        return all(
            {store.layout.shards, *store.layout.also_read} == record.status for store in stores
        )

    await eventually(every_store_reads_every_layout, what="every layout read by every instance")


@pytest.mark.race
async def test_establishing_the_record_at_once_gives_every_caller_the_same_record(
    ddblocal_backend: Backend, table: str
) -> None:
    found = await asyncio.gather(
        *(
            establish(
                ddblocal_backend.client,
                table,
                status_shards=keys.DEFAULT_GSI2_SHARDS,
                feed_shards=keys.DEFAULT_FEED_SHARDS,
                switch=SWITCH,
            )
            for _ in range(INSTANCES)
        )
    )

    assert len(set(found)) == 1
    assert found[0].version == 1


@pytest.mark.race
async def test_of_two_changes_of_the_same_record_one_is_written_the_other_told(
    ddblocal_backend: Backend, table: str
) -> None:
    store = instance(ddblocal_backend, table, keys.DEFAULT_GSI2_SHARDS)
    await store.follow_layout_record(feed_shards=1, refresh_seconds=10, settle_seconds=5)
    old = await store.layout_record()
    assert old is not None
    changes = [dataclasses.replace(old, feed=old.feed.then(SWITCH, n)) for n in (8, 16)]

    written = await asyncio.gather(*(store.replace_layout_record(old, new) for new in changes))

    assert sorted(written) == [False, True]
    record = await store.layout_record()
    winner = changes[written.index(True)]
    assert record == dataclasses.replace(winner, version=old.version + 1)


@pytest.mark.race
async def test_two_feed_reshards_at_once_record_one_change(
    ddblocal_backend: Backend, table: str
) -> None:
    store = instance(ddblocal_backend, table, keys.DEFAULT_GSI2_SHARDS)
    await store.follow_layout_record(feed_shards=1, refresh_seconds=10, settle_seconds=5)

    # The same change twice (two operators): one records it, the other finds it recorded.
    same = await asyncio.gather(
        reshard_feed(store, 8, at=SWITCH), reshard_feed(store, 8, at=LATER_SWITCH)
    )

    assert sorted(map(str, same)) == sorted(["None", str(same[0] or same[1])])
    record = await store.layout_record()
    assert record is not None and record.feed in same and len(record.feed.changes) == 2

    # Two different changes: one is recorded, the other refused, not written over it.
    outcomes = await asyncio.gather(
        reshard_feed(store, 16, at=keys.feed_bound("2031-05-01T09:01:00.000Z")),
        reshard_feed(store, 4, at=keys.feed_bound("2031-05-01T09:01:00.000Z")),
        return_exceptions=True,
    )

    [refused] = [o for o in outcomes if isinstance(o, BaseException)]
    [recorded] = [o for o in outcomes if isinstance(o, FeedLayout)]
    assert isinstance(refused, CheckpointRefused), refused
    assert "changed meanwhile" in str(refused)
    after = await store.layout_record()
    assert after is not None and after.feed == recorded and len(recorded.changes) == 3
