"""`python -m bench.capacity` in miniature: every walkthrough step, every mutation and every
workload measured on DynamoDB Local, into one markdown table. What each costs is asserted where
the contract is, `tests/api/test_capacity.py`."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from bench.capacity import list_costs, measure, render, render_lists, walkthrough
from process.settings import Settings
from tests.backends import Backend

pytestmark = pytest.mark.ddblocal

MUTATIONS = {
    "createPayment",
    "submitPayment",
    "completePayment",
    "schedulePaymentRetry",
    "failPayment",
    "returnPayment",
    "chargeBackPayment",
    "skipPayment",
}


@pytest.fixture
async def table_name(ddblocal_backend: Backend) -> AsyncIterator[str]:
    """A name the benchmark's app creates its table under, deleted afterwards."""
    name = f"bench-capacity-{uuid.uuid4().hex}"
    yield name
    await ddblocal_backend.client.delete_table(TableName=name)


async def test_the_capacity_table_has_a_row_for_every_operation(
    ddblocal_endpoint: str, table_name: str
) -> None:
    rows = await measure(ddblocal_endpoint, table_name=table_name)

    assert len([name for name in rows if name.startswith("walkthrough: ")]) == len(walkthrough())
    assert set(rows) >= MUTATIONS
    assert len([name for name in rows if name.startswith("workload: ")]) == 5
    for name, cost in rows.items():
        assert cost.operations and (cost.read or cost.write or "replayed" in name), name
    table = render(rows).splitlines()
    assert table[0] == "| operation | DynamoDB calls | RCU | WCU | per table/index (R/W) |"
    assert len(table) == 2 + len(rows)
    assert table[2 + list(rows).index("createPayment")].startswith(
        "| createPayment | TransactWriteItems 1 | "
    )


async def test_a_page_over_the_default_shards_reads_little_more_than_one_shards(
    ddblocal_endpoint: str,
) -> None:
    """SPEC §20's read target (issue 56): a 100-item page at the default layout reads at most a
    one-shard page's units + 0.5 per shard, in at most 3 sequential rounds of Queries."""
    found = await list_costs(ddblocal_endpoint)
    print(f"\n{render_lists(found)}")
    settings = Settings()
    shards = {"paymentsByStatus": settings.gsi2_shards, "events": settings.events_shards}

    for name, count in shards.items():
        defaults, one = found["defaults"][name], found["one shard"][name]
        # Every shard is asked once in the first round; a refill asks a few of them again.
        assert defaults.queries >= count and one.queries == 1, name
        assert defaults.read <= one.read + 0.5 * count, (name, defaults, one)
        assert defaults.rounds <= 3, (name, defaults)
    assert found["defaults"]["head"].queries == settings.events_shards
