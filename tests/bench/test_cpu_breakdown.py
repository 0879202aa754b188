"""`bench.cpu_breakdown`: a py-spy sample counts for the part of its innermost frame."""

from __future__ import annotations

from bench.cpu_breakdown import OTHER, part_of, shares

ROOT = "run (uvloop/__init__.py:92);Runner.run (asyncio/runners.py:118)"


def test_a_sample_counts_for_its_innermost_frame_with_a_part() -> None:
    # A timestamp parsed while the plan reads a field: mapping, not completion.
    parsing = [
        ROOT,
        "one_pass (<one pass of Payment>:1)",
        "_lazy_field.<locals>.read (/work/main/datasource/items.py:255)",
        "parse_timestamp (/work/main/domain/validation.py:180)",
    ]
    logging = [
        ROOT,
        "observe (server/request_records.py:190)",
        "format (pythonjsonlogger/core.py:1)",
    ]

    assert part_of(parsing) == "mapping"
    assert part_of(["one_pass (<one pass of Payment>:1)"]) == "completion"
    assert part_of(logging) == "logs, metrics"
    assert part_of([ROOT]) == OTHER


def test_shares_add_up_to_one_over_the_samples() -> None:
    raw = "\n".join(
        [
            f"{ROOT};parse (datasource/aiobotocore_adapter.py:80) 3",
            f"{ROOT};read (datasource/items.py:255) 1",
            f"{ROOT} 4",
        ]
    )

    assert shares(raw) == {"decode": 0.375, "mapping": 0.125, OTHER: 0.5}
