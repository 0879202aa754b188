"""Live updates of a fleet through a broker (SPEC §17, `LOC_LIVE_BROKER_URL`).

Each instance runs two tasks. `StreamReader` competes for the lease of the one stream reader;
while it holds it, it runs the table's `DynamoDBStreamSource` from the last checkpoint and
appends what it reads to the broker (`BrokerSink`), every write fenced by its lease's token, and
releases the lease when it stops or fails. `BrokerFollower` publishes every entry of the broker's
stream to this instance's `EventHub`, in order; a gap (a `seq` skipped, the `epoch` changed, the
stream gone back) closes every subscription with 4413, never a silent hole. Subscriptions at the
stream's head start after a round of the reader begun after they registered, as on one instance.

How, and what was tested: docs/live-updates.md#a-fleet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from collections.abc import Callable, Sequence

from datasource import (
    DynamoDBStreamSource,
    Entry,
    LeaseLost,
    Received,
    RedisBroker,
    ShardPosition,
    SinkRefused,
    event_from_item,
)
from domain.errors import PaymentsError, StorageUnavailable
from resolvers.event_hub import FEED_GAP_REASON, EventHub

__all__ = ["READ_BLOCK_MS", "BrokerFollower", "StreamReader"]

logger = logging.getLogger("loc_payments.live")

# How long the follower's read waits for an entry, in milliseconds; and the longest wait
# between two tries while the broker cannot be reached, in seconds.
READ_BLOCK_MS = 1000
MAX_RETRY_DELAY = 2.0


class BrokerSink:
    """A `StreamSink` that appends to the broker under a lease's token."""

    def __init__(self, broker: RedisBroker, token: str) -> None:
        self._broker = broker
        self._token = token
        self._requested = 0  # the rounds asked for when the current round began
        self._announced = 0

    async def round_started(self) -> None:
        try:
            self._requested = await self._broker.rounds_requested()
        except StorageUnavailable as error:
            raise SinkRefused(str(error)) from error

    async def deliver(
        self, shard_id: str, events: Sequence[Received], position: ShardPosition
    ) -> None:
        try:
            await self._broker.publish(
                self._token,
                shard_id=shard_id,
                position=position,
                images=[received.image for received in events],
            )
        except StorageUnavailable as error:
            raise SinkRefused(str(error)) from error

    async def round_finished(self) -> None:
        if self._requested <= self._announced:
            return
        try:
            await self._broker.announce_round(self._token, self._requested)
        except StorageUnavailable as error:
            raise SinkRefused(str(error)) from error
        self._announced = self._requested


