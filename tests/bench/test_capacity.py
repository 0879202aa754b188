"""`python -m bench.capacity` in miniature: every walkthrough step, every mutation and every
workload measured on DynamoDB Local, into one markdown table. What each costs is asserted where
the contract is, `tests/api/test_capacity.py`."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from bench.capacity import measure, render, walkthrough
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
