"""The order `make test`'s parallel run hands its tests out in (tests/conftest.py): the longest
tests head the blocks pytest-xdist's `worksteal` first gives each worker, so that no worker runs
them one after the other while the others run short ones."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.conftest import BENCH_SMOKE, STARTED_FIRST, started_first


@dataclass(frozen=True)
class Item:
    path: Path
    name: str


def worksteal_blocks(items: list[Item], workers: int) -> list[list[Item]]:
    """The blocks of consecutive tests worksteal first sends its idle workers (xdist's
    `WorkStealingScheduling.check_schedule`: to each, what is pending over the workers left)."""
    blocks, pending = [], list(items)
    for worker in range(workers):
        size = len(pending) // (workers - worker)
        blocks.append(pending[:size])
        del pending[:size]
    return blocks


def items() -> list[Item]:
    short = [Item(Path(f"tests/api/test_{number}.py"), "test") for number in range(200)]
    longest = [Item(path, f"test_{number}") for path in STARTED_FIRST for number in range(2)]
    # As pytest-randomly may leave them: the long ones at the end, the smoke test last.
    return short + longest[2:] + longest[:2]


def test_each_worker_starts_on_long_tests_and_the_bench_smoke_test_starts_first() -> None:
    given = items()
    ordered = started_first(given, workers=3)

    assert sorted(ordered, key=given.index) == given
    blocks = worksteal_blocks(ordered, 3)
    assert [item.path for item in blocks[0][:2]] == [BENCH_SMOKE, BENCH_SMOKE]
    long_ones = len(given) - 200
    for block in blocks:
        heads = block[: sum(item.path in STARTED_FIRST for item in block)]
        assert heads and all(item.path in STARTED_FIRST for item in heads)
    # The rest share the other blocks, no block with more than half of them.
    others = [sum(item.path in STARTED_FIRST for item in block) for block in blocks[1:]]
    assert sum(others) == long_ones - 2 and max(others) <= (long_ones - 2 + 1) // 2


def test_one_process_runs_the_longest_first() -> None:
    ordered = started_first(items(), workers=1)

    assert [item.path for item in ordered[:2]] == [BENCH_SMOKE, BENCH_SMOKE]
    assert all(item.path in STARTED_FIRST for item in ordered[: len(ordered) - 200])
