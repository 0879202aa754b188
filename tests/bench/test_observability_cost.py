"""The request log and metrics' cost (`python -m bench.observability_cost`) in miniature: both
servers measured, the observed one writing the request log and the other none (the pass checks
it), every request observed once, and the three readings of the share reported."""

from __future__ import annotations

from bench import observability_cost


async def test_the_pass_reports_the_log_and_metrics_share_of_a_payment() -> None:
    results = await observability_cost.measure(observability_cost.QUICK, log=lambda _: None)

    assert results["rounds"] == observability_cost.QUICK.rounds
    for side in observability_cost.SIDES:
        assert results[f"{side}_cpu_ms"] > 0 and results[f"{side}_requests_per_second"] > 0
    # A request still in flight as a run ends may be observed in the next reading.
    assert 0.9 < results["observed_per_request"] < 1.1
    assert 0 < results["observer_us"] < 1000 * results["on_cpu_ms"]
    for reading in ("share", "share_on_off"):
        spread = results[reading]
        assert -1 < spread["low"] <= spread["median"] <= spread["high"] < 1
    assert results["share"]["low"] > 0
    profiled = results["py_spy_share"]
    assert profiled is None or 0 <= profiled < 1
    assert results["met"] == (results["share"]["median"] <= observability_cost.TARGET)
    assert "CPU in Metrics.observe" in observability_cost.render(results)
