"""A fake of the aiobotocore DynamoDB client: the reads the store makes, from memory, each after
a fixed injected latency, so that the engine comparisons measure our code and not a database.

It answers `batch_get_item`, `query`, `get_item` and `describe_table` as DynamoDB does for the
requests `datasource` sends (key conditions `<partition> = :pk AND <sort> BETWEEN :low AND
:high` and `<partition> = :pk AND <sort> = :sk`, with attribute names or `#` placeholders,
`IndexName`, `ScanIndexForward`, `Limit`, `ExclusiveStartKey` and `LastEvaluatedKey`), and fires
botocore's `before-call.dynamodb.<Operation>` event per call, so the service's request accounting
counts its calls. Anything else it does not understand is refused loudly; writes are not served
(the workloads only read).
"""

from __future__ import annotations

import asyncio
import bisect
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from datasource.items import Item
from datasource.table import GSI1, GSI2, GSI3, PK, SK, page_key_attributes

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

INJECTED_LATENCY_SECONDS = 0.002
# DynamoDB's limit of keys per BatchGetItem.
MAX_BATCH_KEYS = 100
_INDEXES: tuple[str | None, ...] = (None, GSI1, GSI2, GSI3)
_EQUALS_AND_EQUALS = re.compile(r"^(\S+) = (:\w+) AND (\S+) = (:\w+)$")
_EQUALS_AND_BETWEEN = re.compile(r"^(\S+) = (:\w+) AND (\S+) BETWEEN (:\w+) AND (:\w+)$")


class ResourceNotFoundException(ClientError):  # type: ignore[misc]
    pass


def _refusal(operation: str, message: str, code: str = "ValidationException") -> ClientError:
    error = {"Error": {"Code": code, "Message": message}}
    if code == "ResourceNotFoundException":
        return ResourceNotFoundException(error, operation)
    return ClientError(error, operation)


class FakeEvents:
    """botocore's hierarchical event hooks, as far as `client.meta.events` is used."""

    def __init__(self) -> None:
        self._handlers: dict[str, tuple[str, Callable[..., Any]]] = {}

    def register(
        self, event_name: str, handler: Callable[..., Any], unique_id: str | None = None
    ) -> None:
        self._handlers[unique_id or repr(handler)] = (event_name, handler)

    def emit(self, event_name: str, **kwargs: Any) -> None:
        for name, handler in list(self._handlers.values()):
            if event_name == name or event_name.startswith(name + "."):
                handler(event_name=event_name, **kwargs)


@dataclass
class _Partition:
    """One partition of the table or an index, in key order."""

    order: list[tuple[str, ...]] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)


def _sort_tuple(index: str | None, item: Item) -> tuple[str, ...]:
    # Ties on a GSI's sort key fall back to the table key, which is unique.
    return tuple(item[name]["S"] for name in page_key_attributes(index)[1:])


