"""The change feed: the table's DynamoDB Stream read into payment events, on DynamoDB Local."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from botocore.exceptions import ClientError

from datasource import DynamoConfig, PaymentStore
from datasource import streams as streams_module
from datasource.batch import Backoff
from datasource.client import open_streams_client
from datasource.errors import SinkRefused
from datasource.streams import ChangeSource, DynamoDBStreamSource, Received, ShardPosition
from datasource.table import create_table_if_missing, table_definition
from domain.enums import PaymentMethod, PaymentStatus
from domain.history import PaymentEvent, event_of
from domain.idempotency import CallerKind, claim_for
from domain.payment import Payment
from domain.transitions import RULES, apply_transition
from tests.backends import Backend, backend_config
from tests.eventually import eventually
from tests.payment_samples import (
    LATER,
    TEST_ACTOR,
    payment_in,
    request_for,
    stored_move,
    stored_new,
)

pytestmark = pytest.mark.ddblocal

S = PaymentStatus
POLL_INTERVAL = 0.05
WAIT = 15.0


async def nothing_else_came(store: PaymentStore, published: list[PaymentEvent]) -> None:
    """Once a payment created now has been published: the stream is read in order, so anything
    else still to come (a repeat) would have come before it. It is taken off `published`."""
    sentinel = await stored_new(store, payment_in(S.PENDING, PaymentMethod.ACH))
    await eventually(
        lambda: any(event.payment_id == sentinel.payment_id for event in published),
        what="the event of a payment created after",
    )
    assert published[-1].payment_id == sentinel.payment_id, published
    published.pop()


@dataclasses.dataclass
class Collected:
    """A `StreamSink` that keeps the events it is given, the last position of each shard, and
    tells `rounds` (if any) of the rounds."""

    published: list[PaymentEvent]
    rounds: Any = None
    positions: dict[str, ShardPosition] = dataclasses.field(default_factory=dict)

    async def round_started(self) -> None:
        if self.rounds is not None:
            self.rounds.round_started()

    async def deliver(
        self, shard_id: str, events: Sequence[Received], position: ShardPosition
    ) -> None:
        self.published.extend(received.event for received in events)
        self.positions[shard_id] = position

    async def round_finished(self) -> None:
        if self.rounds is not None:
            self.rounds.round_finished()


@contextlib.asynccontextmanager
async def running(
    source: ChangeSource, publish: list[PaymentEvent] | Collected
) -> AsyncIterator[asyncio.Task[None]]:
    sink = publish if isinstance(publish, Collected) else Collected(publish)
    task = asyncio.create_task(source.run(sink))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def moved(store: PaymentStore, current: Payment, target: PaymentStatus) -> Payment:
    rule = next(r for r in RULES if r.source is current.status and r.target is target)
    updated = apply_transition(current, request_for(rule), max_attempts=3, now=LATER)
    return await stored_move(store, current, updated)


async def test_each_new_payment_event_is_published_once_in_order_and_nothing_else(
    ddblocal_backend: Backend, ddblocal_config: DynamoConfig, ddblocal_store: PaymentStore
) -> None:
    store = ddblocal_store
    before_start = await stored_new(store, payment_in(S.PENDING, PaymentMethod.ACH))
    published: list[PaymentEvent] = []
    async with open_streams_client(ddblocal_config) as streams:
        source = DynamoDBStreamSource(
            ddblocal_backend.client,
            streams,
            table_name=ddblocal_config.table_name,
            poll_interval=POLL_INTERVAL,
        )
        async with running(source, published) as task:
            await asyncio.wait_for(source.ready.wait(), WAIT)
            assert source.healthy

            # Interleaved writes of two payments, with an idempotency record and two claims.
            ach = payment_in(S.PENDING, PaymentMethod.ACH)
            ach = await stored_new(
                store, ach, idempotency=claim_for("key-1", ach, caller=CallerKind.SERVICE)
            )
            pinless = await stored_new(
                store, payment_in(S.PENDING, PaymentMethod.PINLESS, user_id="bob")
            )
            ach_sent = await moved(store, ach, S.ACHSENT)
            pinless_retry = await moved(store, pinless, S.RETRY)
            ach_done = await moved(store, ach_sent, S.COMPLETED)
            pinless_done = await moved(store, pinless_retry, S.COMPLETED)
            skipped = await moved(store, before_start, S.SKIPPED)
            expected = {
                ach.payment_id: [
                    event_of(None, ach, TEST_ACTOR),
                    event_of(ach, ach_sent, TEST_ACTOR),
                    event_of(ach_sent, ach_done, TEST_ACTOR),
                ],
                pinless.payment_id: [
                    event_of(None, pinless, TEST_ACTOR),
                    event_of(pinless, pinless_retry, TEST_ACTOR),
                    event_of(pinless_retry, pinless_done, TEST_ACTOR),
                ],
                before_start.payment_id: [event_of(before_start, skipped, TEST_ACTOR)],
            }

            await eventually(lambda: len(published) >= 7, what=lambda: f"7 events, got {published}")
            await nothing_else_came(store, published)
            assert not task.done()

    # The creation written before the source started is not news; its later move is.
    assert len(published) == 7
    by_payment = {
        payment_id: [event for event in published if event.payment_id == payment_id]
        for payment_id in expected
    }
    assert by_payment == expected


@dataclasses.dataclass
class Rounds:
    """Checks the promise of `round_finished`: every event stored before the round began has
    been published by then."""

    published: list[PaymentEvent]
    stored: int = 0  # events whose writes have returned
    started: list[int] = dataclasses.field(default_factory=list)  # `stored` at each start
    finished: list[int] = dataclasses.field(default_factory=list)  # ... of each round finished

    def round_started(self) -> None:
        self.started.append(self.stored)

    def round_finished(self) -> None:
        assert len(self.published) >= self.started[-1], (self.published, self.started)
        self.finished.append(self.started[-1])


async def test_a_round_finishes_only_once_it_published_what_was_stored_before_it(
    ddblocal_backend: Backend,
    ddblocal_config: DynamoConfig,
    ddblocal_store: PaymentStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two records a call: a burst of writes takes rounds that end short of the head.
    monkeypatch.setattr(streams_module, "RECORDS_PER_CALL", 2)
    published: list[PaymentEvent] = []
    rounds = Rounds(published)
    async with open_streams_client(ddblocal_config) as streams:
        source = DynamoDBStreamSource(
            ddblocal_backend.client,
            streams,
            table_name=ddblocal_config.table_name,
            poll_interval=0.3,
        )
        task = asyncio.create_task(source.run(Collected(published, rounds)))
        try:
            await asyncio.wait_for(source.ready.wait(), WAIT)
            for _ in range(7):
                await stored_new(ddblocal_store, payment_in(S.PENDING, PaymentMethod.ACH))
                rounds.stored += 1
            await eventually(
                lambda: 7 in rounds.finished, what=lambda: f"a round after 7 writes: {rounds}"
            )
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert len(published) == 7
    # Some round read a full page (2 records) and did not finish.
    assert len(rounds.started) > len(rounds.finished) + 1


async def test_a_table_made_without_a_stream_gets_one(ddblocal_backend: Backend) -> None:
    client = ddblocal_backend.client
    table_name = f"test-{uuid.uuid4().hex}"
    old_definition: dict[str, Any] = dict(table_definition(table_name))
    del old_definition["StreamSpecification"]
    await client.create_table(**old_definition)
    try:
        assert (
            "StreamSpecification"
            not in (await client.describe_table(TableName=table_name))["Table"]
        )

        assert await create_table_if_missing(client, table_name) is False

        table = (await client.describe_table(TableName=table_name))["Table"]
        assert table["StreamSpecification"] == {
            "StreamEnabled": True,
            "StreamViewType": "NEW_IMAGE",
        }
        assert table["TableStatus"] == "ACTIVE"
        # Once it has one, it keeps that one: no new stream.
        assert await create_table_if_missing(client, table_name) is False
        again = (await client.describe_table(TableName=table_name))["Table"]
        assert again["LatestStreamArn"] == table["LatestStreamArn"]
    finally:
        await client.delete_table(TableName=table_name)


class Switch:
    """A streams client that is whichever client `to` names, for a stream that comes back."""

    def __init__(self, client: Any) -> None:
        self.to = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.to, name)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_an_unreachable_stream_is_unhealthy_and_retried_until_it_answers(
    ddblocal_backend: Backend,
    ddblocal_config: DynamoConfig,
    ddblocal_store: PaymentStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    nowhere = dataclasses.replace(
        backend_config(f"http://127.0.0.1:{closed_port()}", ddblocal_config.table_name),
        connect_timeout=0.1,
        read_timeout=0.1,
        max_attempts=1,
    )
    published: list[PaymentEvent] = []

    def warnings() -> int:
        return sum(record.name == "loc_payments.streams" for record in caplog.records)

    caplog.set_level(logging.WARNING, logger="loc_payments.streams")
    async with (
        open_streams_client(nowhere) as broken,
        open_streams_client(ddblocal_config) as working,
    ):
        streams = Switch(broken)
        source = DynamoDBStreamSource(
            ddblocal_backend.client,
            streams,
            table_name=ddblocal_config.table_name,
            poll_interval=POLL_INTERVAL,
            backoff=Backoff(base=0.01, cap=0.05),
        )
        async with running(source, published) as task:
            await eventually(lambda: warnings() >= 3, what="three failed tries, each logged")
            assert not source.healthy
            assert not source.ready.is_set()
            assert not task.done()
            # What the stream-lag alarm reads: a reader that cannot read falls behind.
            behind = source.seconds_behind
            await eventually(
                lambda: source.seconds_behind >= behind + 0.2, what="falling further behind"
            )

            streams.to = working
            await asyncio.wait_for(source.ready.wait(), WAIT)
            assert source.healthy
            await eventually(
                lambda: source.seconds_behind < 1.0, what="caught up: at the head again"
            )
            payment = await stored_new(ddblocal_store, payment_in(S.PENDING, PaymentMethod.ACH))
            await eventually(lambda: len(published) == 1, what="the event written after recovery")

    assert published == [event_of(None, payment, TEST_ACTOR)]


async def test_a_stream_turned_off_is_unhealthy_and_the_next_one_is_read_from_its_start(
    ddblocal_backend: Backend, ddblocal_config: DynamoConfig, ddblocal_store: PaymentStore
) -> None:
    client = ddblocal_backend.client
    table_name = ddblocal_config.table_name
    published: list[PaymentEvent] = []
    async with open_streams_client(ddblocal_config) as streams:
        source = DynamoDBStreamSource(
            client,
            streams,
            table_name=table_name,
            poll_interval=POLL_INTERVAL,
            backoff=Backoff(base=0.01, cap=0.05),
        )
        async with running(source, published):
            await asyncio.wait_for(source.ready.wait(), WAIT)

            await client.update_table(
                TableName=table_name, StreamSpecification={"StreamEnabled": False}
            )
            await eventually(lambda: not source.healthy, what="the source to see the stream gone")
            await create_table_if_missing(client, table_name)
            payment = await stored_new(ddblocal_store, payment_in(S.PENDING, PaymentMethod.ACH))
            await eventually(lambda: len(published) == 1, what="the event on the new stream")
            # Healthy again once the round that published it ends (it may poll other shards yet).
            await eventually(lambda: source.healthy, what="the source healthy on the new stream")

    assert published == [event_of(None, payment, TEST_ACTOR)]


class Expiring:
    """A streams client whose iterators all expire while `expired` is set."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.expired = False
        self.opened: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    async def get_records(self, **arguments: Any) -> Any:
        if self.expired:
            error = {"Code": "ExpiredIteratorException", "Message": "Iterator expired"}
            raise ClientError({"Error": error}, "GetRecords")
        return await self.client.get_records(**arguments)

    async def get_shard_iterator(self, **arguments: Any) -> Any:
        self.opened.append(arguments)
        return await self.client.get_shard_iterator(**arguments)


