"""`python -m bench.profile`, the README's profiler, runs and names where the CPU goes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_profile_of_one_payment_names_the_pipeline() -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "bench.profile", "payment", "--requests", "50", "--top", "200"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )

    first = finished.stdout.splitlines()[0]
    assert first.startswith("payment: ") and first.endswith(
        "ms of CPU per request, without the profiler"
    )
    assert float(first.split()[1]) > 0
    assert "schema/operations.py" in finished.stdout
