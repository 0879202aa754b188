"""The store's connection, and botocore's errors turned into domain errors."""

import socket

import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)

from datasource import DynamoConfig, PaymentStore, count_calls, open_store
from datasource.errors import storage_errors
from domain.errors import PaymentsError, StorageUnavailable
from tests.backends import CURSOR_SECRET, Backend
from tests.payment_samples import ref_of, sample_payment, stored_new


async def test_open_store_builds_a_working_store(moto_config: DynamoConfig) -> None:
    async with open_store(moto_config, cursor_secret=CURSOR_SECRET) as store:
        config = store.client.meta.config
        assert config.max_pool_connections == moto_config.max_pool_connections
        assert (config.connect_timeout, config.read_timeout) == (2.0, 5.0)
        # botocore makes one attempt; the service's handler (`datasource.retries`) retries.
        assert config.retries == {"mode": "standard", "total_max_attempts": 1}
        payment = sample_payment()
        with count_calls() as count:
            await store.ping()
            await stored_new(store, payment)
            assert await store.get(ref_of(payment)) == payment
        assert count.operations == {"DescribeTable": 1, "TransactWriteItems": 1, "GetItem": 1}


async def test_a_missing_table_is_unavailable(backend: Backend) -> None:
    store = PaymentStore(backend.client, table_name="no-such-table", cursor_secret=b"s")
    with pytest.raises(StorageUnavailable):
        await store.ping()
    with pytest.raises(StorageUnavailable):
        await store.get(ref_of(sample_payment()))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_an_unreachable_endpoint_is_unavailable_and_a_retried_call_counts_once(
    moto_config: DynamoConfig,
) -> None:
    config = DynamoConfig(
        table_name="payments",
        region="us-west-2",
        endpoint_url=f"http://127.0.0.1:{_closed_port()}",
        connect_timeout=0.5,
        max_attempts=2,  # the first attempt and one retry
        aws_access_key_id="testkey",
        aws_secret_access_key="testkey",
    )
    sends: list[str] = []
    async with open_store(config, cursor_secret=CURSOR_SECRET) as store:
        store.client.meta.events.register(
            "before-send.dynamodb", lambda **event: sends.append("send")
        )
        with count_calls() as count, pytest.raises(StorageUnavailable) as failure:
            await store.get(ref_of(sample_payment()))
    assert isinstance(failure.value.__cause__, EndpointConnectionError)
    assert len(sends) == 2
    assert count.operations == {"GetItem": 1}


def _client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "no"}}, "GetItem")


@pytest.mark.parametrize(
    "error",
    [
        _client_error("ProvisionedThroughputExceededException"),
        _client_error("ThrottlingException"),
        _client_error("RequestLimitExceeded"),
        _client_error("InternalServerError"),
        _client_error("ServiceUnavailable"),
        _client_error("ResourceNotFoundException"),
        EndpointConnectionError(endpoint_url="http://127.0.0.1:1"),
        ReadTimeoutError(endpoint_url="http://127.0.0.1:1"),
    ],
    ids=lambda error: type(error).__name__ + str(getattr(error, "response", "")),
)
def test_throttling_and_lost_connections_become_unavailable(error: Exception) -> None:
    with pytest.raises(StorageUnavailable) as translated, storage_errors():
        raise error
    assert translated.value.__cause__ is error


@pytest.mark.parametrize(
    "error", [_client_error("ValidationException"), NoCredentialsError()], ids=repr
)
def test_other_client_errors_become_internal_errors(error: Exception) -> None:
    with pytest.raises(PaymentsError) as translated, storage_errors():
        raise error
    assert type(translated.value) is PaymentsError
    assert translated.value.code == "INTERNAL"
    assert translated.value.__cause__ is error


def test_other_exceptions_pass_through() -> None:
    with pytest.raises(KeyError), storage_errors():
        raise KeyError("ours")