async def test_an_expired_iterator_is_reopened_after_the_last_record_read(
    ddblocal_backend: Backend, ddblocal_config: DynamoConfig, ddblocal_store: PaymentStore
) -> None:
    published: list[PaymentEvent] = []
    async with open_streams_client(ddblocal_config) as working:
        streams = Expiring(working)
        source = DynamoDBStreamSource(
            ddblocal_backend.client,
            streams,
            table_name=ddblocal_config.table_name,
            poll_interval=POLL_INTERVAL,
        )
        async with running(source, published):
            await asyncio.wait_for(source.ready.wait(), WAIT)
            first = await stored_new(ddblocal_store, payment_in(S.PENDING, PaymentMethod.ACH))
            await eventually(lambda: len(published) == 1, what="the first event")

            streams.expired = True
            await eventually(
                lambda: len(streams.opened) >= 3, what="re-opening the expired iterator"
            )
            second = await moved(ddblocal_store, first, S.ACHSENT)
            third = await stored_new(ddblocal_store, payment_in(S.PENDING, PaymentMethod.ACH))
            streams.expired = False
            await eventually(lambda: len(published) == 3, what="the events written meanwhile")
            await nothing_else_came(ddblocal_store, published)
            assert source.healthy

    assert published == [
        event_of(None, first, TEST_ACTOR),
        event_of(first, second, TEST_ACTOR),
        event_of(None, third, TEST_ACTOR),
    ]
    assert streams.opened[0]["ShardIteratorType"] == "LATEST"
    assert {opened["ShardIteratorType"] for opened in streams.opened[1:]} == {
        "AFTER_SEQUENCE_NUMBER"
    }


