"""The events feed: every user's payment events, oldest first, from GSI4 (events only).

The feed is sharded (SPEC §20): an event is in its payment's shard of the layout in force at
its position (`keys.FeedLayout`), and a read cuts its range where the layout changes and merges
each range's shards (`pages.merged_items`). With one shard from the start, it is one Query.

An event's feed key is its time and then its item's key (`keys.feed_sort_key`). Its time is the
payment's `loc_last_updated` of the write, taken before the write's transaction; the transaction
(with its retries, within an operation's budget) and GSI4's propagation land later. So the feed
lists only events older than a settling time (`settle`, longer than both): past it no event can
appear before a position already read, and a cursor resumes exactly after its edge, none missed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from datasource.cursors import ListScope
from datasource.items import Item
from datasource.pages import Cut, PageQuery, merged_items
from datasource.table import GSI4, GSI4PK, GSI4SK
from domain import keys
from domain.enums import PaymentStatus
from domain.validation import format_timestamp
from domain.webhooks import CREATED

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import AttributeValueTypeDef

__all__ = [
    "FEED_SCOPE",
    "feed_items",
    "feed_partitions",
    "feed_query",
    "feed_range",
    "feed_start",
    "settled_before",
]

FEED_SCOPE = ListScope(GSI4)


def settled_before(now: datetime, settle: float) -> str:
    """The feed's upper bound: events at or after `now - settle` are not listed yet."""
    return format_timestamp(now - timedelta(seconds=settle))


def feed_query(
    *,
    upper: str,
    created_after: datetime | None = None,
    types: Sequence[str] | None = None,
) -> PageQuery:
    """Settled events (before `upper`), after `created_after`, of `types` (None: all)."""
    return feed_range(upper=upper, lower=feed_start(created_after), types=types)


def feed_start(created_after: datetime | None) -> str:
    """The feed's lower bound: after every event of `created_after`'s millisecond, or from its
    beginning."""
    return (
        keys.FEED_START
        if created_after is None
        else keys.feed_bound(format_timestamp(created_after))
    )


def feed_range(
    *,
    upper: str,
    lower: str,
    types: Sequence[str] | None = None,
    partition: str = keys.FEED_PARTITION,
) -> PageQuery:
    """The events of one feed partition from `lower` to `upper`."""
    filter_expression, filter_values = _type_filter(types)
    return PageQuery(
        scope=FEED_SCOPE,
        partition_attribute=GSI4PK,
        partition=partition,
        sort_attribute=GSI4SK,
        sort_prefix=lower,
        sort_end=upper,
        newest_first=False,
        filter_expression=filter_expression,
        filter_values=filter_values,
    )


async def feed_items(
    client: DynamoDBClient,
    *,
    table_name: str,
    feed: keys.FeedLayout,
    lower: str,
    upper: str,
    start_key: Item | None,
    wanted: int,
    types: Sequence[str] | None = None,
    limit: int | None = None,
) -> tuple[list[Item], Cut | None]:
    """Up to `wanted` events from `lower` to `upper`, after the feed position `start_key` (a
    cursor's key, in whichever partition its event was), oldest first: each range of the
    layout read in its own shards and merged, the ranges in order. `limit`: the most items read
    in all (None: no limit); reaching it before `wanted` events, where it stopped (`Cut`)."""
    position = None if start_key is None else start_key[GSI4SK]["S"]
    items: list[Item] = []
    for span in feed.ranges(lower, upper):
        if position is not None and position > span.upper:
            continue  # read on an earlier page
        queries = [
            feed_range(upper=span.upper, lower=span.lower, types=types, partition=partition)
            for partition in span.partitions()
        ]
        merge = await merged_items(
            client,
            table_name=table_name,
            queries=queries,
            # A position before this range: the range is read from its start.
            start_key=start_key if position is not None and position >= span.lower else None,
            wanted=wanted - len(items),
            backward=False,
            limit=limit,
        )
        items += merge.items
        if merge.cut is not None:
            return items, merge.cut
        if limit is not None:
            limit -= merge.read
        if len(items) >= wanted:
            break
    return items, None


def feed_partitions(feed: keys.FeedLayout, lower: str, upper: str) -> int:
    """The most partitions one range of the feed from `lower` to `upper` is kept in."""
    return max((len(span.partitions()) for span in feed.ranges(lower, upper)), default=1)


def _type_filter(
    types: Sequence[str] | None,
) -> tuple[str | None, dict[str, AttributeValueTypeDef] | None]:
    """A creation's event has no from-status; a move's type is its to-status."""
    if types is None:
        return None, None
    created = CREATED in types
    statuses = [status for status in PaymentStatus if f"payment.{status.value.lower()}" in types]
    terms = ["attribute_not_exists(loc_from_status)"] if created else []
    values: dict[str, AttributeValueTypeDef] = {}
    if statuses:
        names = [f":type{index}" for index in range(len(statuses))]
        values = {name: {"S": status.value} for name, status in zip(names, statuses, strict=True)}
        terms.append(
            f"(attribute_exists(loc_from_status) AND loc_to_status IN ({', '.join(names)}))"
        )
    return " OR ".join(terms), values
