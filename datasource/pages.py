"""Pages of a Query (newest first, or oldest first), filled exactly, with a signed cursor on
every edge. The payment lists page payments; a payment's history pages its events.

Relay's paging, both ways (`Paging`): `first` items after the cursor `after`, or the `last`
items before the cursor `before`, in the list's own order either way. A cursor is an edge's key,
so it continues a list in both directions. A backward page is the same single Query (one more
item than the page, and on while DynamoDB stops early) with `ScanIndexForward` flipped. Which
end is exact: the far one, read one item past the page (`hasNextPage` forward,
`hasPreviousPage` backward); the near one says whether the cursor was given, since the edge it
names came before (forward) or after (backward) this page. `first` and `last` together, or
either with the other direction's cursor, are refused (a slice of a slice: no client asks).

A page reads at most `read_limit` items, which the query cost counts; one that reaches it before
it is full comes back short, its far cursor where the read stopped (docs/scale-and-cost.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Generic, TypeVar

from datasource.accounting import list_rounds
from datasource.cursors import CursorCodec, ListScope
from datasource.deadline import storage_call
from datasource.items import Item
from datasource.table import page_key_attributes
from domain import keys
from domain.errors import InvalidInput
from domain.payment import Payment

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import AttributeValueTypeDef, QueryInputTypeDef

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "Cut",
    "EdgeOf",
    "Merged",
    "Page",
    "PageOf",
    "PageQuery",
    "Paging",
    "merged_items",
    "merged_page",
    "page_of_items",
    "query_page",
    "read_limit",
]

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
    has_previous_page: bool = False
    # Where a backward page cut short by its read limit stopped; None: its first edge's cursor.
    start_cursor: str | None = None


# A page of payments, the lists' page. A type alias: instances are made as PageOf.
Page = PageOf[Payment]


def page_size(first: int, field: str = "first") -> int:
    if isinstance(first, bool) or not isinstance(first, int) or not 1 <= first <= MAX_PAGE_SIZE:
        raise InvalidInput(field, f"must be between 1 and {MAX_PAGE_SIZE}")
    return first


def read_limit(size: int, partitions: int = 1) -> int:
    """The most items a page of `size` reads from a list kept in `partitions` partitions: one
    partition, the page and one more; a merge, two rounds of each partition's share (with its
    margin) and the page again, which the first rounds fill but when the partitions are far from
    even (`merged_items`)."""
    wanted = size + 1
    if partitions <= 1:
        return wanted
    share = -(-wanted // partitions) + _SHARE_MARGIN
    return 2 * partitions * share + wanted


# Where a read stopped at its limit: the key of the last item it went through (a
# LastEvaluatedKey), before the page was full. A page cut there resumes after it.
Cut = Item


@dataclass(frozen=True, slots=True)
class Paging:
    """Which page of a list: `size` items after `cursor`, or (`backward`) before it."""

    size: int = DEFAULT_PAGE_SIZE
    cursor: str | None = None
    backward: bool = False

    @classmethod
    def of(
        cls,
        *,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Paging:
        """Relay's arguments, checked: forward with `first`/`after` (the default), backward
        with `last`/`before`, never both."""
        if first is not None and last is not None:
            raise InvalidInput(
                "last",
                "cannot be combined with first: page forward with first and after, "
                "backward with last and before",
            )
        if after is not None and before is not None:
            raise InvalidInput("before", "cannot be combined with after")
        if last is None and before is None:
            return cls(page_size(DEFAULT_PAGE_SIZE if first is None else first), after)
        if first is not None:
            raise InvalidInput("before", "pages backward, with last; first pages forward")
        if after is not None:
            raise InvalidInput("after", "pages forward, with first; last pages backward")
        return cls(page_size(DEFAULT_PAGE_SIZE if last is None else last, "last"), before, True)

    def start_key(self, cursors: CursorCodec, scope: ListScope) -> Item | None:
        if self.cursor is None:
            return None
        return cursors.decode(scope, self.cursor, field="before" if self.backward else "after")


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
    # A range rather than a prefix (the events feed): sort keys from `sort_prefix` to this.
    sort_end: str | None = None
    # Items of the range that the list leaves out (DynamoDB's FilterExpression, and its values).
    filter_expression: str | None = None
    filter_values: dict[str, AttributeValueTypeDef] | None = None
    # The attributes to read (DynamoDB's ProjectionExpression), the page's keys added; None:
    # every attribute. DynamoDB charges the whole item either way.
    projection: tuple[str, ...] | None = None

    def parameters(self, table_name: str, *, backward: bool = False) -> QueryInputTypeDef:
        """The Query's parameters; `backward` reads the list from its other end."""
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
                ":end": {"S": self.sort_end or keys.prefix_end(self.sort_prefix)},
            },
            "ScanIndexForward": self.newest_first == backward,
        }
        if self.filter_expression is not None:
            parameters["FilterExpression"] = self.filter_expression
            parameters["ExpressionAttributeValues"] = {
                **parameters["ExpressionAttributeValues"],
                **(self.filter_values or {}),
            }
        if self.projection is not None:
            # The page's keys too: its cursors and the merge of a sharded list read them.
            names = dict.fromkeys((*page_key_attributes(self.scope.index), *self.projection))
            parameters["ProjectionExpression"] = ", ".join(names)
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
    paging: Paging,
    node: Callable[[Item], NodeT],
) -> PageOf[NodeT]:
    """The page `paging` names (each item made by `node`), and whether more lie beyond it.

    Asks for one item more than the page to learn whether the list goes on past it, and keeps
    asking while DynamoDB stops early (its 1 MB limit) before the page is full.
    """
    start_key = paging.start_key(cursors, query.scope)
    if query.sort_end is not None and query.sort_prefix > query.sort_end:
        return page_of_items(
            [], query.scope, cursors, paging, node
        )  # an empty range (DynamoDB refuses)
    if start_key is not None and query.sort_end is not None:
        # A range's cursor may lie outside a later range (the feed's `createdAfter`, a position
        # not yet settled): before it, the range starts the page; past it, the page is empty.
        position = start_key[query.sort_attribute]["S"]
        if position < query.sort_prefix:
            start_key = None
        elif position > query.sort_end:
            return page_of_items([], query.scope, cursors, paging, node)
    items, cut = await read_items(
        client,
        table_name,
        query,
        start_key,
        paging.size + 1,
        paging.backward,
        limit=read_limit(paging.size),
    )
    return page_of_items(items, query.scope, cursors, paging, node, cut=cut)


