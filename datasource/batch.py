"""Batched reads: BatchGetItem in chunks of 100, with its UnprocessedKeys retried.

DynamoDB may answer part of a batch and hand back the rest as ``UnprocessedKeys`` (throttling,
the 16 MB response limit). Those are retried with exponential backoff and full jitter, a bounded
number of times; then the whole read fails, because a missing item would otherwise look like a
payment that does not exist.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from datasource.deadline import pause, storage_call
from datasource.items import Item
from domain.errors import StorageUnavailable

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = ["BATCH_SIZE", "Backoff", "batch_get_items"]

# DynamoDB's limit of keys per BatchGetItem request.
BATCH_SIZE = 100


@dataclass(frozen=True, slots=True)
class Backoff:
    """Full jitter (a random wait up to base * 2**attempt, capped), for `retries` retries."""

    base: float = 0.05
    cap: float = 1.0
    retries: int = 8

    def delay(self, attempt: int) -> float:
        return random.uniform(0.0, min(self.cap, self.base * 2**attempt))


async def batch_get_items(
    client: DynamoDBClient,
    *,
    table_name: str,
    keys: Sequence[Item],
    backoff: Backoff,
    consistent: bool = True,
) -> list[Item]:
    """Every stored item among `keys` (distinct keys only), in no particular order."""
    chunks = [list(keys[start : start + BATCH_SIZE]) for start in range(0, len(keys), BATCH_SIZE)]
    if len(chunks) <= 1:
        return (
            await _get_chunk(client, table_name, chunks[0], backoff, consistent) if chunks else []
        )
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(_get_chunk(client, table_name, chunk, backoff, consistent))
                for chunk in chunks
            ]
    except ExceptionGroup as failures:
        # The group cancelled the other chunks; one failure says all the caller needs.
        first = failures.exceptions[0]
        raise first from first.__cause__
    return [item for task in tasks for item in task.result()]


async def _get_chunk(
    client: DynamoDBClient, table_name: str, keys: list[Item], backoff: Backoff, consistent: bool
) -> list[Item]:
    found: list[Item] = []
    pending = keys
    for attempt in range(backoff.retries + 1):
        if attempt:
            await pause(backoff.delay(attempt - 1))
        async with storage_call():
            response = await client.batch_get_item(
                RequestItems={table_name: {"Keys": pending, "ConsistentRead": consistent}}
            )
        found.extend(response.get("Responses", {}).get(table_name, []))
        unprocessed = response.get("UnprocessedKeys", {}).get(table_name)
        pending = unprocessed.get("Keys", []) if unprocessed is not None else []
        if not pending:
            return found
    raise StorageUnavailable("DynamoDB left part of a batch read unanswered; retry shortly")
