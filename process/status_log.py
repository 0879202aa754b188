"""A status line every `LOC_STATUS_LOG_INTERVAL` seconds (`loc_payments.status`): the DynamoDB
circuit breaker's state, the DynamoDB attempts throttled since the last line and, on the
instance that reads the table's stream, how far behind its reading is. The deploy stack turns the
line's fields into CloudWatch metrics (log metric filters) and alarms on them, so that no
collector is needed beside the logs.

    {"name": "loc_payments.status", "breaker_open": 0, "dynamodb_throttles": 0,
     "stream_seconds_behind": 0.5, ...}
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from datasource import CircuitBreaker, Throttles

__all__ = [
    "BREAKER_OPEN_FIELD",
    "STREAM_BEHIND_FIELD",
    "THROTTLES_FIELD",
    "log_status",
    "log_status_every",
]

logger = logging.getLogger("loc_payments.status")

BREAKER_OPEN_FIELD = "breaker_open"
STREAM_BEHIND_FIELD = "stream_seconds_behind"
THROTTLES_FIELD = "dynamodb_throttles"


def log_status(
    breaker: CircuitBreaker | None, throttled: int, stream_seconds_behind: float | None
) -> None:
    """`breaker` None: a store on a client the caller brings (the benchmark's), never open;
    `throttled` the attempts throttled since the last line."""
    state = "closed" if breaker is None else breaker.state
    fields: dict[str, float] = {
        BREAKER_OPEN_FIELD: int(state == "open"),
        THROTTLES_FIELD: throttled,
    }
    stream = "not read here"
    if stream_seconds_behind is not None:
        fields[STREAM_BEHIND_FIELD] = round(stream_seconds_behind, 3)
        stream = f"{stream_seconds_behind:.1f} s behind"
    logger.info(
        "status: DynamoDB breaker %s, %d attempts throttled, stream %s",
        state,
        throttled,
        stream,
        extra=fields,
    )


async def log_status_every(
    interval: float,
    breaker: CircuitBreaker | None,
    throttles: Throttles,
    stream_seconds_behind: Callable[[], float | None],
) -> None:
    """Log the status every `interval` seconds, until cancelled (`server.background.running`)."""
    reported = throttles.total
    while True:
        await asyncio.sleep(interval)
        total = throttles.total
        log_status(breaker, total - reported, stream_seconds_behind())
        reported = total
