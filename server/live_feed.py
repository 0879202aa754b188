"""This instance's live updates: the table's change feed read into the subscribers' hub.

Without a broker (the default, one instance or two) this instance reads every shard of the
table's DynamoDB Stream itself (`datasource.streams`) and publishes each stored event to
`resolvers.event_hub.EventHub`, which fans it out to this instance's subscriptions. With
`LOC_LIVE_BROKER_URL` (a fleet, SPEC §17) one instance of the fleet reads the stream, holding a
lease, and every instance reads the events from the broker (`server.live_fleet`). Either way a
write through any instance reaches every instance's subscribers. With `live_updates` off (or on
the benchmark's fake DynamoDB, which has no stream) the hub exists but nothing feeds it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from datasource import (
    DynamoDBStreamSource,
    PaymentStore,
    Received,
    ShardPosition,
    open_live_broker,
    open_streams_client,
)
from process.settings import Settings
from resolvers.event_hub import EventHub
from server.background import running
from server.live_fleet import READ_BLOCK_MS, BrokerFollower, StreamReader

__all__ = ["LiveFeed", "live_feed"]

# Seconds a broker command may take before the broker counts as unreachable; a blocking read
# waits `live_fleet.READ_BLOCK_MS` beyond it.
BROKER_TIMEOUT = 2.0


class HubSink:
    """A `StreamSink` publishing straight to this instance's hub (no broker)."""

    def __init__(self, hub: EventHub) -> None:
        self._hub = hub

    async def round_started(self) -> None:
        self._hub.round_started()

    async def deliver(
        self, shard_id: str, events: Sequence[Received], position: ShardPosition
    ) -> None:
        for received in events:
            self._hub.publish(received.event)

    async def round_finished(self) -> None:
        self._hub.round_finished()


@dataclass(frozen=True, slots=True)
class LiveFeed:
    hub: EventHub
    source: DynamoDBStreamSource | None = None
    follower: BrokerFollower | None = None
    reader: StreamReader | None = None

    @property
    def state(self) -> str:
        """For `/readyz`: off, ok, or unavailable (the stream, or with a broker the broker or
        a ready stream reader, cannot be reached)."""
        if self.follower is not None:
            return "ok" if self.follower.healthy else "unavailable"
        if self.source is None:
            return "off"
        return "ok" if self.source.healthy else "unavailable"

    @property
    def reads_stream(self) -> bool:
        """Whether this instance reads the table's stream now."""
        if self.reader is not None:
            return self.reader.holding
        return self.source is not None

    @property
    def stream_seconds_behind(self) -> float | None:
        """How far this instance's reading of the stream is behind; None if it reads none."""
        source = self.reader.source if self.reader is not None else self.source
        return None if source is None else source.seconds_behind

    def close(self) -> None:
        """End every subscription (the service is stopping)."""
        self.hub.close_all()


@contextlib.asynccontextmanager
async def live_feed(
    settings: Settings, store: PaymentStore, *, endpoint_url: str | None, reads_stream: bool
) -> AsyncIterator[LiveFeed]:
    hub = EventHub(queue_size=settings.subscriber_queue_size)
    if not (settings.live_updates and reads_stream):
        yield LiveFeed(hub)
        return
    async with open_streams_client(settings.dynamo_config(endpoint_url)) as streams:

        def source(positions: dict[str, ShardPosition] | None = None) -> DynamoDBStreamSource:
            return DynamoDBStreamSource(
                store.client,
                streams,
                table_name=store.table_name,
                poll_interval=settings.stream_poll_interval,
                tracer=store.tracer,
                positions=positions,
            )

        if settings.live_broker_url is None:
            local = source()
            async with running(local.run(HubSink(hub))):
                feed = LiveFeed(hub, source=local)
                try:
                    yield feed
                finally:
                    feed.close()
            return
        async with open_live_broker(
            settings.live_broker_url.get_secret_value(),
            table_name=settings.table_name,
            max_length=settings.live_broker_stream_length,
            command_timeout=BROKER_TIMEOUT,
            read_block=READ_BLOCK_MS / 1000,
        ) as broker:
            follower = BrokerFollower(broker, hub)
            reader = StreamReader(broker, source, lease_seconds=settings.live_lease_seconds)
            async with running(follower.run()), running(reader.run()):
                feed = LiveFeed(hub, follower=follower, reader=reader)
                try:
                    yield feed
                finally:
                    feed.close()