async def merged_page(
    client: DynamoDBClient,
    *,
    table_name: str,
    queries: Sequence[PageQuery],
    cursors: CursorCodec,
    paging: Paging,
    node: Callable[[Item], NodeT],
    moving_from: Sequence[PageQuery] = (),
) -> PageOf[NodeT]:
    """One list kept in several partitions of an index (GSI2's shards): `merged_items` past
    the cursor, in the direction paged.

    The queries share one scope and one sort order, and no sort key is in two partitions, so the
    merged order is total: everything before the cursor's item (in the direction paged) was on
    earlier pages, and the cursor's key, moved to each partition, is every partition's position.

    `moving_from`: partitions a reshard is moving items out of into `queries`' (one way). They
    are merged first, and `queries`' after: an item moved before its old partition was read
    there is in its new one when that is read, and one moved after was read where it was (a
    merge of both at once could read its new place before it came and its old after it left).
    """
    scope = queries[0].scope
    assert all(query.scope == scope for query in (*queries, *moving_from))
    start_key = paging.start_key(cursors, scope)
    wanted = paging.size + 1
    left = read_limit(paging.size, len(queries) + len(moving_from))
    order, identity, reverse = _ordering(queries, paging.backward)
    found: list[Item] = []
    cuts: list[Cut] = []
    rounds = 0
    for phase in (moving_from, queries):
        if phase:
            merge = await _merge(
                client, table_name, phase, start_key, wanted, paging.backward, left
            )
            found += merge.items
            rounds += merge.rounds
            left -= merge.read
            if merge.cut is not None:
                cuts.append(merge.cut)
    list_rounds(rounds)
    distinct = {identity(item): item for item in found}
    items = sorted(distinct.values(), key=order, reverse=reverse)
    cut = None
    if cuts:
        # A phase cut short knows nothing past its cut: the page ends at the nearest cut.
        cut = max(cuts, key=order) if reverse else min(cuts, key=order)
        items = [item for item in items if not _ahead(order(cut), order(item), reverse)]
    if len(items) >= wanted:
        cut = None
    return page_of_items(items[:wanted], scope, cursors, paging, node, cut=cut)


