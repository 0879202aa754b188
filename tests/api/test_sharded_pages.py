"""What a page of the sharded lists costs, as a caller reads it (SPEC §20, `X-Debug-DynamoDB`):
a 100-item `paymentsByStatus` page and `events` page at the default layout wait for at most 3
rounds of Queries and read at most a one-shard page's units + 0.5 per shard, answering what the
one-shard layout answers. DynamoDB Local counts the units a Query reads (moto reports one a
Query)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from datasource import DynamoConfig, PaymentStore
from domain import keys
from domain.keys import FeedLayout, StatusLayout
from tests.api.conftest import Api, Clock, api_client
from tests.backends import CURSOR_SECRET, Backend, fresh_table
from tests.datasource.sharded_tables import lives, seed

PAYMENTS = 600
BY_STATUS = """query($after: String) {
  result: paymentsByStatus(status: PENDING, first: 100, after: $after) {
    edges { node { paymentId } } pageInfo { endCursor }
  }
}"""
EVENTS = """query($after: String) {
  result: events(first: 100, after: $after) {
    edges { node { eventId } } pageInfo { endCursor }
  }
}"""


@pytest.fixture
async def one_shard_config(ddblocal_backend: Backend) -> AsyncIterator[DynamoConfig]:
    table_name = await fresh_table(ddblocal_backend)
    yield ddblocal_backend.config(table_name)
    await ddblocal_backend.client.delete_table(TableName=table_name)


def store(
    backend: Backend, config: DynamoConfig, status: StatusLayout, feed: FeedLayout
) -> PaymentStore:
    """A store writing in the layouts the service on `config`'s table recorded."""
    return PaymentStore(
        backend.client,
        table_name=config.table_name,
        cursor_secret=CURSOR_SECRET,
        layout=status,
        feed=feed,
    )


async def page(api: Api, query: str, after: str | None) -> tuple[list[str], str, Any]:
    body = await api.post(query, {"after": after}, debug=True)
    assert "errors" not in body, body["errors"]
    result = body["data"]["result"]
    listed = [next(iter(edge["node"].values())) for edge in result["edges"]]
    return listed, result["pageInfo"]["endCursor"], body["extensions"]["dynamodb"]


async def test_a_page_of_100_at_the_defaults_reads_little_more_than_one_shard_in_three_rounds(
    ddblocal_backend: Backend, ddblocal_config: DynamoConfig, one_shard_config: DynamoConfig
) -> None:
    clock = Clock()
    # The page's own calls only: seeding can outlast two refresh intervals on a loaded machine,
    # and then the layout record is read again in the first request (one GetItem).
    steady = 600
    async with (
        api_client(ddblocal_config, clock=clock, layout_refresh_seconds=steady) as defaults,
        api_client(
            one_shard_config,
            clock=clock,
            gsi2_shards=1,
            events_shards=1,
            layout_refresh_seconds=steady,
        ) as one,
    ):
        # The same payments and events in each table.
        payments, events = lives(PAYMENTS, start=clock.now - timedelta(hours=1))
        default_layouts = (
            StatusLayout(keys.DEFAULT_GSI2_SHARDS),
            FeedLayout.of(keys.DEFAULT_FEED_SHARDS),
        )
        for config, layouts in (
            (ddblocal_config, default_layouts),
            (one_shard_config, (keys.SEED_LAYOUT, keys.SEED_FEED)),
        ):
            await seed(store(ddblocal_backend, config, *layouts), payments, events)

        for query, shards in (
            (BY_STATUS, keys.DEFAULT_GSI2_SHARDS),
            (EVENTS, keys.DEFAULT_FEED_SHARDS),
        ):
            after_one = after_many = None
            for _ in range(2):  # the list's first page, and the next from its cursor
                listed_one, after_one, cost_one = await page(one, query, after_one)
                listed, after_many, cost = await page(defaults, query, after_many)
                assert len(listed) == 100 and listed == listed_one
                assert cost_one["listRounds"] == 1
                assert cost["listRounds"] <= 3, cost
                assert cost["operations"] == {"Query": cost["requests"]}
                read, read_one = cost["readCapacityUnits"], cost_one["readCapacityUnits"]
                assert read <= read_one + 0.5 * shards, (query, read, read_one)
