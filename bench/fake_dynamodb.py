"""A fake of the aiobotocore DynamoDB client: the reads the store makes, from memory, each after
a fixed injected latency, so that the engine comparisons measure our code, not a database.

It answers `get_item`, `batch_get_item`, `query` and `describe_table` as DynamoDB does for the
requests `datasource` sends, and fires botocore's `before-call.dynamodb.<Operation>` event per
call, so the service's accounting counts its calls; anything else is refused loudly.
`python -m bench.fake_dynamodb PORT ITEMS` serves the service on it, holding the items of file
ITEMS, as `loc-payments serve` serves it.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError
from botocore.hooks import HierarchicalEmitter

from datasource import GSI1, GSI2, GSI3, GSI4, PK, SK, Item, PaymentStore, page_key_attributes
from process.settings import DEV_CURSOR_SECRET, Settings

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = ["FAKE_ENDPOINT", "INJECTED_LATENCY_SECONDS", "FakeDynamoDB", "as_client", "fake_store"]

INJECTED_LATENCY_SECONDS = 0.002
# Never reached: the fake client stands in for it. Set so that no embedded DynamoDB starts.
FAKE_ENDPOINT = "http://fake-dynamodb.invalid"
MAX_BATCH_KEYS = 100  # DynamoDB's limit of keys per BatchGetItem
_INDEXES: tuple[str | None, ...] = (None, GSI1, GSI2, GSI3, GSI4)
_KEY_CONDITION = re.compile(r"^(\S+) = (:\w+) AND (\S+) (?:= (:\w+)|BETWEEN (:\w+) AND (:\w+))$")


class ResourceNotFoundException(ClientError):  # type: ignore[misc]
    pass


def _refusal(operation: str, message: str, kind: type = ClientError) -> ClientError:
    code = "ValidationException" if kind is ClientError else kind.__name__
    return kind({"Error": {"Code": code, "Message": message}}, operation)


class FakeDynamoDB:
    def __init__(
        self, table_name: str, stored: Iterable[Item], *, latency: float = INJECTED_LATENCY_SECONDS
    ) -> None:
        self.table_name, self.latency = table_name, latency
        self.calls: Counter[str] = Counter()
        self.meta = SimpleNamespace(events=HierarchicalEmitter())
        self.exceptions = SimpleNamespace(ResourceNotFoundException=ResourceNotFoundException)
        self._items = {(item[PK]["S"], item[SK]["S"]): item for item in stored}
        # Per index and partition: the items in key order (ties on a GSI's sort key fall back to
        # the table key, which is unique), and their sort keys.
        self._partitions: dict[
            tuple[str | None, str], tuple[list[tuple[str, ...]], list[Item]]
        ] = {}
        for index in _INDEXES:
            attributes = page_key_attributes(index)
            rows = sorted(
                (
                    (item[attributes[0]]["S"], tuple(item[a]["S"] for a in attributes[1:]), item)
                    for item in self._items.values()
                    if attributes[0] in item
                ),
                key=lambda row: row[:2],
            )
            for partition, order, item in rows:
                keys, items = self._partitions.setdefault((index, partition), ([], []))
                keys.append(order)
                items.append(item)

    async def _call(self, operation: str, table_name: str) -> None:
        self.calls[operation] += 1
        model = SimpleNamespace(name=operation)
        self.meta.events.emit(f"before-call.dynamodb.{operation}", model=model)
        if table_name != self.table_name:
            raise _refusal(operation, "Requested resource not found", ResourceNotFoundException)
        await asyncio.sleep(self.latency)

    async def describe_table(self, *, TableName: str) -> dict[str, Any]:
        await self._call("DescribeTable", TableName)
        stream = {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
        return {
            "Table": {
                "TableName": TableName,
                "TableStatus": "ACTIVE",
                "StreamSpecification": stream,
                "GlobalSecondaryIndexes": [
                    {"IndexName": name, "IndexStatus": "ACTIVE"} for name in _INDEXES if name
                ],
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
        ProjectionExpression: str | None = None,
    ) -> dict[str, Any]:
        match = _KEY_CONDITION.match(KeyConditionExpression)
        if match is None:
            raise _refusal("Query", f"the fake does not understand {KeyConditionExpression!r}")
        names, values = ExpressionAttributeNames or {}, ExpressionAttributeValues
        partition_name, partition, sort_name, *placeholders = match.groups()
        # `=`'s one value or BETWEEN's two: both ends are in.
        sort_values = [values[placeholder]["S"] for placeholder in placeholders if placeholder]
        attributes = page_key_attributes(IndexName) if IndexName in _INDEXES else None
        names_used = (names.get(partition_name, partition_name), names.get(sort_name, sort_name))
        if attributes is None or names_used != attributes[:2]:
            raise _refusal("Query", f"the key condition does not match index {IndexName}")
        await self._call("Query", TableName)
        order, items = self._partitions.get((IndexName, values[partition]["S"]), ([], []))
        sort_keys = [key[0] for key in order]
        low = bisect.bisect_left(sort_keys, sort_values[0])
        high = bisect.bisect_right(sort_keys, sort_values[-1])
        if ExclusiveStartKey is not None:
            start = tuple(ExclusiveStartKey[name]["S"] for name in attributes[1:])
            if ScanIndexForward:
                low = max(low, bisect.bisect_right(order, start))
            else:
                high = min(high, bisect.bisect_left(order, start))
        positions = range(low, high) if ScanIndexForward else range(high - 1, low - 1, -1)
        found = [items[position] for position in positions[:Limit]]
        if ProjectionExpression is not None:
            # Attribute names (or #placeholders), as the service writes a projection.
            kept = [names.get(name, name) for name in ProjectionExpression.split(", ")]
            found = [{name: item[name] for name in kept if name in item} for item in found]
        response: dict[str, Any] = {"Items": found, "Count": len(found), "ScannedCount": len(found)}
        # Like DynamoDB, a page that stopped at its Limit says where to go on, even at the end.
        if Limit is not None and len(found) == Limit:
            response["LastEvaluatedKey"] = {name: found[-1][name] for name in attributes}
        return response


def as_client(fake: FakeDynamoDB) -> DynamoDBClient:
    """The fake where the store takes a client: it answers the calls `datasource` makes as the
    client does (tests/bench compares the two), but has only those methods of it."""
    return cast("DynamoDBClient", fake)


def fake_store(items: Path) -> PaymentStore:
    """A store on the fake holding the items of file `items` (a JSON list), on local's table."""
    table = Settings(env="local").table_name
    client = as_client(FakeDynamoDB(table, json.loads(items.read_text())))
    return PaymentStore(client, table_name=table, cursor_secret=DEV_CURSOR_SECRET.encode())


if __name__ == "__main__":
    import server.app
    from cli.serve_command import serve

    # `serve` looks `create_app` up when it runs, so it builds the app on the fake.
    client = fake_store(Path(sys.argv[2])).client
    server.app.create_app = functools.partial(server.app.create_app, dynamodb_client=client)
    # The one-shard layout of the items (`bench.data`) and of the peer P1 reads: like for like.
    settings = Settings(
        env="local",
        port=int(sys.argv[1]),
        dynamodb_endpoint=FAKE_ENDPOINT,
        gsi2_shards=1,
        events_shards=1,
    )
    serve(settings)