# Items asked of each shard in a merge's first round beyond its share of the page: with 64
# shards and a page of 100 (101 wanted), 4 each; the busiest shard of a page holds more than
# that in about one page of two, and more than twice that in one of twenty.
_SHARE_MARGIN = 2


class _Shard:
    """One partition of a merge: what it has given, and where its next Query starts."""

    __slots__ = ("frontier", "query", "start")

    def __init__(self, query: PageQuery, start: Item | None) -> None:
        self.query = query
        self.start = start
        # The sort value the partition has been read to; None once read to its end.
        self.frontier: tuple[str, ...] | None = None


async def merged_items(
    client: DynamoDBClient,
    *,
    table_name: str,
    queries: Sequence[PageQuery],
    start_key: Item | None,
    wanted: int,
    backward: bool,
    limit: int | None = None,
) -> Merged:
    """The first `wanted` items past `start_key` of one list kept in several partitions, merged
    lazily (SPEC §20): every partition asked at once for a few items (its share of the page and
    a margin), then only the partitions read to a point before the page's end as known so far
    asked again, at once. An item is placed once every partition still open has been read past
    it. The second refill asks each partition for all the page still lacks, which places it
    whole (a filter can leave fewer items than asked for, and a merge with one goes on).
    The rounds are counted (`accounting.list_rounds`).

    `limit`: the most items the merge reads after its first round (None: no limit); reaching
    it, the merge answers the items placed so far and where it stopped (`Merged.cut`)."""
    merge = await _merge(client, table_name, queries, start_key, wanted, backward, limit)
    list_rounds(merge.rounds)
    return merge


def _ahead(a: tuple[str, ...], b: tuple[str, ...], reverse: bool) -> bool:
    """Whether the sort value `a` comes before `b` in the order read."""
    return a > b if reverse else a < b


def _ordering(
    queries: Sequence[PageQuery], backward: bool
) -> tuple[Callable[[Item], tuple[str, ...]], Callable[[Item], tuple[str, ...]], bool]:
    """The merge's sort value of an item, its identity (its key less the partition: a payment
    listed in two partitions during a reshard is one), and whether the order read is reversed
    (the list's own order, or its reverse when paging backward)."""
    attribute = queries[0].partition_attribute
    sort_attribute = queries[0].sort_attribute
    names = [name for name in page_key_attributes(queries[0].scope.index) if name != attribute]

    def identity(item: Item) -> tuple[str, ...]:
        return tuple(item[name]["S"] for name in names)

    def order(item: Item) -> tuple[str, ...]:
        return (item[sort_attribute]["S"], *identity(item))

    return order, identity, queries[0].newest_first != backward


@dataclass(frozen=True, slots=True)
class Merged:
    """What a merge found: its items, the rounds of Queries and the items they read, and where
    its read limit stopped it, if it did."""

    items: list[Item]
    rounds: int
    read: int
    cut: Cut | None


