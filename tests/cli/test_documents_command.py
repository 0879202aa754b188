"""`loc-payments documents check FILE…` and `serve` with manifests: what a front-end's CI and
an operator see (SPEC §14)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cli.main import main

LOAN = 'query Loan { loan(loanId: "loan-1") { loanId } }'
INVALID = "query Nope { nope }"


def manifest(path: Path, documents: dict[str, str]) -> Path:
    path.write_text(json.dumps(documents))
    return path


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_check_prints_a_line_per_document_and_exits_0_when_all_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = manifest(
        tmp_path / "persisted-documents.json", {sha256(LOAN): LOAN, "typename": "{ __typename }"}
    )

    assert main(["documents", "check", str(good)]) == 0

    assert capsys.readouterr().out.splitlines() == [
        f"ok   {good}: {sha256(LOAN)}",
        f"ok   {good}: typename",
    ]


def test_check_names_every_problem_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = manifest(tmp_path / "good.json", {"loan": LOAN})
    bad = manifest(tmp_path / "bad.json", {"nope": INVALID, sha256(INVALID): LOAN})
    broken = tmp_path / "broken.json"
    broken.write_text("{")

    assert main(["documents", "check", str(good), str(bad), str(broken)]) == 1

    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"ok   {good}: loan"
    assert lines[1].startswith(f"FAIL {bad}: nope: Cannot query field 'nope' on type 'Query'.")
    assert lines[2].startswith(f"FAIL {bad}: {sha256(INVALID)}: the id is not the sha256")
    assert lines[3].startswith(f"FAIL {broken}: is not JSON")
    assert len(lines) == 4


def test_serve_with_a_bad_manifest_stops_with_its_name_and_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = manifest(tmp_path / "bad.json", {"nope": INVALID})
    monkeypatch.setenv("LOC_TRUSTED_DOCUMENTS", str(bad))
    # An endpoint of its own, so that no DynamoDB Local starts: the manifest stops it first.
    monkeypatch.setenv("LOC_DYNAMODB_ENDPOINT", "http://127.0.0.1:9")

    assert main(["serve"]) == 1

    err = capsys.readouterr().err
    assert err.startswith("loc-payments: trusted documents refused (LOC_TRUSTED_DOCUMENTS):")
    assert f"{bad}: nope: Cannot query field 'nope' on type 'Query'." in err
