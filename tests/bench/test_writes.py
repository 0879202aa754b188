"""`python -m bench.writes` in miniature: both write paths run, and their costs are DynamoDB's."""

from __future__ import annotations

from bench.writes import measure
from datasource import DynamoConfig, PaymentStore
from datasource.client import open_client
from tests.backends import CURSOR_SECRET


async def test_the_write_benchmark_measures_both_paths(ddblocal_config: DynamoConfig) -> None:
    # Its own client: the benchmark's capacity hook must not reach the shared one.
    async with open_client(ddblocal_config) as client:
        store = PaymentStore(
            client, table_name=ddblocal_config.table_name, cursor_secret=CURSOR_SECRET
        )
        result = await measure(store, rounds=2)

    units = result["capacity_units"]
    # A write and its event in one transaction: twice the units of each item, plus the event.
    assert units["create after"] == 2 * (units["create before"] + 1)
    assert units["skip after"] == 2 * (units["skip before"] + 1)
    assert units["history (2 events)"] == 0.5  # one eventually consistent read of < 4 KB
    assert set(result["after_over_before"]) == {"create", "skip", "submit"}
    assert all(ratio > 0 for ratio in result["after_over_before"].values())
