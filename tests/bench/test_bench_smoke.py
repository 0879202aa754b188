"""`make bench` in miniature: every peer, every workload, both passes, the report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_harness_runs_end_to_end_and_reports_every_target(tmp_path: Path) -> None:
    output = tmp_path / "latest.json"
    finished = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    results = json.loads(output.read_text())

    # The peers returned the same data for every workload (the run stops otherwise), and the
    # service made the fewest DynamoDB calls for each.
    engine = results["engine"]
    assert {(cell["peer"], cell["workload"]) for cell in engine["cells"]} == {
        (peer, workload["name"])
        for peer in ("P0", "P1", "P2", "P3")
        for workload in engine["workloads"]
    }
    assert all(cell["errors"] == 0 for cell in engine["cells"])
    targets = {target["name"]: target for target in results["targets"] if not target["reference"]}
    assert len(targets) == 6
    assert targets["DynamoDB calls per operation / minimum (fake)"]["met"]
    assert results["dynamodb_local"]["scale_payments"] > results["dynamodb_local"]["base_payments"]
    assert "Targets (issue 6)" in finished.stdout
