"""Pages of a Query (newest first, or oldest first), filled exactly, with a signed cursor on
every edge. The payment lists page payments; a payment's history pages its events."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Generic, TypeVar

from datasource.cursors import CursorCodec, ListScope
from datasource.deadline import storage_call
from datasource.items import Item
from datasource.table import page_key_attributes
from domain import keys
from domain.errors import InvalidInput
from domain.payment import Payment

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import QueryInputTypeDef

# A list's page when the caller names no size (`first`), and the largest page it may ask for.
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


NodeT = TypeVar("NodeT")


class EdgeOf(Generic[NodeT]):
    """An item of a list (a payment, an event) and its cursor. The cursor (a signed key) is made
    the first time it is read: most pages are read for their items alone, and signing every edge
    costs an HMAC each."""

    __slots__ = ("_cursor", "_sign", "node")

    def __init__(self, node: NodeT, sign: Callable[[], str]) -> None:
        self.node = node
        self._sign = sign
        self._cursor: str | None = None

    @property
    def cursor(self) -> str:
        if self._cursor is None:
            self._cursor = self._sign()
        return self._cursor

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EdgeOf):
            return NotImplemented
        return self.node == other.node and self.cursor == other.cursor

    __hash__ = None  # type: ignore[assignment]  # equal by value, and mutable (the cursor)

    def __repr__(self) -> str:
        return f"Edge(node={self.node!r}, cursor={self.cursor!r})"


@dataclass(frozen=True, slots=True)
class PageOf(Generic[NodeT]):
    edges: list[EdgeOf[NodeT]]
    has_next_page: bool
    end_cursor: str | None


# A page of payments, the lists' page. A type alias: instances are made as PageOf.
Page = PageOf[Payment]


def page_size(first: int) -> int:
    if isinstance(first, bool) or not isinstance(first, int) or not 1 <= first <= MAX_PAGE_SIZE:
        raise InvalidInput("first", f"must be between 1 and {MAX_PAGE_SIZE}")
    return first


@dataclass(frozen=True, slots=True)
class PageQuery:
    """One list: where it lives (`scope`) and its key condition, as Query parameters."""

    scope: ListScope
    partition_attribute: str
    partition: str
    sort_attribute: str
    sort_prefix: str
    # Payment lists are newest first (ids are UUIDv7 and end every sort key); a history is
    # oldest first (its sort keys end in the zero-padded version).
    newest_first: bool = True
    consistent: bool = False

    def parameters(self, table_name: str) -> QueryInputTypeDef:
        parameters: QueryInputTypeDef = {
            "TableName": table_name,
            # `begins_with(#sk, :prefix)`, as a range (`keys.prefix_end`).
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :prefix AND :end",
            "ExpressionAttributeNames": {
                "#pk": self.partition_attribute,
                "#sk": self.sort_attribute,
            },
            "ExpressionAttributeValues": {
                ":pk": {"S": self.partition},
                ":prefix": {"S": self.sort_prefix},
                ":end": {"S": keys.prefix_end(self.sort_prefix)},
            },
            "ScanIndexForward": not self.newest_first,
        }
        if self.consistent:
            parameters["ConsistentRead"] = True
        if self.scope.index is not None:
            parameters["IndexName"] = self.scope.index
        return parameters


async def query_page(
    client: DynamoDBClient,
    *,
    table_name: str,
    query: PageQuery,
    cursors: CursorCodec,
    first: int,
    after: str | None,
    node: Callable[[Item], NodeT],
) -> PageOf[NodeT]:
    """`first` items (each made by `node`) after the cursor `after`, and whether more follow.

    Asks for one item more than the page to learn whether a next page exists, and keeps asking
    while DynamoDB stops early (its 1 MB limit) before the page is full.
    """
    start_key = cursors.decode(query.scope, after) if after is not None else None
    items = await _read(client, table_name, query, start_key, first + 1)
    return _page(items, query.scope, cursors, first, node)


async def merged_page(
    client: DynamoDBClient,
    *,
    table_name: str,
    queries: Sequence[PageQuery],
    cursors: CursorCodec,
    first: int,
    after: str | None,
    node: Callable[[Item], NodeT],
) -> PageOf[NodeT]:
    """One list kept in several partitions of an index (GSI2's shards): each partition's newest
    `first + 1` items after the cursor, read concurrently (one Query each), merged newest first.

    The queries share one scope and one sort order, and no sort key is in two partitions, so the
    merged order is total: everything before the cursor's item was on earlier pages, and the
    cursor's key, moved to each partition, is every partition's position.
    """
    scope = queries[0].scope
    start_key = cursors.decode(scope, after) if after is not None else None
    partition_of = {query.partition_attribute for query in queries}
    assert len(partition_of) == 1 and all(q.scope == scope for q in queries)
    attribute = partition_of.pop()
    sort_attribute = queries[0].sort_attribute

    async def read(query: PageQuery) -> list[Item]:
        start = None if start_key is None else start_key | {attribute: {"S": query.partition}}
        return await _read(client, table_name, query, start, first + 1)

    with_partitions = await asyncio.gather(*(read(query) for query in queries))
    names = page_key_attributes(scope.index)
    # A payment moved between partitions while they were read (a reshard) is listed once.
    distinct = {
        tuple(item[name]["S"] for name in names if name != attribute): item
        for items in with_partitions
        for item in items
    }
    items = sorted(
        distinct.values(),
        key=lambda item: _sort_value(item, sort_attribute, names),
        reverse=queries[0].newest_first,
    )
    return _page(items[: first + 1], scope, cursors, first, node)


def _sort_value(item: Item, sort_attribute: str, names: Sequence[str]) -> tuple[str, ...]:
    return (item[sort_attribute]["S"], *(item[name]["S"] for name in names))


async def _read(
    client: DynamoDBClient,
    table_name: str,
    query: PageQuery,
    start_key: Item | None,
    wanted: int,
) -> list[Item]:
    """Up to `wanted` items of the query after `start_key`, asking again while DynamoDB stops
    early (its 1 MB limit)."""
    items: list[Item] = []
    while len(items) < wanted:
        parameters = query.parameters(table_name) | {"Limit": wanted - len(items)}
        if start_key is not None:
            parameters["ExclusiveStartKey"] = start_key
        async with storage_call():
            response = await client.query(**parameters)
        items.extend(response.get("Items", []))
        start_key = response.get("LastEvaluatedKey")
        if start_key is None:
            break
    return items


def _page(
    items: list[Item],
    scope: ListScope,
    cursors: CursorCodec,
    first: int,
    node: Callable[[Item], NodeT],
) -> PageOf[NodeT]:
    names = page_key_attributes(scope.index)
    edges = [
        EdgeOf(node(item), partial(cursors.encode, scope, {n: item[n] for n in names}))
        for item in items[:first]
    ]
    return PageOf(
        edges=edges,
        has_next_page=len(items) > first,
        end_cursor=edges[-1].cursor if edges else None,
    )
