"""Which layouts hold data (SPEC §20): the table's layout record, and an instance's view of it.

`LayoutRecord` is the one item (`keys.LAYOUT_PARTITION` / `keys.LAYOUT_SORT_KEY`) that says which
GSI2 layouts may hold payments and GSI4's layout from each feed position on; every change is
conditional on the version read. With no record a table is in the seed's one-shard layouts, and
the first instance to start records it (`establish`). Events are never rewritten, so a
feed layout changes from a position ahead of every instance's clock (`switch_at`).

The record's attributes and how a table changes layout: docs/data-model.md#the-layout-record.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from datasource.deadline import storage_call
from datasource.errors import error_code
from datasource.items import Item
from datasource.table import GSI2, GSI2PK, GSI4, GSI4PK, PK, SK
from domain import keys
from domain.keys import FeedLayout, StatusLayout
from domain.validation import format_timestamp

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = [
    "CLOCK_MARGIN_SECONDS",
    "LayoutRecord",
    "Layouts",
    "establish",
    "read_record",
    "replace_record",
    "switch_at",
]

logger = logging.getLogger("loc_payments.layouts")

_KEY: Item = {PK: {"S": keys.LAYOUT_PARTITION}, SK: {"S": keys.LAYOUT_SORT_KEY}}
# Added to the time a feed change waits for (clocks of a fleet disagree by a little).
CLOCK_MARGIN_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class LayoutRecord:
    status: frozenset[int]
    feed: FeedLayout
    version: int

    def to_item(self) -> Item:
        return {
            **_KEY,
            "loc_status_layouts": {"NS": [str(count) for count in sorted(self.status)]},
            "loc_feed_layout": {
                "L": [
                    {"M": {"from": {"S": position}, "shards": {"N": str(shards)}}}
                    for position, shards in self.feed.changes
                ]
            },
            "loc_version": {"N": str(self.version)},
        }

    @classmethod
    def from_item(cls, item: Item) -> LayoutRecord:
        changes = tuple(
            (change["M"]["from"]["S"], int(change["M"]["shards"]["N"]))
            for change in item["loc_feed_layout"]["L"]
        )
        return cls(
            status=frozenset(int(count) for count in item["loc_status_layouts"]["NS"]),
            feed=FeedLayout(changes),
            version=int(item["loc_version"]["N"]),
        )


def switch_at(now: datetime, *, refresh_seconds: float, settle_seconds: float) -> str:
    """The feed position from which a feed layout recorded `now` applies: past the time every
    instance has read the record (each trusts its copy for at most two refresh intervals) and
    every reader's settled bound, with a margin for clocks."""
    delay = 2 * refresh_seconds + settle_seconds + CLOCK_MARGIN_SECONDS
    return keys.feed_bound(format_timestamp(now + timedelta(seconds=delay)))


async def read_record(client: DynamoDBClient, table_name: str) -> LayoutRecord | None:
    async with storage_call():
        response = await client.get_item(TableName=table_name, Key=_KEY, ConsistentRead=True)
    item = response.get("Item")
    return None if item is None else LayoutRecord.from_item(item)


async def holds_seed_layout_data(client: DynamoDBClient, table_name: str) -> bool:
    """Whether the seed's one-shard partitions hold anything: one `Limit=1` Query on each."""
    for index, attribute, partition in (
        (GSI2, GSI2PK, keys.GSI2_PARTITION),
        (GSI4, GSI4PK, keys.FEED_PARTITION),
    ):
        async with storage_call():
            response = await client.query(
                TableName=table_name,
                IndexName=index,
                KeyConditionExpression="#pk = :pk",
                ExpressionAttributeNames={"#pk": attribute},
                ExpressionAttributeValues={":pk": {"S": partition}},
                Limit=1,
            )
        if response.get("Items"):
            return True
    return False


async def establish(
    client: DynamoDBClient, table_name: str, *, status_shards: int, feed_shards: int, switch: str
) -> LayoutRecord:
    """The record, made if there is none (an empty table: in these layouts; one holding data:
    the seed's, plus GSI2's `status_shards` and the feed's `feed_shards` from `switch` on),
    with `status_shards` among the GSI2 layouts that hold data."""
    for _ in range(5):
        record = await read_record(client, table_name)
        if record is None:
            if await holds_seed_layout_data(client, table_name):
                status, feed = {1, status_shards}, keys.SEED_FEED
                if feed_shards != 1:
                    feed = feed.then(switch, feed_shards)
            else:
                status, feed = {status_shards}, FeedLayout.of(feed_shards)
            record = LayoutRecord(frozenset(status), feed, 1)
            if await _put_first(client, table_name, record):
                return record
            continue  # another instance recorded it first: read theirs
        if status_shards in record.status:
            return record
        await add_status_layout(client, table_name, status_shards)
    raise RuntimeError(f"the layout record of {table_name} keeps changing")


