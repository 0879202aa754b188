"""The collection job's checkpoint: where a run stands, saved atomically after every page.

A checkpoint names one run. It holds where each group of GSI2 stood after the last page the run
finished (`jobs.group_progress`), the counts so far, and how many bytes of the report file that
page left behind; a resumed run cuts the report back to that length, so the lines of a page that
did not finish are written once, by the run that finishes it. It is bound to the table, the report
file and the dry-run flag it was made with: resuming with others would skip or repeat payments,
so they are refused. One written by the job that read GSI2 in one merged order (format
`loc-payments-collect/1`, a cursor) is carried over: its cursor is one group's position.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from jobs.errors import CheckpointRefused
from jobs.group_progress import DONE, GroupProgress, Standing

__all__ = [
    "Checkpoint",
    "CollectionCounts",
    "load_checkpoint",
    "open_report",
    "read_checkpoint",
    "refuse_mismatch",
    "replace_file",
    "report_length",
    "save_checkpoint",
]

_FORMAT = "loc-payments-collect/2"
# The job that read GSI2 in one merged order (a cursor, not groups): carried over.
_MERGED_FORMAT = "loc-payments-collect/1"


@dataclass(frozen=True, slots=True)
class CollectionCounts:
    scanned: int = 0  # listed by the index
    failed: int = 0  # moved to FAILED (in a dry run: would have been)
    eligible: int = 0  # reported for the submitter
    conflicts: int = 0  # changed by another writer between our read and our write
    skipped: int = 0  # no longer in RETRY when read from the table

    def plus(self, **increments: int) -> CollectionCounts:
        totals = asdict(self)
        for name, increment in increments.items():
            totals[name] += increment
        return CollectionCounts(**totals)

    def summary(self) -> str:
        return ", ".join(f"{name} {value}" for name, value in asdict(self).items())


@dataclass(frozen=True, slots=True)
class Checkpoint:
    table_name: str
    report: str | None  # the report file's absolute path; None: stdout
    dry_run: bool
    # Where each group stood after the last finished page.
    groups: GroupProgress = field(default_factory=GroupProgress.fresh)
    report_bytes: int | None = None  # the report's length after that page (files only)
    counts: CollectionCounts = CollectionCounts()
    # Names the run in the idempotency keys of its moves; a resumed run keeps it.
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    # The cursor of a checkpoint of format 1, read as a position once the store is open (its
    # codec verifies it); `groups` says nothing until then.
    merged_cursor: str | None = None

    @property
    def finished(self) -> bool:
        return self.merged_cursor is None and self.groups.finished

    def check_matches(self, other: Checkpoint) -> None:
        """Refuse to resume this run as `other` (the run the command line describes)."""
        refuse_mismatch(
            "a run",
            "options",
            ("table", self.table_name, other.table_name),
            ("report file (--output)", self.report, other.report),
            ("--dry-run", self.dry_run, other.dry_run),
        )


def refuse_mismatch(job: str, given_by: str, *compared: tuple[str, object, object]) -> None:
    """Refuse to resume a checkpoint of `job` whose (name, checkpoint's, run's) values differ:
    the run must be given the same `given_by` (options, settings) as the one that wrote it."""
    for name, mine, theirs in compared:
        if mine != theirs:
            raise CheckpointRefused(
                f"the checkpoint belongs to {job} with {name} {mine!r}, not {theirs!r}; resume "
                f"it with the same {given_by}, or start over with a new checkpoint file"
            )


def read_checkpoint(
    path: Path, *, format: str, job: str, carried: tuple[str, ...] = ()
) -> dict[str, Any] | None:
    """The JSON object of a job's checkpoint at `path` (None when there is none yet), in
    `format` or one of the older formats `carried` over; refused when it cannot be read or is
    another job's."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise CheckpointRefused(f"cannot read the checkpoint {path}: {error}") from None
    if not isinstance(data, dict) or data.get("format") not in (format, *carried):
        raise CheckpointRefused(f"{path} is not a checkpoint of loc-payments {job}")
    return data


def load_checkpoint(path: Path) -> Checkpoint | None:
    """The checkpoint saved at `path`, or None when there is none yet."""
    data = read_checkpoint(path, format=_FORMAT, job="collect", carried=(_MERGED_FORMAT,))
    if data is None:
        return None
    try:
        groups, merged_cursor = _progress(data)
        return Checkpoint(
            table_name=data["table_name"],
            report=data["report"],
            dry_run=data["dry_run"],
            report_bytes=data["report_bytes"],
            counts=CollectionCounts(**data["counts"]),
            # A checkpoint saved before runs had ids gets one now.
            **({"run_id": data["run_id"]} if isinstance(data.get("run_id"), str) else {}),
            groups=groups,
            merged_cursor=merged_cursor,
        )
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointRefused(f"the checkpoint {path} is damaged: {error}") from None


def _progress(data: dict[str, Any]) -> tuple[GroupProgress, str | None]:
    """The groups' progress a checkpoint holds, and the cursor of one of format 1."""
    if data["format"] != _MERGED_FORMAT:
        return GroupProgress.from_json(data["groups"]), None
    # One cursor in the merged order of every partition: one group, at the cursor's position.
    if data["finished"]:
        return GroupProgress(Standing(1, (DONE,))), None
    cursor = data["cursor"]
    if cursor is not None and not isinstance(cursor, str):
        raise ValueError(f"not a cursor: {cursor!r}")
    return GroupProgress.fresh(), cursor


def save_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Replace the checkpoint at `path` in one step: a crash leaves the old one or the new one."""
    assert checkpoint.merged_cursor is None, "a carried-over cursor is read before any page"
    body = {
        "format": _FORMAT,
        "table_name": checkpoint.table_name,
        "report": checkpoint.report,
        "dry_run": checkpoint.dry_run,
        "report_bytes": checkpoint.report_bytes,
        "counts": asdict(checkpoint.counts),
        "run_id": checkpoint.run_id,
        # For whoever reads the file; a loaded checkpoint has it from its groups.
        "finished": checkpoint.finished,
        "groups": checkpoint.groups.to_json(),
    }
    replace_file(path, json.dumps(body, indent=2).encode())


def replace_file(path: Path, body: bytes) -> None:
    """Write `body` (and a newline) at `path` in one step, durably: a crash leaves the old file
    or the new one, never a mix."""
    body += b"\n"
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(body)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    # The rename is durable only once the directory is; not every platform can open one.
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def open_report(path: Path | None, resumed: Checkpoint | None) -> IO[bytes]:
    """Where the eligible payments' lines go: stdout, a new file, or a resumed run's file cut
    back to what its last finished page left."""
    if path is None:
        return sys.stdout.buffer
    if resumed is None or resumed.report_bytes is None:
        return path.open("wb")
    try:
        report = path.open("r+b")
    except FileNotFoundError:
        raise CheckpointRefused(
            f"the checkpoint's report file {path} is gone; its lines cannot be kept exactly once"
        ) from None
    if report.seek(0, os.SEEK_END) < resumed.report_bytes:
        report.close()
        raise CheckpointRefused(
            f"the report file {path} is shorter than the checkpoint says; it was changed"
        )
    report.truncate(resumed.report_bytes)
    report.seek(resumed.report_bytes)
    return report


def report_length(report: IO[bytes]) -> int:
    """Flush the report file to disk and say how long it is."""
    report.flush()
    os.fsync(report.fileno())
    return report.tell()