async def test_a_source_resumed_at_anothers_positions_reads_what_that_one_had_not(
    ddblocal_backend: Backend, ddblocal_config: DynamoConfig, ddblocal_store: PaymentStore
) -> None:
    """The takeover of a fleet's stream reader (SPEC §17): the next reader starts at the
    positions the last one delivered, so what was written while none read is read once."""
    first: list[PaymentEvent] = []
    second: list[PaymentEvent] = []
    collected = Collected(first)
    async with open_streams_client(ddblocal_config) as streams:

        def source(positions: dict[str, ShardPosition] | None = None) -> DynamoDBStreamSource:
            return DynamoDBStreamSource(
                ddblocal_backend.client,
                streams,
                table_name=ddblocal_config.table_name,
                poll_interval=POLL_INTERVAL,
                positions=positions,
            )

        reader = source()
        async with running(reader, collected):
            await asyncio.wait_for(reader.ready.wait(), WAIT)
            read = await stored_new(ddblocal_store, payment_in(S.PENDING, PaymentMethod.ACH))
            await eventually(lambda: len(first) == 1, what="the first reader's event")
        unread = await stored_new(ddblocal_store, payment_in(S.PENDING, PaymentMethod.ACH))
        moved_unread = await moved(ddblocal_store, unread, S.ACHSENT)
        takeover = source(collected.positions)
        async with running(takeover, second):
            await eventually(lambda: len(second) == 2, what="the writes no reader read")
            await nothing_else_came(ddblocal_store, second)

    assert first == [event_of(None, read, TEST_ACTOR)]
    assert [(event.payment_id, event.version) for event in second] == [
        (unread.payment_id, 1),
        (moved_unread.payment_id, 2),
    ]


