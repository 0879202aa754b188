import io
import signal
import uuid

import pytest

from server.bootstrap import dynamodb_endpoint, payment_store
from server.settings import Settings
from tests.backends import Backend


async def test_local_creates_a_missing_table_and_says_so_once(moto_backend: Backend) -> None:
    settings = Settings(
        table_name=f"test-{uuid.uuid4().hex}", dynamodb_endpoint=moto_backend.endpoint_url
    )

    async with payment_store(settings) as first:
        assert first.created_table
    async with payment_store(settings) as second:
        assert not second.created_table
        await second.store.ping()
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
