import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import jwt
import pytest
from pydantic import SecretStr

from server.cli import SERVICE_SCOPE, TokenRefused, main, mint_development_token
from server.settings import DEV_JWT_SECRET, Settings

REPO = Path(__file__).resolve().parents[2]


def test_a_customer_token_round_trips() -> None:
    token = mint_development_token(Settings(), user_id="u-1", ttl_seconds=600, now=1_000_000)

    claims = jwt.decode(token, DEV_JWT_SECRET, algorithms=["HS256"], options={"verify_exp": False})

    assert claims == {"sub": "u-1", "iat": 1_000_000, "exp": 1_000_600}


def test_a_service_token_carries_the_service_scope() -> None:
    token = mint_development_token(Settings(), user_id="autopay", service=True)

    claims = jwt.decode(token, DEV_JWT_SECRET, algorithms=["HS256"])

    assert claims["scope"] == SERVICE_SCOPE
    assert claims["exp"] > time.time()


def test_a_token_carries_the_configured_issuer_and_audience() -> None:
    settings = Settings(auth_jwt_issuer="https://issuer.local", auth_jwt_audience="payments")

    token = mint_development_token(settings, user_id="u-1")

    claims = jwt.decode(
        token,
        DEV_JWT_SECRET,
        algorithms=["HS256"],
        issuer="https://issuer.local",
        audience="payments",
    )
    assert claims["sub"] == "u-1"


def test_tokens_are_refused_for_any_other_secret() -> None:
    with pytest.raises(TokenRefused, match="development secret"):
        mint_development_token(Settings(auth_jwt_secret=SecretStr("x" * 40)), user_id="u-1")


def test_the_token_command_prints_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token", "--user", "u-7", "--service", "--ttl", "60"]) == 0

    claims = jwt.decode(capsys.readouterr().out.strip(), DEV_JWT_SECRET, algorithms=["HS256"])
    assert (claims["sub"], claims["scope"], claims["exp"] - claims["iat"]) == (
        "u-7",
        SERVICE_SCOPE,
        60,
    )


def test_the_token_command_refuses_a_real_secret(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOC_AUTH_JWT_SECRET", "a-real-secret-of-the-test-environment")

    assert main(["token", "--user", "u-1"]) == 1

    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("loc-payments: tokens are minted only with the development secret")
    assert "Traceback" not in err


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
        **{name: value for name, value in os.environ.items() if not name.startswith("LOC_")},
        "LOC_PORT": str(port),
        "LOC_DATA_DIR": str(tmp_path / "data"),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "server", "serve"],
        cwd=REPO,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
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
