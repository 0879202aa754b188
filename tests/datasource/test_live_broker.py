"""The broker's scripts on a real `redis-server` (`datasource.live_broker`): the lease fences
every write of a reader, entries are numbered without a hole, and the checkpoint is written with
the events it follows."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from datasource.errors import LeaseLost
from datasource.live_broker import RedisBroker, open_live_broker
from datasource.streams import ShardPosition
from domain.errors import StorageUnavailable
from harness.redis_server import RedisServer
from tests.eventually import eventually

ITEM = {"PK": {"S": "USER#u"}, "SK": {"S": "HISTORY#LOAN#l#PAYMENT#p#V#000001"}}


@pytest.fixture
async def broker(redis_server: RedisServer) -> AsyncIterator[RedisBroker]:
    async with open_live_broker(
        redis_server.redis_url,
        table_name="test-table",
        max_length=1000,
        command_timeout=1.0,
        read_block=0,
    ) as broker:
        yield broker


async def test_only_the_lease_holder_appends(broker: RedisBroker) -> None:
    assert await broker.acquire("holder", 60_000)
    assert not await broker.acquire("another", 60_000)

    with pytest.raises(LeaseLost):
        await broker.publish("another", shard_id="s-1", position=ShardPosition("1"), images=[ITEM])
    await broker.publish("holder", shard_id="s-1", position=ShardPosition("1"), images=[ITEM])

    entries = await broker.read("0-0", block_ms=10)
    assert [(entry.seq, entry.image) for entry in entries] == [(1, ITEM)]
    assert await broker.checkpoints() == {"s-1": ShardPosition("1")}


async def test_a_reader_whose_lease_expired_is_fenced_off(broker: RedisBroker) -> None:
    assert await broker.acquire("paused", 100)
    # Paused past its lease (100 ms of Redis's clock): another takes it.
    await eventually(lambda: broker.acquire("next", 60_000), what="the lease run out")

    assert not await broker.renew("paused", 60_000, reading=True)
    with pytest.raises(LeaseLost):
        await broker.announce_round("paused", 1)
    assert await broker.read("0-0", block_ms=10) == []
    assert not await broker.reader_ready()
    assert await broker.renew("next", 60_000, reading=True)
    assert await broker.reader_ready()


async def test_entries_are_numbered_one_after_another_across_calls_and_holders(
    broker: RedisBroker,
) -> None:
    assert await broker.acquire("first", 60_000)
    await broker.publish("first", shard_id="s-1", position=ShardPosition("2"), images=[ITEM, ITEM])
    await broker.announce_round("first", 3)
    await broker.release("first")
    assert await broker.acquire("second", 60_000)
    await broker.publish(
        "second", shard_id="s-1", position=ShardPosition("3", closed=True), images=[ITEM]
    )

    entries = await broker.read("0-0", block_ms=10)
    assert [entry.seq for entry in entries] == [1, 2, 3, 4]
    assert entries[2].round == 3 and entries[2].image is None
    assert await broker.last() == (entries[-1].entry_id, 4)
    assert await broker.checkpoints() == {"s-1": ShardPosition("3", closed=True)}


async def test_the_epoch_stays_until_the_broker_loses_everything(
    broker: RedisBroker, redis_server: RedisServer
) -> None:
    first = await broker.epoch()
    assert await broker.epoch() == first

    redis_server.kill()
    redis_server.start()
    # The pooled connection died with the server: its first use fails, as the follower's does
    # before it syncs again.
    with contextlib.suppress(StorageUnavailable):
        await broker.epoch()

    assert await broker.epoch() != first


async def test_a_broker_that_cannot_be_reached_is_unavailable(
    broker: RedisBroker, redis_server: RedisServer
) -> None:
    """Redis's errors stay in the datasource: the fleet's tasks handle the storage error."""
    redis_server.kill()
    with pytest.raises(StorageUnavailable, match="the live updates' broker"):
        await broker.epoch()
    with pytest.raises(StorageUnavailable):
        await broker.acquire("holder", 60_000)
    with pytest.raises(StorageUnavailable):
        await broker.read("0-0", block_ms=10)
