"""Newest-first pages of a Query, filled exactly, with a signed cursor on every edge."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from datasource.cursors import CursorCodec, ListScope
from datasource.deadline import storage_call
from datasource.items import Item, from_item
from datasource.table import page_key_attributes
from domain.errors import InvalidInput
from domain.payment import Payment

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import QueryInputTypeDef

# A list's page when the caller names no size (`first`), and the largest page it may ask for.
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


class Edge:
    """A payment in its list. Its cursor (a signed key) is made the first time it is read: most
    pages are read for their payments alone, and signing every edge costs an HMAC each."""

    __slots__ = ("_cursor", "_sign", "payment")

    def __init__(self, payment: Payment, sign: Callable[[], str]) -> None:
        self.payment = payment
        self._sign = sign
        self._cursor: str | None = None

    @property
    def cursor(self) -> str:
        if self._cursor is None:
            self._cursor = self._sign()
        return self._cursor

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Edge):
            return NotImplemented
        return self.payment == other.payment and self.cursor == other.cursor

    __hash__ = None  # type: ignore[assignment]  # equal by value, and mutable (the cursor)

    def __repr__(self) -> str:
        return f"Edge(payment={self.payment!r}, cursor={self.cursor!r})"


@dataclass(frozen=True, slots=True)
class Page:
    edges: list[Edge]
    has_next_page: bool
    end_cursor: str | None


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

    def parameters(self, table_name: str) -> QueryInputTypeDef:
        parameters: QueryInputTypeDef = {
            "TableName": table_name,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
            "ExpressionAttributeNames": {
                "#pk": self.partition_attribute,
                "#sk": self.sort_attribute,
            },
            "ExpressionAttributeValues": {
                ":pk": {"S": self.partition},
                ":prefix": {"S": self.sort_prefix},
            },
            # Payment ids are UUIDv7 and end every sort key, so descending is newest first.
            "ScanIndexForward": False,
        }
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
) -> Page:
    """`first` payments after the cursor `after`, and whether more follow.

    Asks for one item more than the page to learn whether a next page exists, and keeps asking
    while DynamoDB stops early (its 1 MB limit) before the page is full.
    """
    start_key = cursors.decode(query.scope, after) if after is not None else None
    wanted = first + 1
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
    names = page_key_attributes(query.scope.index)
    edges = [
        Edge(from_item(item), partial(cursors.encode, query.scope, {n: item[n] for n in names}))
        for item in items[:first]
    ]
    return Page(
        edges=edges,
        has_next_page=len(items) > first,
        end_cursor=edges[-1].cursor if edges else None,
    )