class StreamReader:
    """Competes for the lease, and reads the stream while holding it (see the module)."""

    def __init__(
        self,
        broker: RedisBroker,
        source: Callable[[dict[str, ShardPosition]], DynamoDBStreamSource],
        *,
        lease_seconds: float,
    ) -> None:
        """`source` makes the table's stream source, resuming at the positions given."""
        self._broker = broker
        self._source = source
        self._ttl_ms = int(lease_seconds * 1000)
        self._period = lease_seconds / 3
        self.holding = False  # this instance holds the lease
        self.source: DynamoDBStreamSource | None = None  # what it reads, while it holds it

    async def run(self) -> None:
        while True:
            token = uuid.uuid4().hex
            try:
                if await self._broker.acquire(token, self._ttl_ms):
                    await self._hold(token)
            except StorageUnavailable as error:
                logger.warning("cannot compete for the stream reader's lease (%s)", error)
            except Exception:
                # Whatever ended the reading, this instance competes again (its lease is freed).
                logger.exception("the stream reader stopped")
            # Spread the tries of a fleet that starts at once.
            await asyncio.sleep(self._period * random.uniform(0.5, 1.0))

    async def _hold(self, token: str) -> None:
        self.holding = True
        logger.info("this instance reads the table's stream (lease %s)", token[:8])
        try:
            source = self.source = self._source(await self._broker.checkpoints())
            async with asyncio.TaskGroup() as group:
                group.create_task(source.run(BrokerSink(self._broker, token)))
                group.create_task(self._renew(token, source))
        except* LeaseLost:
            logger.warning("the stream reader's lease was lost: reading stops")
        finally:
            self.holding, self.source = False, None
            # Stopping (or failing) while it holds: hand the lease over at once, not after its
            # time. A token that lost it releases nothing.
            with contextlib.suppress(StorageUnavailable, TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._broker.release(token)

    async def _renew(self, token: str, source: DynamoDBStreamSource) -> None:
        """Renew every third of the lease's time; `LeaseLost` once it is not ours, or could not
        be renewed for as long as it lasts (another may hold it by then)."""
        loop = asyncio.get_running_loop()
        renewed = loop.time()
        while True:
            await asyncio.sleep(self._period)
            try:
                held = await self._broker.renew(token, self._ttl_ms, reading=source.ready.is_set())
            except StorageUnavailable as error:
                logger.warning("cannot renew the stream reader's lease (%s)", error)
                if loop.time() - renewed > self._ttl_ms / 1000 - self._period:
                    raise LeaseLost from error
                continue
            if not held:
                raise LeaseLost
            renewed = loop.time()


class BrokerFollower:
    """Reads the broker's stream into this instance's hub (see the module)."""

    def __init__(self, broker: RedisBroker, hub: EventHub) -> None:
        self._broker = broker
        self._hub = hub
        self._epoch: str | None = None
        self._after = "$"
        self._seq: int | None = None
        self._requested: int | None = None  # the round this instance waits for
        self.connected = False
        self.reader_ready = False
        self.ready = asyncio.Event()

    @property
    def healthy(self) -> bool:
        return self.connected and self.reader_ready

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                await self._sync()
                failures = 0
                while True:
                    await self._follow()
            except StorageUnavailable as error:
                if self.connected:
                    logger.warning("lost the live updates' broker (%s)", error)
                self.connected = self.reader_ready = False
                await asyncio.sleep(min(MAX_RETRY_DELAY, 0.1 * 2 ** min(failures, 5)))
                failures += 1

    async def _sync(self) -> None:
        """Where to read from, on start and after the broker was lost: a broker that changed
        epoch, or whose stream is behind what this instance read, had a gap."""
        epoch = await self._broker.epoch()
        last_id, last_seq = await self._broker.last()
        if self._seq is None:
            self._after, self._seq = last_id, last_seq
        elif epoch != self._epoch or last_seq < self._seq:
            self._gap(f"the broker lost entries (seq {self._seq} -> {last_seq})")
            self._after, self._seq = last_id, last_seq
        self._epoch = epoch
        self._requested = None
        self.reader_ready = await self._broker.reader_ready()
        self.connected = True
        self.ready.set()

    async def _follow(self) -> None:
        if self._hub.waiting and self._requested is None:
            # Open the hub's round first: whoever registered before it is served by the
            # reader's round that counts this request.
            self._hub.round_started()
            self._requested = await self._broker.request_round()
        entries = await self._broker.read(self._after, block_ms=READ_BLOCK_MS)
        for entry in entries:
            self._take(entry)
        self.reader_ready = await self._broker.reader_ready()

    def _take(self, entry: Entry) -> None:
        assert self._seq is not None
        if entry.seq != self._seq + 1:
            self._gap(f"entry {entry.seq} after {self._seq}")
        self._after, self._seq = entry.entry_id, entry.seq
        if entry.image is not None:
            try:
                event = event_from_item(entry.image)
            except (KeyError, ValueError, PaymentsError):
                logger.exception("skipped a broker entry that does not decode: %s", entry.entry_id)
                return
            self._hub.publish(event)
        elif self._requested is not None and (entry.round or 0) >= self._requested:
            self._requested = None
            self._hub.round_finished()

    def _gap(self, why: str) -> None:
        logger.warning("live updates had a gap (%s): closing subscriptions", why)
        self._requested = None
        self._hub.interrupt_all(FEED_GAP_REASON)