@dataclasses.dataclass
class Refusing(Collected):
    """Refuses its first `refusals` deliveries that carry events, as a broker that is down."""

    refusals: int = 2

    async def deliver(
        self, shard_id: str, events: Sequence[Received], position: ShardPosition
    ) -> None:
        if events and self.refusals:
            self.refusals -= 1
            raise SinkRefused("the broker is down")
        await super().deliver(shard_id, events, position)


async def test_a_refused_delivery_is_read_again_and_delivered_once(
    ddblocal_backend: Backend, ddblocal_config: DynamoConfig, ddblocal_store: PaymentStore
) -> None:
    published: list[PaymentEvent] = []
    async with open_streams_client(ddblocal_config) as streams:
        source = DynamoDBStreamSource(
            ddblocal_backend.client,
            streams,
            table_name=ddblocal_config.table_name,
            poll_interval=POLL_INTERVAL,
            backoff=Backoff(base=0.01, cap=0.05),
        )
        sink = Refusing(published)
        async with running(source, sink):
            await asyncio.wait_for(source.ready.wait(), WAIT)
            payment = await stored_new(ddblocal_store, payment_in(S.PENDING, PaymentMethod.ACH))
            await eventually(lambda: len(published) == 1, what="the event, once accepted")
            await nothing_else_came(ddblocal_store, published)

    assert sink.refusals == 0
    assert published == [event_of(None, payment, TEST_ACTOR)]
