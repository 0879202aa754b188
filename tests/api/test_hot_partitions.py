"""No hot key (SPEC §20), proved by simulation: the tests' proxy throttles each partition key of
the table and its indexes as DynamoDB does, at a limit scaled to what this machine drives, and an
autopay burst through a real service throttles with one shard and meets no throttle at the
default layout (`bench.hot_partitions`, whose figures are in docs/scale-and-cost.md)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest

from bench.burst_shares import burst_shares, render
from bench.hot_partitions import simulate
from datasource import DynamoConfig
from domain.keys import status_partition
from harness.autopay import CREATE, SUBMIT
from harness.proxy import proxy_to
from process.settings import Settings
from tests.api.conftest import SERVICE
from tests.servers import serving

pytestmark = pytest.mark.ddblocal


async def test_the_proxy_charges_each_index_what_dynamodb_reports(
    ddblocal_config: DynamoConfig,
) -> None:
    """The units the proxy puts on each index's partitions for a creation and a submission are
    those DynamoDB Local reports consumed, on the payment's own shard."""
    assert ddblocal_config.endpoint_url is not None
    reported: Counter[str] = Counter()
    async with (
        proxy_to(ddblocal_config.endpoint_url) as proxy,
        serving(proxy.url, ddblocal_config.table_name) as [service],
        httpx.AsyncClient(base_url=service.url, timeout=30) as http,
    ):
        limits = proxy.throttle_partitions(1_000_000)
        assert limits is not None
        headers = {"Authorization": f"Bearer {SERVICE}", "X-Debug-DynamoDB": "1"}

        async def write(query: str, input: dict[str, Any]) -> str:
            response = await http.post(
                "/graphql", json={"query": query, "variables": {"i": input}}, headers=headers
            )
            body = response.json()
            for name, units in body["extensions"]["dynamodb"]["capacity"].items():
                reported[name.removeprefix(ddblocal_config.table_name).lstrip("/")] += units[
                    "write"
                ]
            payment_id: str = body["data"]["result"]["payment"]["paymentId"]
            return payment_id

        loan = {"userId": "borrower-1", "loanId": "loan-1"}
        payment_id = await write(
            CREATE, {**loan, "amountCents": 100, "method": "ACH", "idempotencyKey": "c-1"}
        )
        await write(
            SUBMIT, {**loan, "paymentId": payment_id, "reason": "ach file",
                     "confirmationId": "ach-1", "idempotencyKey": "s-1"},
        )  # fmt: skip

    charged: Counter[str] = Counter()
    for (index, _), units in limits.admitted.items():
        charged[index] += units
    for index in ("GSI1", "GSI2", "GSI3", "GSI4"):
        assert charged[index] == reported[index], (index, charged, reported)
    # DynamoDB Local reports a presentment's table share 2 units under AWS's rule (scale-and-cost).
    assert charged["table"] >= reported[""] > 0
    keys = {index: key for index, key in limits.admitted}
    assert keys["GSI2"] == status_partition(payment_id, Settings().gsi2_shards)
    assert keys["table"] == keys["GSI1"] == keys["GSI3"] == "USER#borrower-1"


async def test_one_shard_throttles_an_autopay_burst_the_defaults_absorb(
    ddblocal_endpoint: str,
) -> None:
    simulation = await simulate(
        ddblocal_endpoint, measure_seconds=3.0, burst_seconds=4.0, clients=6
    )
    one_shard, defaults = simulation.one_shard, simulation.defaults
    print(f"\nR {simulation.rate:.1f}/s, L {simulation.limit:.2f} units/s\n{one_shard}\n{defaults}")

    assert simulation.rate > 0
    # One shard: the busiest key of GSI2 (and of the feed) takes every payment's units.
    assert one_shard.busiest["GSI2"] == ("PAYMENT", 1.0)
    assert one_shard.throttles > 0 and one_shard.throttled.get("GSI2", 0) > 0
    assert one_shard.throttles_counted > 0
    # The defaults: no key above its limit, nothing throttled, nothing refused, at the pace.
    assert defaults.throttles == 0 and defaults.throttles_counted == 0
    assert defaults.burst.refused == 0
    assert defaults.burst.writes_per_second >= 0.5 * simulation.rate
    assert defaults.busiest["GSI2"][1] < 1.0 and defaults.busiest["GSI4"][1] < 1.0


async def test_a_burst_through_the_service_leaves_no_key_hotter_than_chance(
    ddblocal_endpoint: str,
) -> None:
    """SPEC §20's Done-when: 1,000 payments, half of them submitted, through `python -m cli
    serve` with the stack's settings; one Scan: every index's busiest key within what sampling
    explains (`bench.burst_shares`' bound), the sharded ones spread over their default shards."""
    results = await burst_shares(ddblocal_endpoint, payments=1_000)
    print("\n" + render(results))

    assert results["writes"] == 1_500
    rows = {row["index"]: row for row in results["indexes"]}
    assert rows["GSI2"]["keys"] == 64 and rows["GSI4"]["keys"] == 32
    assert rows["GSI2"]["items"] == 1_000 and rows["GSI4"]["items"] == 1_500
    assert [index for index, row in rows.items() if not row["met"]] == []
