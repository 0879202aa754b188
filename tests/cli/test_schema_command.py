"""`loc-payments schema diff` and `schema accept` (`make schema`), and the rule applied to the
snapshot's whole history in git (SPEC §19)."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from graphql import build_schema as build_sdl

from cli.main import main
from cli.schema_command import (
    FORMER_MANIFESTS,
    MANIFESTS,
    RULE_FILE,
    SNAPSHOT,
    SUBGRAPH_SNAPSHOT,
    accept,
    committed_documents,
    history_refusals,
)
from schema.evolution import Document, refusals

REPO = Path(__file__).resolve().parents[2]
CURRENT = (REPO / SNAPSHOT).read_text()
PAYMENT = "type Payment implements Node {\n"


def in_payment(old: str, new: str) -> str:
    """The snapshot with `old` replaced by `new` in `type Payment` only; a field removed (`new`
    empty) goes with its description."""
    start = CURRENT.index(PAYMENT)
    end = CURRENT.index("\n}\n", start)
    block = CURRENT[start:end]
    assert old in block, old
    changed = without_field(block, old) if new == "" else block.replace(old, new, 1)
    return CURRENT[:start] + changed + CURRENT[end:]


def without_field(sdl: str, line: str) -> str:
    """`sdl` without the field `line` and the description printed above it."""
    described = re.compile(r'^  """(?:(?!""")[\s\S])*"""\n' + re.escape(line), re.MULTILINE)
    found, count = described.subn("", sdl, count=1)
    assert count == 1 or line in sdl, line
    return found if count else sdl.replace(line, "", 1)


LAST_FOUR = "  accountLastFour: String\n"


def diff(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, list[str]]:
    status = main(["schema", "diff", *arguments])
    return status, capsys.readouterr().out.splitlines()


def written(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_diff_prints_each_change_and_fails_on_a_breaking_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = written(tmp_path / "old.graphql", CURRENT)
    added = written(tmp_path / "added.graphql", CURRENT.replace(PAYMENT, PAYMENT + "  fee: Int\n"))
    removed = written(tmp_path / "removed.graphql", in_payment(LAST_FOUR, ""))

    assert diff(capsys, old, added) == (0, ["safe      FIELD_ADDED: Field Payment.fee was added."])
    status, lines = diff(capsys, old, removed)
    assert status == 1
    assert lines == ["breaking  FIELD_REMOVED: Field Payment.accountLastFour was removed."]
    assert diff(capsys, old, old) == (0, ["no changes"])


def test_diff_names_the_trusted_documents_a_change_breaks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    operation = (
        'query LoanStatuses { loan(loanId: "l") { payments { edges { node { status } } } } }'
    )
    manifest = written(tmp_path / "persisted-documents.json", json.dumps({"loan-v1": operation}))
    without_status = without_field(CURRENT, "  status: PaymentStatus!\n")
    assert "  status: PaymentStatus!\n" in CURRENT
    new = written(tmp_path / "new.graphql", without_status)

    status, lines = diff(capsys, "git:HEAD", new, "--documents", manifest)

    assert status == 1
    assert lines[-1].startswith(f"breaks    LoanStatuses (loan-v1, {manifest}): Cannot query field")


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["/nonexistent.graphql", SNAPSHOT], "/nonexistent.graphql: cannot be read"),
        (["git:no-such-revision", SNAPSHOT], "git:no-such-revision: no revision"),
        (["README.md", SNAPSHOT], "README.md: not a GraphQL schema in SDL"),
    ],
)
def test_bad_input_says_which_and_exits_2(
    arguments: list[str],
    said: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    status, lines = diff(capsys, *arguments)
    assert status == 2
    assert said in lines[0]


def test_a_manifest_that_does_not_parse_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    broken = written(tmp_path / "broken.json", "{not json")
    status, lines = diff(capsys, SNAPSHOT, SNAPSHOT, "--documents", broken)
    assert status == 2
    assert f"{broken}: is not JSON" in lines[0]


def git(repo: Path, *arguments: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *arguments],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository holding the snapshot and the manifests, as this one does."""
    repo = tmp_path / "repo"
    (repo / MANIFESTS).mkdir(parents=True)
    (repo / "schema").mkdir()
    (repo / RULE_FILE).write_text("# the rule\n")
    for manifest in (REPO / MANIFESTS).glob("*.json"):
        shutil.copy(manifest, repo / MANIFESTS / manifest.name)
    (repo / SNAPSHOT).write_text(CURRENT)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "the rule and the snapshot")
    return repo


def commit_snapshot(repo: Path, text: str) -> None:
    (repo / SNAPSHOT).write_text(text)
    git(repo, "commit", "-q", "-am", "a change of the snapshot")


@pytest.mark.parametrize(
    ("committed", "refused"),
    [
        (PAYMENT + "  legacyNote: String\n", "Payment.legacyNote was not @deprecated first"),
        # `amountCents` of a payment is what every committed front end reads.
        (
            PAYMENT + '  amountDollars: Int @deprecated(reason: "Use amountCents.")\n',
            None,
        ),
    ],
)
def test_accept_refuses_an_undeprecated_removal_and_takes_a_deprecated_unused_one(
    project: Path, committed: str, refused: str | None
) -> None:
    # The committed snapshot holds a field the code no longer has: accepting removes it.
    commit_snapshot(project, CURRENT.replace(PAYMENT, committed))
    out = io.StringIO()

    status = accept(project, out)

    if refused is None:
        assert status == 0, out.getvalue()
        assert (project / SNAPSHOT).read_text() == CURRENT
        assert "FIELD_REMOVED: Field Payment.amountDollars was removed." in out.getvalue()
        # It says what it wrote (make schema runs it).
        assert out.getvalue().splitlines()[-2:] == [
            f"wrote     {SNAPSHOT}",
            f"wrote     {SUBGRAPH_SNAPSHOT}",
        ]
    else:
        assert status == 1
        assert refused in out.getvalue()
        assert "nothing written" in out.getvalue()
        assert (project / SNAPSHOT).read_text() == CURRENT.replace(PAYMENT, committed)


def test_accept_refuses_a_deprecated_field_a_committed_document_still_uses(
    project: Path,
) -> None:
    """`Payment.status` is in every committed front end's operations: deprecating it in the
    committed snapshot is not enough to remove it."""
    deprecated = CURRENT.replace(
        "  status: PaymentStatus!\n",
        '  status: PaymentStatus! @deprecated(reason: "Use state.")\n',
        1,
    )
    commit_snapshot(project, deprecated)
    # The code as it would be without the field: the rule compares snapshots, not the code.
    documents = committed_documents(project, "HEAD")
    found = refusals(
        build_sdl(deprecated),
        build_sdl(without_field(CURRENT, "  status: PaymentStatus!\n")),
        documents,
    )

    assert documents and all(isinstance(document, Document) for document in documents)
    assert found and "Payment.status is still used by" in found[0].why


def test_the_history_check_catches_a_snapshot_rewritten_by_hand(project: Path) -> None:
    commit_snapshot(project, in_payment(LAST_FOUR, ""))

    [(commit, refusal)] = history_refusals(project)

    assert len(commit) == 40
    assert refusal.why == "Payment.accountLastFour was not @deprecated first"


def test_no_commit_of_this_repository_made_a_refused_breaking_change() -> None:
    refused = history_refusals(REPO)
    assert refused == [], "\n".join(f"{commit[:12]}: {refusal}" for commit, refusal in refused)


def test_a_commit_from_before_the_manifests_moved_is_read_where_it_kept_them(
    project: Path,
) -> None:
    (project / FORMER_MANIFESTS).parent.mkdir(parents=True)
    git(project, "mv", MANIFESTS, FORMER_MANIFESTS)
    git(project, "commit", "-q", "-m", "the manifests where commits before issue 60 kept them")

    before = committed_documents(project, "HEAD")

    assert {(d.id, d.text) for d in before} == {
        (d.id, d.text) for d in committed_documents(project, "HEAD^")
    }
    assert before and all(d.source.startswith(f"{FORMER_MANIFESTS}/") for d in before)