async def _merge(
    client: DynamoDBClient,
    table_name: str,
    queries: Sequence[PageQuery],
    start_key: Item | None,
    wanted: int,
    backward: bool,
    limit: int | None = None,
) -> Merged:
    """`merged_items`' work: the items, the rounds it took, the items read, and its cut."""
    attribute = queries[0].partition_attribute
    order, identity, reverse = _ordering(queries, backward)
    shards = [
        _Shard(
            query, None if start_key is None else start_key | {attribute: {"S": query.partition}}
        )
        for query in queries
    ]
    # A payment moved between partitions while they were read (a reshard) is listed once.
    found: dict[tuple[str, ...], Item] = {}
    share = wanted if len(shards) == 1 else -(-wanted // len(shards)) + _SHARE_MARGIN
    read_so_far = 0

    async def read(shard: _Shard, asked: int) -> None:
        nonlocal read_so_far
        parameters = shard.query.parameters(table_name, backward=backward) | {"Limit": asked}
        if shard.start is not None:
            parameters["ExclusiveStartKey"] = shard.start
        async with storage_call():
            response = await client.query(**parameters)
        items = response.get("Items", [])
        read_so_far += response.get("ScannedCount", len(items))
        for item in items:
            found.setdefault(identity(item), item)
        shard.start = response.get("LastEvaluatedKey")
        # Read to its end, or to its last key: nothing it holds before that is still unread.
        shard.frontier = None if shard.start is None else order(shard.start)

    rounds = 0
    asked, each = shards, share
    merged: list[Item] = []
    placed, reach = 0, None
    while True:
        if limit is not None and reach is not None:
            # Every partition is read once (the first round), whatever the limit.
            each = min(each, (limit - read_so_far) // len(asked))
            if each < 1:
                # Out of reads: the items placed, cut where every open partition is read to.
                return Merged(merged[:placed], rounds, read_so_far, reach.start)
        await asyncio.gather(*(read(shard, each) for shard in asked))
        rounds += 1
        merged = sorted(found.values(), key=order, reverse=reverse)
        open_shards = [shard for shard in shards if shard.frontier is not None]
        if not open_shards:  # every partition read to its end
            break
        frontier = max if reverse else min
        reach = frontier(open_shards, key=lambda shard: shard.frontier or ())
        assert reach.frontier is not None
        placed = sum(1 for item in merged if not _ahead(reach.frontier, order(item), reverse))
        if placed >= wanted:
            break
        end = order(merged[wanted - 1]) if len(merged) >= wanted else None
        asked = [
            shard
            for shard in open_shards
            if shard.frontier is not None and (end is None or _ahead(shard.frontier, end, reverse))
        ]
        # Round two asks for a share again; from round three on, for all the page lacks.
        each = share if rounds < 2 else wanted - placed
    return Merged(merged[:wanted], rounds, read_so_far, None)


async def read_items(
    client: DynamoDBClient,
    table_name: str,
    query: PageQuery,
    start_key: Item | None,
    wanted: int,
    backward: bool,
    *,
    limit: int | None = None,
) -> tuple[list[Item], Cut | None]:
    """Up to `wanted` items of the query past `start_key`, asking again while DynamoDB stops
    early (its 1 MB limit, or a filter), reading at most `limit` items (None: no limit); where
    the limit stopped it before `wanted` items, if it did."""
    items: list[Item] = []
    queries = read = 0
    cut = None
    while len(items) < wanted:
        asked = wanted - len(items)
        if limit is not None:
            asked = min(asked, limit - read)
            if asked < 1:
                cut = start_key
                break
        queries += 1
        parameters = query.parameters(table_name, backward=backward) | {"Limit": asked}
        if start_key is not None:
            parameters["ExclusiveStartKey"] = start_key
        async with storage_call():
            response = await client.query(**parameters)
        found = response.get("Items", [])
        items.extend(found)
        read += response.get("ScannedCount", len(found))
        start_key = response.get("LastEvaluatedKey")
        if start_key is None:
            break
    list_rounds(queries)
    return items, cut


def page_of_items(
    items: list[Item],
    scope: ListScope,
    cursors: CursorCodec,
    paging: Paging,
    node: Callable[[Item], NodeT],
    *,
    cut: Cut | None = None,
) -> PageOf[NodeT]:
    """The page of `items`, as read (backward: from the far end) with one more if the list goes
    on; its edges in the list's own order. `cut`: where a read that reached its limit stopped,
    before the page was full: the page goes on from there (its far cursor)."""
    names = page_key_attributes(scope.index)
    beyond = len(items) > paging.size or cut is not None
    kept = items[: paging.size]
    if paging.backward:
        kept.reverse()
    edges = [EdgeOf(node(item), partial(_sign, cursors, scope, names, item)) for item in kept]
    came_from_a_cursor = paging.cursor is not None
    far = None if cut is None else _sign(cursors, scope, names, cut)
    if paging.backward:
        return PageOf(
            edges=edges,
            has_next_page=came_from_a_cursor,
            end_cursor=edges[-1].cursor if edges else None,
            has_previous_page=beyond,
            start_cursor=far,
        )
    return PageOf(
        edges=edges,
        has_next_page=beyond,
        end_cursor=far if far is not None else edges[-1].cursor if edges else None,
        has_previous_page=came_from_a_cursor,
    )


def _sign(cursors: CursorCodec, scope: ListScope, names: Sequence[str], item: Item) -> str:
    """An edge's cursor: its item's key, signed (made only when a caller reads it)."""
    return cursors.encode(scope, {name: item[name] for name in names})
