import io
import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from datasource import acting_as
from process import embedded_dynamodb
from process.bootstrap import dynamodb_endpoint, payment_store
from process.settings import Settings
from tests.backends import Backend
from tests.servers import java_children


async def test_local_creates_a_missing_table_and_says_so_once(moto_backend: Backend) -> None:
    settings = Settings(
        table_name=f"test-{uuid.uuid4().hex}", dynamodb_endpoint=moto_backend.endpoint_url
    )

    async with payment_store(settings) as first:
        assert first.created_table
    async with payment_store(settings) as second:
        assert not second.created_table
        await second.store.ping()
        # The test's cleaning, not the service's call (the least-privilege check's record).
        with acting_as("test-cleanup"):
            await second.store.client.delete_table(TableName=settings.table_name)


def test_sigterm_unwinds_the_block_with_the_status_given() -> None:
    settings = Settings(dynamodb_endpoint="http://127.0.0.1:9")
    before = signal.getsignal(signal.SIGTERM)

    with (
        pytest.raises(SystemExit) as stopped,
        dynamodb_endpoint(
            settings, announce_to=io.StringIO(), exit_status_on_sigterm=143
        ) as endpoint,
    ):
        assert endpoint == "http://127.0.0.1:9"
        signal.raise_signal(signal.SIGTERM)

    assert stopped.value.code == 143
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.ddblocal
def test_when_supervision_gives_up_the_command_stops_with_status_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(data_dir=tmp_path / "data", dynamodb_local_restart_backoff=0.01)
    broken_jar = tmp_path / "DynamoDBLocal.jar"
    broken_jar.write_text("not a jar")

    # The tests' own DynamoDB Local may be a child of this process too: not that one.
    others = java_children(os.getpid())
    with (
        pytest.raises(SystemExit) as stopped,
        dynamodb_endpoint(
            settings, announce_to=io.StringIO(), exit_status_on_sigterm=0, supervise=True
        ) as endpoint,
    ):
        assert endpoint is not None
        [started] = java_children(os.getpid()) - others
        # From now on every restart fails at once; then kill the running one.
        monkeypatch.setattr(embedded_dynamodb, "find_jar", lambda: broken_jar)
        os.kill(started, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the SIGTERM of the give-up lands in here
            time.sleep(0.05)

    assert stopped.value.code == 1
    assert "not restarting it" in capsys.readouterr().err
