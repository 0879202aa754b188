"""What a clone holds: nothing that the repository's own `.gitignore` says is generated or stray
(a Redis snapshot, a cache, an install folder), and a top level that reads at a glance."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


needs_git = pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs a git checkout"
)


def _committed(*arguments: str) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", *arguments], cwd=REPO, capture_output=True, text=True, check=True
    )
    return listed.stdout.split()


@needs_git
def test_no_committed_file_is_one_the_repository_ignores() -> None:
    assert _committed("--cached", "--ignored", "--exclude-standard") == []


@needs_git
def test_the_npm_tools_of_the_tests_sit_under_tools() -> None:
    """The top level shows the product. Of its npm folders only what `make run` needs stays there
    (DynamoDB Local, GraphiQL's files), and the bench's Node peer stays with the bench."""
    folders = {str(Path(path).parent) for path in _committed() if Path(path).name == "package.json"}
    assert {folder for folder in folders if not folder.startswith("tools/")} == {
        "dynamodb-local",
        "graphiql",
        "bench/peers/node",
    }
