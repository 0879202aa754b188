"""`python -m bench.capacity` in miniature: every walkthrough step and mutation, measured on
DynamoDB Local, into one markdown table."""

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


async def test_the_capacity_benchmark_measures_every_operation(
    ddblocal_endpoint: str, table_name: str
) -> None:
    rows = await measure(ddblocal_endpoint, table_name=table_name)

    assert len([name for name in rows if name.startswith("walkthrough: ")]) == len(walkthrough())
    assert set(rows) >= MUTATIONS
    created = rows["createPayment"]
    assert created.operations == {"TransactWriteItems": 1}
    assert (created.read, created.write) == (0.0, 8.0)
    assert set(created.capacity) == {"table", "GSI1", "GSI2"}
    for mutation in MUTATIONS - {"createPayment"}:
        # The strong read that decides the move, then its transaction.
        assert rows[mutation].read > 0 and rows[mutation].write > 0, mutation
    retries = rows["walkthrough: Retries"]
    assert retries.write == 0.0 and set(retries.capacity) == {"GSI2"}

    table = render({"default": rows, "again": rows}).splitlines()
    assert table[0].startswith("| operation | DynamoDB calls | RCU | WCU |")
    assert table[0].endswith("| RCU (again) | WCU (again) |")
    assert len(table) == 2 + len(rows)
    created_row = table[2 + list(rows).index("createPayment")]
    assert created_row == (
        "| createPayment | TransactWriteItems 1 | 0 | 8 | table 0/4, GSI1 0/2, GSI2 0/2 | 0 | 8 |"
    )