async def add_status_layout(client: DynamoDBClient, table_name: str, shards: int) -> None:
    """Record that GSI2's layout of `shards` may hold payments (before writing any there)."""
    async with storage_call():
        await client.update_item(
            TableName=table_name,
            Key=_KEY,
            UpdateExpression="ADD loc_status_layouts :shards, loc_version :one",
            ConditionExpression=f"attribute_exists({PK})",
            ExpressionAttributeValues={":shards": {"NS": [str(shards)]}, ":one": {"N": "1"}},
        )


async def replace_record(
    client: DynamoDBClient, table_name: str, old: LayoutRecord, new: LayoutRecord
) -> bool:
    """Write `new` if the record is still `old`; False if it changed meanwhile."""
    item = dataclasses.replace(new, version=old.version + 1).to_item()
    return await _put_if(
        client,
        table_name,
        item,
        ConditionExpression="loc_version = :version",
        ExpressionAttributeValues={":version": {"N": str(old.version)}},
    )


async def _put_first(client: DynamoDBClient, table_name: str, record: LayoutRecord) -> bool:
    return await _put_if(
        client, table_name, record.to_item(), ConditionExpression=f"attribute_not_exists({PK})"
    )


async def _put_if(client: DynamoDBClient, table_name: str, item: Item, **condition: Any) -> bool:
    """Put the record if `condition` holds; False if another writer changed it first. (The
    refusal is caught inside `storage_call`, which turns any other error into a domain one.)"""
    async with storage_call():
        try:
            await client.put_item(TableName=table_name, Item=item, **condition)
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
    return True


class Layouts:
    """The layouts an instance writes and reads now: GSI2's written layout is its own setting,
    read with every layout the record (and `LOC_GSI2_READ_SHARDS`) says may hold payments; the
    feed's is the record's.

    Without a table (`fixed`), exactly the layouts given. With one, the record is read again
    every `refresh_seconds` in the background, and a copy older than twice that is read again
    before it is used: a feed change recorded now applies from `switch_at`, after every
    instance has read it."""

    def __init__(
        self,
        status: StatusLayout,
        feed: FeedLayout,
        *,
        client: DynamoDBClient | None = None,
        table_name: str = "",
        refresh_seconds: float = 0.0,
        settle_seconds: float = 0.0,
    ) -> None:
        self._written = status.shards
        self._settings_read = frozenset(status.also_read)
        self._status = status
        self._feed = feed
        self._client = client
        self._table = table_name
        self._refresh = refresh_seconds
        self._settle = settle_seconds
        # Never read yet (DynamoDB did not answer at start): read, or made, before any use.
        self._read_at = float("-inf") if client is not None else time.monotonic()
        self._refreshing: asyncio.Task[None] | None = None

    @classmethod
    def fixed(
        cls, status: StatusLayout = keys.SEED_LAYOUT, feed: FeedLayout = keys.SEED_FEED
    ) -> Layouts:
        return cls(status, feed)

    @property
    def status(self) -> StatusLayout:
        return self._status

    @property
    def feed(self) -> FeedLayout:
        return self._feed

    def adopt(self, record: LayoutRecord) -> None:
        also = (record.status | self._settings_read) - {self._written}
        self._status = StatusLayout(self._written, tuple(sorted(also)))
        self._feed = record.feed
        self._read_at = time.monotonic()

    async def current(self) -> Layouts:
        """These layouts, read again first if the copy is too old to trust."""
        if self._client is None:
            return self
        age = time.monotonic() - self._read_at
        if age > 2 * self._refresh:
            await self.refresh()
        elif age > self._refresh and self._refreshing is None:
            # Off the request: its calls are no request's (an empty context).
            self._refreshing = asyncio.get_running_loop().create_task(
                self._refresh_in_background(), context=contextvars.Context()
            )
        return self

    async def refresh(self) -> None:
        assert self._client is not None
        if self._read_at == float("-inf"):
            # The first read: the record, made if the table has none (`establish`), with the
            # feed's shards as given (the settings') from a position ahead.
            at = switch_at(
                datetime.now(UTC), refresh_seconds=self._refresh, settle_seconds=self._settle
            )
            self.adopt(
                await establish(
                    self._client,
                    self._table,
                    status_shards=self._written,
                    feed_shards=self._feed.latest,
                    switch=at,
                )
            )
            return
        record = await read_record(self._client, self._table)
        if record is not None and self._written not in record.status:
            # A reshard ended on another layout while this instance writes its own (settings
            # not rolled out everywhere yet): listed again, so that readers read where it writes.
            await add_status_layout(self._client, self._table, self._written)
            record = await read_record(self._client, self._table)
        if record is not None:  # (made at start; gone only if deleted by hand)
            self.adopt(record)

    async def _refresh_in_background(self) -> None:
        try:
            await self.refresh()
        except Exception as error:  # the next use retries, in the request
            logger.warning("the layout record could not be read: %s", error)
        finally:
            self._refreshing = None
