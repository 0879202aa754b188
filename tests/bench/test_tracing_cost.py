"""The tracing pass of the bench (`python -m bench.tracing_cost`) in miniature: both sides of
both workloads measured, and every span the traced app ended reached the receiver."""

from __future__ import annotations

from bench import tracing_cost


async def test_the_tracing_pass_measures_both_sides_and_exports_every_span() -> None:
    results = await tracing_cost.measure(tracing_cost.QUICK)

    cells = {(cell["workload"], cell["in_flight"]) for cell in results["cells"]}
    assert cells == {(w, n) for w in tracing_cost.WORKLOADS for n in tracing_cost.IN_FLIGHT}
    assert all(cell["none_cpu_ms"] > 0 and cell["otlp_cpu_ms"] > 0 for cell in results["cells"])
    # The operation, its DataLoader batch and its one DynamoDB call: no span per field.
    assert results["spans_per_request"] == {"payment": 3.0, "loan_page": 3.0}
    assert results["spans_received"] == results["spans_ended"] > 0
    assert "otlp/none" in tracing_cost.render(results)
