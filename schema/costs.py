"""What the payments' query cost counts beyond the engine's rule (`engine.limits`), so that it
bounds the work (SPEC §21, turn 6): each list with no size argument by the bound the service
enforces on it, and each sharded list's page by the items its merge may read over the
partitions it is kept in (`datasource.pages.read_limit`).

    Payment.applications      at most `MAX_APPLICATIONS` (a completion applies to no more)
    Query.webhookEndpoints    at most `MAX_WEBHOOK_ENDPOINTS` (a registration past it is refused)
    Query.paymentsByStatus    its GSI2 partitions (`LOC_GSI2_SHARDS`, and those still read)
    Query.events              the events feed's partitions (`LOC_EVENTS_SHARDS`)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from types import MappingProxyType

from datasource import read_limit
from domain.payment import MAX_APPLICATIONS
from domain.webhooks import MAX_WEBHOOK_ENDPOINTS

__all__ = ["LIST_CAPS", "page_reads"]

LIST_CAPS: Mapping[str, int] = MappingProxyType(
    {"Payment.applications": MAX_APPLICATIONS, "Query.webhookEndpoints": MAX_WEBHOOK_ENDPOINTS}
)


def page_reads(
    *, status_partitions: int, feed_partitions: int
) -> Mapping[str, Callable[[int], int]]:
    """The items a page of each sharded list reads beyond its size and one more."""
    return MappingProxyType(
        {
            "Query.paymentsByStatus": functools.partial(_beyond, status_partitions),
            "Query.events": functools.partial(_beyond, feed_partitions),
        }
    )


def _beyond(partitions: int, size: int) -> int:
    return read_limit(size, partitions) - (size + 1)
