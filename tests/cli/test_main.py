import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import jwt
import pytest

from cli.main import main
from cli.serve_command import command_as_invoked
from harness.processes import KEPT_SETTINGS
from process.settings import DEV_JWT_SECRET
from server.auth import SERVICE_SCOPE, WEBHOOKS_ADMIN_SCOPE

REPO = Path(__file__).resolve().parents[2]


def test_the_token_command_prints_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token", "--user", "u-7", "--service", "--ttl", "60"]) == 0

    claims = jwt.decode(capsys.readouterr().out.strip(), DEV_JWT_SECRET, algorithms=["HS256"])
    assert (claims["sub"], claims["scope"], claims["exp"] - claims["iat"]) == (
        "u-7",
        SERVICE_SCOPE,
        60,
    )


def test_the_token_command_prints_an_operators_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token", "--user", "ops", "--webhooks-admin"]) == 0

    claims = jwt.decode(capsys.readouterr().out.strip(), DEV_JWT_SECRET, algorithms=["HS256"])
    assert claims["scope"] == WEBHOOKS_ADMIN_SCOPE
    assert main(["token", "--user", "ops", "--service", "--webhooks-admin"]) == 0
    claims = jwt.decode(capsys.readouterr().out.strip(), DEV_JWT_SECRET, algorithms=["HS256"])
    assert claims["scope"] == f"{SERVICE_SCOPE} {WEBHOOKS_ADMIN_SCOPE}"


def test_the_token_command_refuses_a_real_secret(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOC_AUTH_JWT_SECRET", "a-real-secret-of-the-test-environment")

    assert main(["token", "--user", "u-1"]) == 1

    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("loc-payments: tokens are minted only with the development secret")
    assert "Traceback" not in err


def test_the_token_command_names_the_identity_provider_as_why_it_has_no_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOC_AUTH_JWKS_URL", "https://issuer.example/.well-known/jwks.json")

    assert main(["token", "--user", "u-1"]) == 1

    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("loc-payments: tokens come from the identity provider")
    assert "LOC_AUTH_JWKS_URL" in err


def test_invalid_settings_are_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOC_MAX_ATTEMPTS", "0")

    assert main(["token", "--user", "u-1"]) == 1

    err = capsys.readouterr().err
    assert err.startswith("loc-payments: invalid settings: LOC_MAX_ATTEMPTS:")
    assert err.count("\n") == 1


def test_serve_without_java_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("LOC_DATA_DIR", str(tmp_path / "data"))

    assert main(["serve"]) == 1

    err = capsys.readouterr().err
    assert err.startswith("loc-payments: Java 17+ is needed for the embedded DynamoDB")
    assert err.count("\n") == 1


def test_a_command_inside_the_working_directory_is_given_relative_to_it(tmp_path: Path) -> None:
    script = tmp_path / ".venv/bin/loc-payments"
    script.parent.mkdir(parents=True)
    script.touch()

    for argv0 in (str(script), ".venv/bin/loc-payments", "./.venv/bin/../bin/loc-payments"):
        assert command_as_invoked(argv0, python="/usr/bin/python3", cwd=tmp_path) == (
            ".venv/bin/loc-payments"
        )
    assert command_as_invoked("loc-payments", python="/usr/bin/python3", cwd=script.parent) == (
        "./loc-payments"
    )


def test_a_command_outside_the_working_directory_is_given_in_full(tmp_path: Path) -> None:
    script = tmp_path / "my venv/bin/loc-payments"
    script.parent.mkdir(parents=True)
    script.touch()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    assert command_as_invoked(str(script), python="/usr/bin/python3", cwd=elsewhere) == (
        f"'{script}'"
    )
    assert command_as_invoked("../my venv/bin/loc-payments", python="-", cwd=elsewhere) == (
        f"'{script}'"
    )


def test_python_dash_m_is_given_as_such(tmp_path: Path) -> None:
    main_module = str(REPO / "cli/__main__.py")
    python = tmp_path / ".venv/bin/python"

    assert command_as_invoked(main_module, python=str(python), cwd=tmp_path) == (
        ".venv/bin/python -m cli"
    )
    assert command_as_invoked(main_module, python="/usr/bin/python3", cwd=tmp_path) == (
        "/usr/bin/python3 -m cli"
    )
    assert command_as_invoked("-c", python="/usr/bin/python3", cwd=tmp_path) == "loc-payments"


def _serve(
    command: list[str], *, cwd: Path, environment: dict[str, str], stderr: int
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*command, "serve"],
        cwd=cwd,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


def _customer_token_line(command: list[str], *, cwd: Path, dynamodb: str) -> str:
    """The banner's last line, from a `serve` on moto (the banner prints once it listens)."""
    environment = {
        **{
            name: value
            for name, value in os.environ.items()
            if not name.startswith("LOC_") or name in KEPT_SETTINGS
        },
        "LOC_PORT": str(_free_port()),
        "LOC_DYNAMODB_ENDPOINT": dynamodb,
        "LOC_TABLE_NAME": f"banner-{uuid.uuid4().hex[:12]}",
    }
    server = _serve(command, cwd=cwd, environment=environment, stderr=subprocess.DEVNULL)
    try:
        assert server.stdout is not None
        for line in server.stdout:
            if line.startswith("A customer's token: "):
                return line.removeprefix("A customer's token: ").rstrip("\n")
        raise AssertionError("serve printed no customer token line")
    finally:
        server.kill()
        server.communicate()


@pytest.mark.slow
def test_the_banner_gives_the_token_command_as_it_can_be_pasted(moto_endpoint: str) -> None:
    venv = Path(sys.executable).parents[1]
    relative = f"{venv.name}/bin/loc-payments"

    assert _customer_token_line([relative], cwd=venv.parent, dynamodb=moto_endpoint) == (
        f"{relative} token --user <user id>"
    )
    python = Path(sys.executable)
    shown = python.relative_to(REPO) if python.is_relative_to(REPO) else python
    assert _customer_token_line(
        [sys.executable, "-m", "cli"], cwd=REPO, dynamodb=moto_endpoint
    ) == (f"{shown} -m cli token --user <user id>")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


@pytest.mark.ddblocal
def test_serve_answers_readyz_and_stops_dynamodb_on_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    environment = {
        **{
            name: value
            for name, value in os.environ.items()
            if not name.startswith("LOC_") or name in KEPT_SETTINGS
        },
        "LOC_PORT": str(port),
        "LOC_DATA_DIR": str(tmp_path / "data"),
    }
    server = _serve(
        [sys.executable, "-m", "cli"],
        cwd=REPO,
        environment=environment,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while _status(f"http://127.0.0.1:{port}/readyz") != 200:
            assert server.poll() is None, server.communicate()[0]
            assert time.monotonic() < deadline, "no 200 from /readyz"
            time.sleep(0.2)
        server.send_signal(signal.SIGTERM)
        output = server.communicate(timeout=30)[0]
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()

    assert server.returncode == 0, output
    endpoint = re.search(r"DynamoDB Local: http://127\.0\.0\.1:(\d+)", output)
    assert endpoint is not None, output
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(endpoint[1])), timeout=1).close()
    assert (tmp_path / "data/shared-local-instance.db").is_file()
    assert f"GraphiQL: http://127.0.0.1:{port}/graphql" in output
