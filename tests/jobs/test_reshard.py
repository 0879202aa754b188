"""The reshard job (`loc-payments reshard`): every payment ends in its GSI2 partition of the new
layout, an interrupted run resumes losing and repeating nothing, and lists stay complete."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest

from cli.main import main
from datasource import GSI2PK, DynamoConfig, Item, PaymentStore, Placed, count_calls, to_item
from domain import keys
from domain.enums import PaymentStatus
from domain.keys import FeedLayout, StatusLayout
from domain.payment import Payment
from domain.transitions import TransitionRequest, apply_transition
from jobs.errors import CheckpointRefused
from jobs.reshard import ReshardCheckpoint, fresh_checkpoint, load_reshard_checkpoint, reshard
from tests.backends import CURSOR_SECRET, TEST_KEY, Backend, fresh_table
from tests.datasource.shard_pages import every_page, ids, mixed_payments, newest_first
from tests.datasource.sharded_tables import event_ids, lives, seed
from tests.datasource.stored_items import all_items, put_all
from tests.payment_samples import sample_payment, stored_move, stored_new


@pytest.fixture
def backend(ddblocal_backend: Backend) -> Backend:
    """DynamoDB Local only, not moto as well: these read many shards of many payments, and
    moto's Query goes through its whole table in Python (about 12 ms of this process's CPU a
    call, 3 with DynamoDB Local's JVM); the store's reads on moto are the other files' tests."""
    return ddblocal_backend


S = PaymentStatus
StoreOf = Callable[[StatusLayout], PaymentStore]


@pytest.fixture
async def table(backend: Backend) -> AsyncIterator[str]:
    table_name = await fresh_table(backend)
    yield table_name
    await backend.client.delete_table(TableName=table_name)


@pytest.fixture
def store_of(backend: Backend, table: str) -> StoreOf:
    def store(layout: StatusLayout) -> PaymentStore:
        return PaymentStore(
            backend.client, table_name=table, cursor_secret=CURSOR_SECRET, layout=layout
        )

    return store


def start(table: str, layout: StatusLayout) -> ReshardCheckpoint:
    return ReshardCheckpoint(
        table_name=table, shards=layout.shards, sources=tuple(layout.source_partitions())
    )


def without_gsi2_partition(items: list[Item]) -> list[Item]:
    return sorted(
        ({k: v for k, v in item.items() if k != GSI2PK} for item in items),
        key=lambda item: (item["PK"]["S"], item["SK"]["S"]),
    )


async def assert_all_in(store: PaymentStore, shards: int, payments: list[Payment]) -> None:
    placed = {
        item["loc_payment_id"]["S"]: item[GSI2PK]["S"]
        for item in await all_items(store)
        if GSI2PK in item
    }
    assert placed == {p.payment_id: keys.status_partition(p.payment_id, shards) for p in payments}


async def test_a_reshard_moves_every_payment_and_nothing_else(
    store_of: StoreOf, table: str, tmp_path: Path
) -> None:
    payments = mixed_payments(130)
    await put_all(store_of(StatusLayout(1)), payments)
    before = await all_items(store_of(StatusLayout(1)))
    layout = StatusLayout(4, also_read=(1,))

    final = await reshard(
        store_of(layout), start(table, layout), checkpoint_path=tmp_path / "cp", page_size=40
    )

    assert final.finished and final.counts.scanned == final.counts.moved == 130
    await assert_all_in(store_of(StatusLayout(4)), 4, payments)
    after = await all_items(store_of(StatusLayout(4)))
    # Only GSI2PK changed: no version, no event, no other attribute, no item more or less.
    assert without_gsi2_partition(after) == without_gsi2_partition(before)
    pages = await every_page(store_of(StatusLayout(4)), S.PENDING, first=9)
    assert [i for page in ids(pages) for i in page] == newest_first(payments, S.PENDING)
    saved = load_reshard_checkpoint(tmp_path / "cp")
    assert saved is not None and saved.finished and saved.counts == final.counts


async def test_from_4_to_16_leaves_in_place_what_already_is(store_of: StoreOf, table: str) -> None:
    payments = mixed_payments(120)
    await put_all(store_of(StatusLayout(4)), payments)
    layout = StatusLayout(16, also_read=(4,))

    final = await reshard(store_of(layout), start(table, layout), checkpoint_path=None)

    in_place = sum(
        keys.status_partition(p.payment_id, 4) == keys.status_partition(p.payment_id, 16)
        for p in payments
    )
    assert (final.counts.in_place, final.counts.moved) == (in_place, 120 - in_place)
    await assert_all_in(store_of(StatusLayout(16)), 16, payments)


class Crash(Exception):
    pass


class CrashingStore(PaymentStore):
    """A store whose process dies after `moves` moves, in the middle of a page."""

    def __init__(self, base: PaymentStore, moves: int) -> None:
        super().__init__(
            base.client, table_name=base.table_name, cursor_secret=CURSOR_SECRET, layout=base.layout
        )
        self.left = moves

    async def move_to_partition(self, payment: Placed, partition: str) -> bool:
        if self.left == 0:
            raise Crash()
        self.left -= 1
        return await super().move_to_partition(payment, partition)


