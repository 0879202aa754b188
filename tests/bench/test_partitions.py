"""`python -m bench.partitions`: at the default settings every index allows at least 10,000
payment writes a second by SPEC §20's formula, its units measured on DynamoDB Local and the
busiest key's share over 100,000 payment ids. The shard counts are the settings' defaults, so
lowering one fails here."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest

from bench.partitions import IDS, TARGET, ceilings, render
from process.settings import Settings
from tests.backends import Backend

pytestmark = pytest.mark.ddblocal


@pytest.fixture
async def table_name(ddblocal_backend: Backend) -> AsyncIterator[str]:
    name = f"bench-partitions-{uuid.uuid4().hex}"
    yield name
    await ddblocal_backend.client.delete_table(TableName=name)


async def test_every_index_allows_ten_thousand_payment_writes_a_second_at_the_defaults(
    ddblocal_endpoint: str, table_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The defaults, whatever the developer's shell sets.
    for name in [name for name in os.environ if name.startswith("LOC_")]:
        monkeypatch.delenv(name)
    found = await ceilings(ddblocal_endpoint, table_name=table_name, settings=Settings())
    print(f"\n{render(found)}")

    assert IDS >= 100_000
    assert [ceiling.index for ceiling in found] == ["table", "GSI1", "GSI2", "GSI3", "GSI4"]
    # What a payment write costs each index, as the data model says: a move is a delete and a
    # put on GSI1 and GSI2 (2 units each in a transaction), an event's copy on GSI4 2 units.
    by_index = {ceiling.index: ceiling for ceiling in found}
    assert (by_index["GSI1"].units, by_index["GSI2"].units, by_index["GSI4"].units) == (4, 4, 2)
    for ceiling in found:
        assert ceiling.payment_writes_per_second >= TARGET, render(found)
