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


FOLDERS = (
    "dynamodb-local",
    "graphiql",
    "tools/browser",
    "tools/http-audit",
    "tools/federation",
    "tools/trusted-documents",
    "tools/identity-provider",
)


def _checkout(root: Path) -> dict[str, Path]:
    """Copies of the npm folders' package files under `root`, by folder name."""
    packages = {Path(folder).name: root / Path(folder).name for folder in FOLDERS}
    for folder in FOLDERS:
        copy = packages[Path(folder).name]
        copy.mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(REPO / folder / name, copy / name)
    return packages


def _install(
    tmp_path: Path, venv: Path, packages: dict[str, Path], npm: str = FAKE_NPM
) -> subprocess.CompletedProcess[str]:
    """`make install` into `venv` and the folders `packages`, with stand-ins for the installers
    (their calls in tmp_path/calls) and the kept npm installs under tmp_path."""
    _executable(venv / "bin/python", "#!/bin/sh\n")
    _executable(venv / "bin/pip", FAKE_PIP)
    _executable(venv / "bin/uv", FAKE_UV)
    _executable(tmp_path / "bin/npm", npm)
    return _make(
        "install",
        f"VENV={venv}",
        f"NPM_INSTALLS={tmp_path / 'npm-installs'}",
        f"DDB_LOCAL={packages['dynamodb-local']}",
        f"GRAPHIQL_PKG={packages['graphiql']}",
        f"BROWSER_PKG={packages['browser']}",
        f"HTTP_AUDIT_PKG={packages['http-audit']}",
        f"FEDERATION_PKG={packages['federation']}",
        f"TRUSTED_DOCUMENTS_PKG={packages['trusted-documents']}",
        f"IDENTITY_PROVIDER_PKG={packages['identity-provider']}",
        environment={
            "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
            "CALLS": str(tmp_path / "calls"),
        },
    )


def test_a_cold_install_prints_one_line_per_installer(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    folders = FOLDERS
    packages = _checkout(tmp_path)
    calls = tmp_path / "calls"

    result = _install(tmp_path, venv, packages)

    assert [line.split()[:2] for line in calls.read_text().splitlines()] == [
        ["pip", "install"],
        ["uv", "sync"],
        *[["npm", "ci"]] * len(folders),
    ]
    # Each step says what it installs before it starts (a cold one takes tens of seconds), and
    # that it is done: one line a step, and nothing of the installers' own.
    assert (result.stdout + result.stderr).splitlines() == [
        f"Installing {what} ... done"
        for what in (
            f"the Python dependencies from uv.lock into {venv}",
            f"DynamoDB Local from {packages['dynamodb-local']}/package-lock.json",
            f"GraphiQL from {packages['graphiql']}/package-lock.json",
            f"Chromium from {packages['browser']}/package-lock.json",
            f"the GraphQL-over-HTTP audit from {packages['http-audit']}/package-lock.json",
            f"the federation gateway from {packages['federation']}/package-lock.json",
            "Apollo Client, graphql-ws, GraphQL Code Generator and relay-compiler from "
            f"{packages['trusted-documents']}/package-lock.json",
            f"the OpenID provider from {packages['identity-provider']}/package-lock.json",
        )
    ]


# npm ci as far as the Makefile sees it: a package and npm's record of a finished install.
FAKE_FINISHING_NPM = """#!/bin/sh
echo "npm $*" >> "$CALLS"
mkdir -p "$3/node_modules/package"
echo "installed from $3" > "$3/node_modules/package/index.js"
echo "{}" > "$3/node_modules/.package-lock.json"
"""


def test_a_fresh_clone_gets_the_npm_folders_its_locks_were_installed_for_without_npm(
    tmp_path: Path,
) -> None:
    """Issue 60: `make test` from a clean clone reinstalled every npm folder (a minute of CPU);
    an install is kept by its lock's hash, and a folder whose lock changed is installed again."""
    first = _checkout(tmp_path / "first")
    _install(tmp_path, tmp_path / "first" / "venv", first, FAKE_FINISHING_NPM)
    second = _checkout(tmp_path / "second")
    changed = second["federation"] / "package-lock.json"
    changed.write_text(changed.read_text().replace("{", '{"changed": true,', 1))
    calls = tmp_path / "calls"
    calls.write_text("")

    result = _install(tmp_path, tmp_path / "second" / "venv", second, FAKE_FINISHING_NPM)

    npm_calls = [line.split() for line in calls.read_text().splitlines() if line[:3] == "npm"]
    assert [call[:3] for call in npm_calls] == [["npm", "ci", "--prefix"]]
    assert npm_calls[0][3] == str(second["federation"])
    for name, folder in second.items():
        installed_from = first[name] if name != "federation" else folder
        assert (folder / "node_modules/package/index.js").read_text() == (
            f"installed from {installed_from}\n"
        ), name
        assert (folder / "node_modules/.installed").exists(), name
    assert f"Installing GraphiQL from {second['graphiql']}/package-lock.json ... done" in (
        result.stdout
    )
