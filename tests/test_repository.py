"""What a clone holds: nothing that the repository's own `.gitignore` says is generated or stray
(a Redis snapshot, a cache, an install folder)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs a git checkout"
)
def test_no_committed_file_is_one_the_repository_ignores() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--ignored", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout.split() == []