class FakeDynamoDB:
    def __init__(
        self,
        table_name: str,
        stored: Iterable[Item],
        *,
        latency: float = INJECTED_LATENCY_SECONDS,
    ) -> None:
        self.table_name = table_name
        self.latency = latency
        self.calls: Counter[str] = Counter()
        self.meta = SimpleNamespace(events=FakeEvents())
        self.exceptions = SimpleNamespace(ResourceNotFoundException=ResourceNotFoundException)
        self._items: dict[tuple[str, str], Item] = {}
        self._partitions: dict[tuple[str | None, str], _Partition] = {}
        for item in stored:
            self._items[item[PK]["S"], item[SK]["S"]] = item
        for index in _INDEXES:
            partition_attribute = page_key_attributes(index)[0]
            rows = sorted(
                (
                    (item[partition_attribute]["S"], _sort_tuple(index, item), item)
                    for item in self._items.values()
                    if partition_attribute in item
                ),
                key=lambda row: (row[0], row[1]),
            )
            for partition_value, order, item in rows:
                partition = self._partitions.setdefault((index, partition_value), _Partition())
                partition.order.append(order)
                partition.items.append(item)

    async def _call(self, operation: str, table_name: str) -> None:
        self.calls[operation] += 1
        self.meta.events.emit(
            f"before-call.dynamodb.{operation}", model=SimpleNamespace(name=operation)
        )
        if table_name != self.table_name:
            raise _refusal(operation, "Requested resource not found", "ResourceNotFoundException")
        await asyncio.sleep(self.latency)

    async def describe_table(self, *, TableName: str) -> dict[str, Any]:
        await self._call("DescribeTable", TableName)
        # A stream, as the table definition asks: nothing here reads it (no live updates).
        stream = {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
        return {
            "Table": {
                "TableName": TableName,
                "TableStatus": "ACTIVE",
                "StreamSpecification": stream,
            }
        }

    async def get_item(
        self, *, TableName: str, Key: Item, ConsistentRead: bool = False
    ) -> dict[str, Any]:
        await self._call("GetItem", TableName)
        item = self._items.get((Key[PK]["S"], Key[SK]["S"]))
        return {} if item is None else {"Item": item}

    async def batch_get_item(self, *, RequestItems: dict[str, Any]) -> dict[str, Any]:
        [(table_name, request)] = RequestItems.items()
        keys = [(key[PK]["S"], key[SK]["S"]) for key in request["Keys"]]
        if not 0 < len(keys) <= MAX_BATCH_KEYS:
            raise _refusal("BatchGetItem", f"1 to {MAX_BATCH_KEYS} keys per request")
        if len(set(keys)) != len(keys):
            raise _refusal("BatchGetItem", "Provided list of item keys contains duplicates")
        await self._call("BatchGetItem", table_name)
        found = [self._items[key] for key in keys if key in self._items]
        return {"Responses": {table_name: found}, "UnprocessedKeys": {}}

    async def query(
        self,
        *,
        TableName: str,
        KeyConditionExpression: str,
        ExpressionAttributeValues: dict[str, Any],
        ExpressionAttributeNames: dict[str, str] | None = None,
        IndexName: str | None = None,
        ScanIndexForward: bool = True,
        Limit: int | None = None,
        ExclusiveStartKey: Item | None = None,
    ) -> dict[str, Any]:
        names = ExpressionAttributeNames or {}
        partition_name, partition_value, sort_name, (first, last) = _key_condition(
            KeyConditionExpression, names, ExpressionAttributeValues
        )
        if IndexName not in _INDEXES:
            raise _refusal("Query", f"no index {IndexName}")
        key_attributes = page_key_attributes(IndexName)
        if (partition_name, sort_name) != key_attributes[:2]:
            raise _refusal("Query", f"the key condition does not match index {IndexName}")
        await self._call("Query", TableName)
        partition = self._partitions.get((IndexName, partition_value), _Partition())
        sort_keys = [order[0] for order in partition.order]
        low = bisect.bisect_left(sort_keys, first)
        high = bisect.bisect_right(sort_keys, last)
        if ExclusiveStartKey is not None:
            start = tuple(ExclusiveStartKey[name]["S"] for name in key_attributes[1:])
            if ScanIndexForward:
                low = max(low, bisect.bisect_right(partition.order, start))
            else:
                high = min(high, bisect.bisect_left(partition.order, start))
        positions = range(low, high) if ScanIndexForward else range(high - 1, low - 1, -1)
        if Limit is not None:
            positions = positions[:Limit]
        found = [partition.items[position] for position in positions]
        response: dict[str, Any] = {"Items": found, "Count": len(found), "ScannedCount": len(found)}
        # Like DynamoDB, a page that stopped at its Limit says where to go on, even at the end.
        if Limit is not None and len(found) == Limit:
            response["LastEvaluatedKey"] = {name: found[-1][name] for name in key_attributes}
        return response

    async def put_item(self, **_: Any) -> dict[str, Any]:
        raise NotImplementedError("the benchmark's fake DynamoDB serves reads only")

    update_item = put_item
    transact_write_items = put_item


def as_client(fake: FakeDynamoDB) -> DynamoDBClient:
    """The fake where the store takes a client. A cast: it answers the calls `datasource` makes
    as the client does (tests/bench compares the two), but has only those methods of it."""
    return cast("DynamoDBClient", fake)


def _key_condition(
    expression: str, names: dict[str, str], values: dict[str, Any]
) -> tuple[str, str, str, tuple[str, str]]:
    """(partition attribute, its value, sort attribute, (the sort keys' first and last value,
    both included))."""
    for pattern in (_EQUALS_AND_BETWEEN, _EQUALS_AND_EQUALS):
        match = pattern.match(expression)
        if match is not None:
            break
    else:
        raise _refusal("Query", f"the fake does not understand {expression!r}")
    partition_name, partition_value, sort_name, *placeholders = match.groups()
    sort_values = [values[placeholder]["S"] for placeholder in placeholders]
    # BETWEEN's two values, or the one value of `=`: both ends are in.
    sort_range = (sort_values[0], sort_values[-1])
    return (
        names.get(partition_name, partition_name),
        values[partition_value]["S"],
        names.get(sort_name, sort_name),
        sort_range,
    )
