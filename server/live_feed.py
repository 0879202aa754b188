"""This instance's live updates: the table's change feed read into the subscribers' hub.

One reader per instance follows every shard of the table's DynamoDB Stream
(`datasource.streams`) and publishes each stored event to `resolvers.event_hub.EventHub`, which fans
it out to this instance's subscriptions. A write through any instance reaches every instance's
subscribers. With `live_updates` off (or on the benchmark's fake DynamoDB, which has no stream)
the hub exists but nothing feeds it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from datasource import PaymentStore
from datasource.client import open_streams_client
from datasource.streams import ChangeSource, DynamoDBStreamSource
from resolvers.event_hub import EventHub
from server.settings import Settings


@dataclass(frozen=True, slots=True)
class LiveFeed:
    hub: EventHub
    source: ChangeSource | None

    @property
    def state(self) -> str:
        """For `/readyz`: off, ok, or unavailable (the reader cannot reach the stream)."""
        if self.source is None:
            return "off"
        return "ok" if self.source.healthy else "unavailable"

    def close(self) -> None:
        """End every subscription (the service is stopping)."""
        self.hub.close_all()


@contextlib.asynccontextmanager
async def live_feed(
    settings: Settings, store: PaymentStore, *, endpoint_url: str | None, reads_stream: bool
) -> AsyncIterator[LiveFeed]:
    hub = EventHub(queue_size=settings.subscriber_queue_size)
    if not (settings.live_updates and reads_stream):
        yield LiveFeed(hub, None)
        return
    async with open_streams_client(settings.dynamo_config(endpoint_url)) as streams:
        source = DynamoDBStreamSource(
            store.client,
            streams,
            table_name=store.table_name,
            poll_interval=settings.stream_poll_interval,
            tracer=store.tracer,
        )
        reader = asyncio.create_task(source.run(hub.publish, hub), name="stream-reader")
        feed = LiveFeed(hub, source)
        try:
            yield feed
        finally:
            feed.close()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