async def test_an_interrupted_reshard_resumes_losing_and_repeating_nothing(
    store_of: StoreOf, table: str, tmp_path: Path
) -> None:
    payments = mixed_payments(200)
    await put_all(store_of(StatusLayout(1)), payments)
    before = await all_items(store_of(StatusLayout(1)))
    layout = StatusLayout(4, also_read=(1,))
    checkpoint = tmp_path / "reshard.json"

    with pytest.raises(Crash):
        await reshard(
            CrashingStore(store_of(layout), moves=110),
            start(table, layout),
            checkpoint_path=checkpoint,
            page_size=30,
            concurrency=4,
        )

    # Halfway: some payments in each layout; the service reading both lists each one once.
    saved = load_reshard_checkpoint(checkpoint)
    assert saved is not None and not saved.finished and saved.counts.moved == 90
    partitions = {item[GSI2PK]["S"] for item in await all_items(store_of(layout)) if GSI2PK in item}
    assert "PAYMENT" in partitions and len(partitions) > 1
    for status in (S.PENDING, S.RETRY, S.ACHSENT):
        pages = await every_page(store_of(layout), status, first=7)
        assert [i for page in ids(pages) for i in page] == newest_first(payments, status)

    final = await reshard(store_of(layout), saved, checkpoint_path=checkpoint, page_size=30)

    assert final.finished
    # The resumed run lists only what was still to move (the crashed page's moves are done).
    assert final.counts.moved + final.counts.changed <= 200 and final.counts.moved >= 90
    await assert_all_in(store_of(StatusLayout(4)), 4, payments)
    after = await all_items(store_of(StatusLayout(4)))
    assert without_gsi2_partition(after) == without_gsi2_partition(before)


async def test_a_payment_the_service_moved_meanwhile_is_left_alone(store_of: StoreOf) -> None:
    payments = mixed_payments(1)
    await put_all(store_of(StatusLayout(1)), payments)
    new = store_of(StatusLayout(4, also_read=(1,)))
    page = await new.status_partition_page("PAYMENT", start_key=None, limit=10)
    [listed] = page.payments
    # Meanwhile the service rewrote it in the new layout.
    await put_all(store_of(StatusLayout(4)), payments)

    assert not await new.move_to_partition(listed, "PAYMENT#0")
    await assert_all_in(new, 4, payments)


