"""`make bench`'s report of the DynamoDB Local comparison: each ratio with its spread over the
rounds (issue 59, item 5), in the targets and in the table."""

from __future__ import annotations

import copy
import json
from typing import Any

from bench import report
from bench.figures import RESULTS


def _comparison(service: list[float], node: list[float]) -> list[dict[str, Any]]:
    """Rounds of the loan page: the service's and the peer's rates (CPU ms: 1,000 / rate), raw
    aioboto3 and raw HTTP at 100 a second each."""
    rows = []
    for round_, (mine, theirs) in enumerate(zip(service, node, strict=True)):
        for side, rate in (("service", mine), ("node", theirs), ("raw", 100.0), ("http", 100.0)):
            rows.append(
                {
                    "side": side,
                    "workload": "loan_page",
                    "round": round_,
                    "rate": rate,
                    "server_cpu_ms_per_request": 1000 / rate,
                    "cpu_ms_per_call": 10.0,
                    "load_generator_core_share": 0.02,
                }
            )
    return rows


def test_each_ratio_of_the_comparison_is_reported_with_its_spread_over_the_rounds() -> None:
    results = copy.deepcopy(json.loads(RESULTS.read_text()))
    local = results["dynamodb_local"]
    local["comparison"] = _comparison([100.0, 110.0, 120.0, 130.0, 125.0], [100.0] * 5)
    # The recorded run's other rows (by_status at the defaults reads its one-shard calls) stay.
    local["service_calls"] = {**local.get("service_calls", {}), "loan_page": {"requests": 1}}
    found = {target.name: target for target in report.targets(results["engine"], local)}

    rate = found["service / Node peer req/s on DynamoDB Local, 16 connections, 100-item lists"]
    assert rate.measured == {"loan_page": 1.20}
    assert rate.spread == {"loan_page": (1.0, 1.3)}
    cpu = found["Node peer / service CPU per request, 100-item lists"]
    assert cpu.spread == {"loan_page": (1.0, 1.3)}

    results["dynamodb_local"] = local
    results["targets"] = report.target_records(list(found.values()))
    text = report.render(results)
    (line,) = [line for line in text.splitlines() if line.startswith(rate.name)]
    assert line.endswith("loan_page 1.20 (1.00-1.30)")
    (row,) = [line for line in text.splitlines() if line.startswith("loan_page ") and "100" in line]
    # service / Node and service / raw HTTP, each beside its spread.
    assert "1.20 (1.00-1.30)" in row and "1.20 (1.00-1.30)" in row.split("1.20 (1.00-1.30)", 1)[1]
