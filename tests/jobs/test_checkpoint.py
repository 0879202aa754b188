"""The checkpoint file and the report file a resumed run continues."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datasource import StatusPosition
from jobs.checkpoint import (
    Checkpoint,
    CollectionCounts,
    load_checkpoint,
    open_report,
    save_checkpoint,
)
from jobs.errors import CheckpointRefused
from jobs.group_progress import DONE, START, GroupProgress, Standing

RUN = Checkpoint(table_name="test-loc-service", report="/data/eligible.jsonl", dry_run=False)


def position(payment_id: str) -> StatusPosition:
    return StatusPosition(
        f"STATUS#RETRY#PAYMENT#{payment_id}", "USER#alice", f"LOAN#1#PAYMENT#{payment_id}"
    )


def test_a_saved_checkpoint_loads_as_it_was_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    # Four groups, one regrouping ago from two.
    groups = GroupProgress(
        Standing(4, (DONE, position("p2"), START, position("p1"))),
        earlier=(Standing(2, (DONE, position("p0"))),),
    )
    checkpoint = Checkpoint(
        table_name="test-loc-service",
        report=None,
        dry_run=True,
        groups=groups,
        report_bytes=None,
        counts=CollectionCounts(scanned=5, failed=1, eligible=3, conflicts=1),
    )

    save_checkpoint(path, checkpoint)
    save_checkpoint(path, checkpoint)

    assert load_checkpoint(path) == checkpoint
    assert [entry.name for entry in tmp_path.iterdir()] == ["checkpoint.json"]
    saved = json.loads(path.read_text())
    assert (saved["format"], saved["finished"]) == ("loc-payments-collect/2", False)
    # Positions are the key values themselves, not cursors.
    assert saved["groups"]["stands"][1] == {
        "GSI2SK": "STATUS#RETRY#PAYMENT#p2",
        "PK": "USER#alice",
        "SK": "LOAN#1#PAYMENT#p2",
    }


def test_a_checkpoint_of_the_merged_job_is_carried_over_as_one_group(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    old = {
        "format": "loc-payments-collect/1",
        "table_name": "test-loc-service",
        "report": None,
        "dry_run": False,
        "report_bytes": None,
        "counts": {"scanned": 3, "failed": 1, "eligible": 2, "conflicts": 0, "skipped": 0},
        "run_id": "0123456789abcdef0123456789abcdef",
    }
    for cursor, finished in (("signed-cursor", False), (None, False), (None, True)):
        path.write_text(json.dumps(old | {"cursor": cursor, "finished": finished}))

        carried = load_checkpoint(path)

        assert carried is not None
        assert (carried.run_id, carried.counts.scanned) == (old["run_id"], 3)
        # The cursor is read as a position by the store that signed it, when the run starts.
        assert (carried.merged_cursor, carried.finished) == (cursor, finished)
        assert carried.groups.modulus == 1


def test_no_file_means_no_checkpoint_yet(tmp_path: Path) -> None:
    assert load_checkpoint(tmp_path / "checkpoint.json") is None


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        '{"format": "something else"}',
        '{"format": "loc-payments-collect/1"}',
        '{"format": "loc-payments-collect/2"}',
    ],
)
def test_a_file_that_is_not_a_whole_checkpoint_is_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_text(content)

    with pytest.raises(CheckpointRefused):
        load_checkpoint(path)


@pytest.mark.parametrize(
    ("other", "named"),
    [
        (Checkpoint("prod-loc-service", RUN.report, dry_run=False), "table"),
        (Checkpoint(RUN.table_name, "/data/other.jsonl", dry_run=False), "report file"),
        (Checkpoint(RUN.table_name, RUN.report, dry_run=True), "--dry-run"),
    ],
)
def test_a_checkpoint_resumes_only_its_own_run(other: Checkpoint, named: str) -> None:
    with pytest.raises(CheckpointRefused, match=named):
        RUN.check_matches(other)


def test_a_resumed_report_is_cut_back_to_the_last_finished_page(tmp_path: Path) -> None:
    path = tmp_path / "eligible.jsonl"
    path.write_bytes(b'{"page": 1}\n{"page": 2, "unfinished": true}\n')
    resumed = Checkpoint(RUN.table_name, str(path), dry_run=False, report_bytes=12)

    with open_report(path, resumed) as report:
        report.write(b'{"page": 2}\n')

    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"page": 1},
        {"page": 2},
    ]


def test_a_fresh_run_starts_its_report_over(tmp_path: Path) -> None:
    path = tmp_path / "eligible.jsonl"
    path.write_bytes(b'{"yesterday": true}\n')

    with open_report(path, None) as report:
        report.write(b'{"today": true}\n')

    assert path.read_bytes() == b'{"today": true}\n'


@pytest.mark.parametrize("length", [None, 100])
def test_a_report_that_lost_lines_since_the_checkpoint_is_refused(
    tmp_path: Path, length: int | None
) -> None:
    path = tmp_path / "eligible.jsonl"
    if length is not None:
        path.write_bytes(b"x" * (length - 1))
    resumed = Checkpoint(RUN.table_name, str(path), dry_run=False, report_bytes=100)

    with pytest.raises(CheckpointRefused):
        open_report(path, resumed)