@pytest.fixture
def _root_logging_restored() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("_root_logging_restored")
def test_the_command_refuses_to_run_when_the_record_names_no_old_layout(
    moto_config: DynamoConfig,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert moto_config.endpoint_url is not None
    monkeypatch.setenv("LOC_DYNAMODB_ENDPOINT", moto_config.endpoint_url)
    monkeypatch.setenv("LOC_TABLE_NAME", moto_config.table_name)
    monkeypatch.setenv("LOC_GSI2_SHARDS", "4")
    # An empty table is recorded in the layouts the settings name at its first opening.
    assert main(["reshard"]) == 1
    assert "nothing to reshard: GSI2's payments are all in 4 shard(s)" in capsys.readouterr().err


@pytest.mark.usefixtures("_root_logging_restored")
def test_the_command_reshards_and_refuses_another_runs_checkpoint(
    moto_config: DynamoConfig,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The command runs its own event loop, so this test is synchronous, and so is its client.
    client = boto3.client(
        "dynamodb",
        endpoint_url=moto_config.endpoint_url,
        region_name=moto_config.region,
        aws_access_key_id=TEST_KEY,
        aws_secret_access_key=TEST_KEY,
    )
    payments = mixed_payments(30)
    for payment in payments:
        client.put_item(TableName=moto_config.table_name, Item=to_item(payment))
    assert moto_config.endpoint_url is not None
    monkeypatch.setenv("LOC_DYNAMODB_ENDPOINT", moto_config.endpoint_url)
    monkeypatch.setenv("LOC_TABLE_NAME", moto_config.table_name)
    monkeypatch.setenv("LOC_GSI2_SHARDS", "4")
    monkeypatch.setenv("LOC_GSI2_READ_SHARDS", "1")
    checkpoint = tmp_path / "cp.json"

    assert main(["reshard", "--checkpoint", str(checkpoint), "--page-size", "7"]) == 0

    told = capsys.readouterr().err
    assert "scanned 30, moved 30, in place 0, changed 0" in told
    assert told.endswith(
        "recorded in the table's layout record: within 10 s every instance reads that layout "
        "alone\n"
    )
    assert json.loads(checkpoint.read_text())["position"] == 1
    items = client.scan(TableName=moto_config.table_name)["Items"]
    [record] = [item for item in items if item["PK"]["S"] == keys.LAYOUT_PARTITION]
    assert record["loc_status_layouts"]["NS"] == ["4"], "the end recorded: only 4 shards read"
    assert {i["loc_payment_id"]["S"]: i[GSI2PK]["S"] for i in items if GSI2PK in i} == {
        p.payment_id: keys.status_partition(p.payment_id, 4) for p in payments
    }
    monkeypatch.setenv("LOC_GSI2_SHARDS", "16")
    assert main(["reshard", "--checkpoint", str(checkpoint)]) == 1
    assert "belongs to a reshard with LOC_GSI2_SHARDS 4, not 16" in capsys.readouterr().err
    checkpoint.write_text("{}")
    with pytest.raises(CheckpointRefused):
        load_reshard_checkpoint(checkpoint)


@pytest.mark.usefixtures("_root_logging_restored")
def test_a_feed_reshard_says_from_when_as_a_person_reads_it(
    moto_config: DynamoConfig,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert moto_config.endpoint_url is not None
    monkeypatch.setenv("LOC_DYNAMODB_ENDPOINT", moto_config.endpoint_url)
    monkeypatch.setenv("LOC_TABLE_NAME", moto_config.table_name)
    monkeypatch.setenv("LOC_EVENTS_SHARDS", "1")
    assert main(["reshard"]) == 1  # the table's first opening records the feed in one shard
    capsys.readouterr()
    monkeypatch.setenv("LOC_EVENTS_SHARDS", "2")

    assert main(["reshard"]) == 0

    told = capsys.readouterr().err
    found = re.search(r"the feed is written in 2 shard\(s\) from (\S+) on\n", told)
    assert found is not None, told
    assert datetime.fromisoformat(found[1]) > datetime.now(UTC)  # a moment ahead, no key
    assert "$" not in told


async def test_a_table_of_seed_data_stays_whole_under_the_defaults_until_its_reshard_ends(
    backend: Backend, table: str
) -> None:
    """A deployment that set nothing: its table holds the seed's one-shard layouts and no
    layout record. The service with the default settings reads both layouts and writes the
    new; a reshard under live writes and pages loses and repeats nothing, and after it only the
    new layout is read."""
    payments, events = lives(120, start=datetime.now(UTC) - timedelta(minutes=5))
    seed_store = PaymentStore(backend.client, table_name=table, cursor_secret=CURSOR_SECRET)
    await seed(seed_store, payments, events)

    async def service() -> PaymentStore:
        store = PaymentStore(
            backend.client,
            table_name=table,
            cursor_secret=CURSOR_SECRET,
            layout=StatusLayout(keys.DEFAULT_GSI2_SHARDS),
            feed=FeedLayout.of(keys.DEFAULT_FEED_SHARDS),
        )
        await store.follow_layout_record(
            feed_shards=keys.DEFAULT_FEED_SHARDS,
            refresh_seconds=10,
            settle_seconds=5,
        )
        return store

    store = await service()
    assert store.layout == StatusLayout(64, also_read=(1,))
    assert store.feed_layout.changes[0] == (keys.FEED_START, 1)
    assert store.feed_layout.latest == 32
    everything = await every_page(store, S.PENDING, first=13)
    assert [i for page in ids(everything) for i in page] == newest_first(payments, S.PENDING)
    feed = await store.events(first=100, after=None, types=None, created_after=None, upper="9")
    assert event_ids([feed])[0] == [(e.payment_id, e.version) for e in events[:100]]

    # Live writes (new payments, each moved) and pages while the reshard runs.
    written: list[Payment] = []
    stop = asyncio.Event()

    async def write() -> None:
        while not stop.is_set():
            new = await stored_new(store, sample_payment(user_id="live"))
            request = TransitionRequest.checked(S.SKIPPED, "customer asked")
            moved = apply_transition(new, request, max_attempts=3, now=new.updated_at)
            written.append(await stored_move(store, new, moved))

    async def read() -> None:
        while not stop.is_set():
            pages = await every_page(store, S.PENDING, first=17)
            listed = [i for page in ids(pages) for i in page]
            assert len(listed) == len(set(listed)), "none repeated"
            # (A live payment is PENDING between its creation and its move.)
            seeded = [i for i in listed if i in pending]
            assert seeded == newest_first(payments, S.PENDING), "none lost"

    pending = set(newest_first(payments, S.PENDING))
    writer, reader = asyncio.create_task(write()), asyncio.create_task(read())
    final = await reshard(
        store, fresh_checkpoint(table, store.layout), checkpoint_path=None, page_size=20
    )
    stop.set()
    await asyncio.gather(writer, reader)

    assert final.finished and final.counts.moved == len(payments)
    record = await store.layout_record()
    assert record is not None and record.status == {64}
    after = await service()
    assert after.layout == StatusLayout(64) and written
    skipped = await every_page(after, S.SKIPPED, first=50)
    expected = [p.payment_id for p in reversed(payments + written) if p.status is S.SKIPPED]
    assert [i for page in ids(skipped) for i in page] == expected
    with count_calls() as calls:
        await after.payments_by_status(status=S.PENDING, first=100)
    assert calls.list_rounds <= 3 and calls.operations["Query"] < 2 * 64
