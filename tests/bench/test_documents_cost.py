"""The trusted-documents pass of the bench (`python -m bench.documents_cost`) in miniature: both
workloads measured by id and by text, after checking that both answer the same."""

from __future__ import annotations

from bench import documents_cost


async def test_the_documents_pass_measures_both_sides_of_both_workloads() -> None:
    results = await documents_cost.measure(documents_cost.QUICK)

    assert [cell["workload"] for cell in results["cells"]] == list(documents_cost.WORKLOADS)
    assert all(cell["text_cpu_ms"] > 0 and cell["id_cpu_ms"] > 0 for cell in results["cells"])
    assert "id/text" in documents_cost.render(results)
