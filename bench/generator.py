"""The scale data generator: payments into DynamoDB Local with BatchWriteItem, many at once.

Items are made by `bench.dataset` (the domain's constructor and transition engine, the
datasource's item mapping) one batch at a time, as the writers ask for them, so making them
overlaps with DynamoDB's writing. `UnprocessedItems` are sent again after a short wait.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from datasource.items import Item

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import WriteRequestUnionTypeDef

# DynamoDB's limit of items per BatchWriteItem.
BATCH_SIZE = 25
WRITERS = 8
RETRY_WAIT_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class LoadStats:
    items: int
    requests: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.items / self.seconds if self.seconds else 0.0


async def load(
    client: DynamoDBClient, table_name: str, items: Iterator[Item], *, writers: int = WRITERS
) -> LoadStats:
    """Write every item of `items`; `writers` BatchWriteItem calls in flight."""
    started = time.perf_counter()
    written = 0
    requests = 0

    async def writer() -> None:
        nonlocal written, requests
        while batch := list(itertools.islice(items, BATCH_SIZE)):
            pending: Sequence[WriteRequestUnionTypeDef] = [
                {"PutRequest": {"Item": item}} for item in batch
            ]
            while pending:
                response = await client.batch_write_item(RequestItems={table_name: pending})
                requests += 1
                pending = response.get("UnprocessedItems", {}).get(table_name, [])
                if pending:
                    await asyncio.sleep(RETRY_WAIT_SECONDS)
            written += len(batch)

    async with asyncio.TaskGroup() as group:
        for _ in range(writers):
            group.create_task(writer())
    return LoadStats(items=written, requests=requests, seconds=time.perf_counter() - started)
