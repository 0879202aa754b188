"""Throttling: DynamoDB answering half of the data calls as throttles, on a real server process
on DynamoDB Local, through the API. The storm is absorbed: reads served, writes done the first
time, no 5xx, no throttle answered as anything but UNAVAILABLE, every write stored once, the
breaker left closed, and normal answers as soon as the storm ends."""

from __future__ import annotations

import asyncio

import aioboto3
import pytest
from aiobotocore.config import AioConfig
from botocore.exceptions import ClientError

from datasource import DynamoConfig
from harness.proxy import THROTTLED_OPERATIONS, proxy_to
from harness.storm import storm
from tests.api.conftest import SERVICE
from tests.servers import serving

# The service's own DynamoDB budget (`LOC_DYNAMODB_BUDGET`'s default), which these storms outlast.
BUDGET = "3"

pytestmark = pytest.mark.ddblocal

# The bounds: reads served, writes done at the first try, during a 50% storm.
READS_SERVED = 0.99
WRITES_FIRST_TIME = 0.95


async def test_a_storm_of_throttles_is_absorbed(ddblocal_config: DynamoConfig) -> None:
    assert ddblocal_config.endpoint_url is not None
    async with (
        proxy_to(ddblocal_config.endpoint_url) as proxy,
        serving(proxy.url, ddblocal_config.table_name, metrics="app", dynamodb_budget=BUDGET) as [
            server
        ],
    ):
        figures = await storm(
            server.url, proxy, token=SERVICE, seconds=6.0, metrics_url=f"{server.url}/metrics"
        )
    print(f"\n{figures}")
    # The storm was one: half the data calls throttled, transactions among them.
    assert figures.throttled > 0.4 * figures.data_calls > 0
    assert proxy.throttled["TransactWriteItems"] > 0 and proxy.throttled["GetItem"] > 0
    assert figures.reads_served >= READS_SERVED * figures.reads
    assert figures.writes_first_time >= WRITES_FIRST_TIME * figures.writes
    assert (figures.server_errors, figures.wrong_answers, figures.stored_wrong) == (0, 0, 0)
    assert figures.breaker_opens == 0
    # Every throttle the service met is counted (some were met by the probe after the storm).
    assert figures.throttles_counted == sum(proxy.throttled.values())
    # Normal answers as soon as the storm ends: the first round after it is answered at the
    # first try (how long that takes is `make bench`'s: bench.storm).
    assert figures.recovery_rounds == 1


async def test_a_storm_that_lets_no_write_through_ends_at_its_time(
    ddblocal_config: DynamoConfig,
) -> None:
    """Each client sends a write answered UNAVAILABLE again until it is done: a storm kept going
    while one was left (in `make bench`'s smoke test a 2 s storm in botocore's adaptive mode, which
    let almost nothing through, lasted three minutes). It ends at its time; only what was sent
    during it counts."""
    assert ddblocal_config.endpoint_url is not None
    async with (
        proxy_to(ddblocal_config.endpoint_url) as proxy,
        serving(proxy.url, ddblocal_config.table_name, dynamodb_budget=BUDGET) as [server],
    ):
        figures = await asyncio.wait_for(
            storm(server.url, proxy, token=SERVICE, fraction=1.0, seconds=5.0, clients=2), 60
        )
    # One creation a client, refused (the service's budget, 3 s, ends within the storm); sent
    # again once the storm was over, and stored once.
    assert (figures.writes, figures.writes_first_time, figures.reads) == (2, 0, 0)
    assert figures.throttled == figures.data_calls > 0
    assert (figures.server_errors, figures.wrong_answers, figures.stored_wrong) == (0, 0, 0)


async def test_the_proxy_throttles_as_dynamodb_does(ddblocal_config: DynamoConfig) -> None:
    """What the service is tested against: each form of DynamoDB's throttle, as botocore reads
    it (not the service: the raw client, no retries)."""
    assert ddblocal_config.endpoint_url is not None
    async with proxy_to(ddblocal_config.endpoint_url) as proxy:
        proxy.throttle(1.0)
        session = aioboto3.Session()
        async with session.client(
            "dynamodb",
            endpoint_url=proxy.url,
            region_name=ddblocal_config.region,
            aws_access_key_id="testkey",
            aws_secret_access_key="testkey",
            config=AioConfig(retries={"mode": "standard", "total_max_attempts": 1}),
        ) as client:
            key = {"PK": {"S": "USER#nobody"}, "SK": {"S": "PAYMENT#x"}}
            with pytest.raises(ClientError) as read:
                await client.get_item(TableName=ddblocal_config.table_name, Key=key)
            put = {"Put": {"TableName": ddblocal_config.table_name, "Item": key}}
            with pytest.raises(ClientError) as transaction:
                await client.transact_write_items(TransactItems=[put, put, put])
            # The control plane is never throttled.
            await client.describe_table(TableName=ddblocal_config.table_name)
    assert read.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert read.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    cancelled = transaction.value.response
    assert cancelled["Error"]["Code"] == "TransactionCanceledException"
    codes = [reason["Code"] for reason in cancelled["CancellationReasons"]]
    assert sorted(codes) == ["None", "None", "ThrottlingError"]
    assert proxy.throttled == {"GetItem": 1, "TransactWriteItems": 1}
    assert "DescribeTable" not in THROTTLED_OPERATIONS
