"""`python -m bench.live` in miniature: two instances, four subscribers, twenty writes."""

from __future__ import annotations

import math

import pytest

from bench.live import LiveOptions, measure, succeeded


@pytest.mark.ddblocal
async def test_every_write_reaches_each_subscriber_of_its_user_once(
    ddblocal_endpoint: str,
) -> None:
    # Two users: each has a subscriber on either instance, so every event crosses instances.
    options = LiveOptions(subscribers=4, writes=20, instances=2, users=2, writers=4)

    results = await measure(options, endpoint_url=ddblocal_endpoint, log=lambda _: None)

    assert results["writes"] == 20
    assert results["expected"] == 20 * 2
    assert results["delivered"] == results["expected"]
    assert results["missing"] == 0
    assert results["duplicates"] == 0
    assert results["unexpected"] == 0
    assert results["subscriber_failures"] == []
    assert succeeded(results)
    latencies = results["latency_ms"]
    measured = [latencies[name] for name in ("min", "p50", "p99", "max")]
    assert all(value is not None and math.isfinite(value) for value in measured), latencies
    assert latencies["min"] <= latencies["p50"] <= latencies["p99"] <= latencies["max"]
    assert results["writes_per_second"] > 0
