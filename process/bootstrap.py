"""What `serve` and `collect` set up before they work: the DynamoDB they talk to and the store.

In `local` without an endpoint the command starts DynamoDB Local for its own life, and in `local`
a missing table is created; elsewhere both belong to the infrastructure (`Settings`), and the
service compares the table with what it needs before it writes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from types import FrameType
from typing import TYPE_CHECKING, NamedTuple, TextIO

from datasource import LOCAL_SETUP, PaymentStore, acting_as, create_table_if_missing, open_store
from domain.keys import FeedLayout
from process.embedded_dynamodb import EmbeddedDynamoDB
from process.settings import Settings

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = ["dynamodb_endpoint", "payment_store"]


@contextlib.contextmanager
def dynamodb_endpoint(
    settings: Settings,
    *,
    announce_to: TextIO,
    exit_status_on_sigterm: int,
    supervise: bool = False,
) -> Iterator[str | None]:
    """The endpoint the settings name, or that of a DynamoDB Local started for the block (its
    address printed to `announce_to`).

    While the block runs, SIGTERM raises SystemExit(`exit_status_on_sigterm`): it unwinds the
    `with` blocks, so DynamoDB Local is stopped instead of orphaned. With `supervise`, a
    DynamoDB Local that exits is started again (`EmbeddedDynamoDB.supervise`); when that gives
    up, the process is sent SIGTERM and exits with status 1.
    """
    gave_up: list[str] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(1 if gave_up else exit_status_on_sigterm)

    def give_up(why: str) -> None:
        gave_up.append(why)
        print(f"loc-payments: {why}", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        if not settings.uses_embedded_dynamodb:
            yield settings.dynamodb_endpoint
            return
        with EmbeddedDynamoDB(data_dir=settings.data_dir) as database:
            print(
                f"DynamoDB Local: {database.endpoint_url} (data in {settings.data_dir})",
                file=announce_to,
                flush=True,
            )
            if supervise:
                first = settings.dynamodb_local_restart_backoff
                database.supervise(give_up, backoff=tuple(first * 2**n for n in range(5)))
            yield database.endpoint_url
    finally:
        signal.signal(signal.SIGTERM, previous)


class OpenedStore(NamedTuple):
    store: PaymentStore
    # True when this opening made the table (in `local` only).
    created_table: bool


@contextlib.asynccontextmanager
async def payment_store(
    settings: Settings,
    *,
    endpoint_url: str | None = None,
    client: DynamoDBClient | None = None,
    tracer: Tracer | None = None,
    compare_table: bool = False,
) -> AsyncIterator[OpenedStore]:
    """The store on the settings' table, open for the block; `endpoint_url` (the embedded
    DynamoDB's, if any) wins over the settings'. `tracer` (`process.tracing`) traces its calls.
    With `compare_table` (the serving process), a table the service did not make (`test`,
    `prod`) is first compared with what it needs, its stream if live updates read it
    (`PaymentStore.compare_definition`): until it is, no write is sent.

    `client`, an open client the caller owns (the benchmark's fake DynamoDB), replaces the one
    this would open. The store writes and reads in the layouts the table's layout record names
    (`datasource.layouts`: made at the first start); on a client the caller brings, in the
    settings' alone.
    """
    config = settings.dynamo_config(endpoint_url)
    secret = settings.cursor_secret.get_secret_value().encode()
    layout = settings.status_layout
    feed = FeedLayout.of(settings.events_shards)
    opened = (
        open_store(config, cursor_secret=secret, layout=layout, feed=feed, tracer=tracer)
        if client is None
        else contextlib.nullcontext(
            PaymentStore(
                client,
                table_name=config.table_name,
                cursor_secret=secret,
                layout=layout,
                feed=feed,
                coalesce=config.coalesce_lookups,
                tracer=tracer,
            )
        )
    )
    async with opened as store:
        created = False
        if settings.creates_missing_table:
            with acting_as(LOCAL_SETUP):
                created = await create_table_if_missing(
                    store.client, config.table_name, stream=settings.live_updates
                )
        elif compare_table:
            await store.compare_definition(stream=settings.live_updates)
        if client is None:
            await store.follow_layout_record(
                feed_shards=settings.events_shards,
                refresh_seconds=settings.layout_refresh_seconds,
                settle_seconds=settings.events_settle_seconds,
            )
        yield OpenedStore(store, created)
