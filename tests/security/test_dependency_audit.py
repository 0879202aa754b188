"""pip-audit of every package `uv.lock` pins, runtime and development groups alike.

The audit needs PyPI's vulnerability feed (its per-release JSON API). Without an answer for
every package the test skips and says why; it fails only on a known vulnerability. pip-audit
itself reports "No known vulnerabilities found" even when it could audit nothing (each package it
could not look up is merely "skipped"), so the report is read package by package.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[2]
BIN = Path(sys.executable).parent  # uv and pip-audit are dev dependencies, beside this Python
AUDIT_TIMEOUT_SECONDS = 30


@pytest.mark.slow  # asks PyPI about every locked package
def test_no_locked_dependency_has_a_known_vulnerability(tmp_path: Path) -> None:
    requirements = export_lock(tmp_path / "requirements.txt")
    report = run_pip_audit(requirements, tmp_path / "audit.json")

    vulnerable, unaudited = read_report(report)

    assert not vulnerable, "known vulnerabilities in locked dependencies:\n" + "\n".join(vulnerable)
    if unaudited:
        pytest.skip(
            f"not audited: no vulnerability data for {len(unaudited)} of "
            f"{len(report['dependencies'])} locked packages (PyPI's per-release JSON API, "
            f"/pypi/<name>/<version>/json, did not answer), e.g. {unaudited[0]}"
        )


def export_lock(path: Path) -> Path:
    """The lock as pinned, hashed requirements: every group, not the project itself."""
    subprocess.run(
        [
            BIN / "uv",
            "export",
            "--frozen",
            "--all-groups",
            "--no-emit-project",
            "--format=requirements-txt",
            "--quiet",
            f"--output-file={path}",
        ],
        cwd=ROOT,
        check=True,
        timeout=30,
    )
    return path


def run_pip_audit(requirements: Path, output: Path) -> dict[str, Any]:
    """pip-audit's JSON report; skips when pip-audit produced none (no network, no service)."""
    command: list[str | Path] = [
        BIN / "pip-audit",
        f"--requirement={requirements}",
        "--require-hashes",  # every pin is exact: nothing is resolved, nothing installed
        "--disable-pip",
        "--vulnerability-service=pypi",
        "--timeout=5",
        "--progress-spinner=off",
        "--format=json",
        f"--output={output}",
    ]
    try:
        run = subprocess.run(
            command, capture_output=True, text=True, timeout=AUDIT_TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"not audited: pip-audit took over {AUDIT_TIMEOUT_SECONDS} s (network?)")
    if not output.exists() or not output.read_text().strip():
        last_lines = " | ".join(run.stderr.strip().splitlines()[-3:])
        pytest.skip(f"not audited: pip-audit exited {run.returncode}: {last_lines}")
    report: dict[str, Any] = json.loads(output.read_text())
    return report


def read_report(report: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(one line per known vulnerability, one line per package that was not audited)."""
    vulnerable, unaudited = [], []
    for package in report["dependencies"]:
        if "skip_reason" in package:
            unaudited.append(f"{package['name']}: {package['skip_reason']}")
            continue
        for vulnerability in package["vulns"]:
            ids = ", ".join([vulnerability["id"], *vulnerability.get("aliases", [])])
            fixed = ", ".join(vulnerability["fix_versions"]) or "no fixed release"
            vulnerable.append(f"{package['name']} {package['version']}: {ids} (fixed in {fixed})")
    return vulnerable, unaudited


def test_the_report_names_package_version_ids_and_fixed_versions() -> None:
    report = {
        "dependencies": [
            {"name": "starlette", "version": "1.10.0", "vulns": []},
            {
                "name": "h11",
                "version": "0.14.0",
                "vulns": [
                    {
                        "id": "GHSA-vqfr-h8mv-ghfj",
                        "aliases": ["CVE-2025-43859"],
                        "fix_versions": ["0.16.0"],
                    }
                ],
            },
            {"name": "boto3", "skip_reason": "Dependency not found on PyPI"},
        ]
    }

    assert read_report(report) == (
        ["h11 0.14.0: GHSA-vqfr-h8mv-ghfj, CVE-2025-43859 (fixed in 0.16.0)"],
        ["boto3: Dependency not found on PyPI"],
    )
