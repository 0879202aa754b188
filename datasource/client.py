"""The one low-level DynamoDB client, built from `DynamoConfig` with explicit pool and timeouts
(the SDK defaults: 10 connections, 60 s timeouts), the service's retries in place of botocore's
(`datasource.retries`), and the service's own parser of DynamoDB's data answers
(`datasource.aiobotocore_adapter`).

`open_streams_client` builds the DynamoDB Streams client (`datasource.streams`) from the same
config, with botocore's own parser: its answers are few and its records stay in DynamoDB JSON."""

from __future__ import annotations

import platform
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

import aioboto3
from aiobotocore.config import AioConfig

from datasource.aiobotocore_adapter import check_fast_parsing, fast_session
from datasource.config import DynamoConfig
from datasource.permissions import record_operations
from datasource.retries import RetryPolicy

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = ["open_client", "open_streams_client"]

# What DynamoDB's request logs (and CloudTrail) see as the caller.
USER_AGENT = (
    f"loc-payments/{version('loc-payments')} aiobotocore/{version('aiobotocore')} "
    f"botocore/{version('botocore')} Python/{platform.python_version()}"
)


@asynccontextmanager
async def open_client(config: DynamoConfig) -> AsyncIterator[DynamoDBClient]:
    session = aioboto3.Session(botocore_session=fast_session())
    async with session.client("dynamodb", **_client_arguments(config)) as client:
        check_fast_parsing(client)
        _prepare(client, config)
        yield client


@asynccontextmanager
async def open_streams_client(config: DynamoConfig) -> AsyncIterator[Any]:
    """A `dynamodbstreams` client on the endpoint, region and credentials of `open_client`, with
    its timeouts and retries. Untyped: the project has no stubs of DynamoDB Streams."""
    async with aioboto3.Session().client("dynamodbstreams", **_client_arguments(config)) as client:
        _prepare(client, config)
        yield client


def _prepare(client: Any, config: DynamoConfig) -> None:
    RetryPolicy(attempts=config.max_attempts).attach(client)
    if config.operation_log is not None:
        record_operations(client, log_directory=config.operation_log, table_name=config.table_name)


def _client_arguments(config: DynamoConfig) -> dict[str, Any]:
    client_config = AioConfig(
        # A fixed string, built once: botocore otherwise assembles and sanitizes a dozen
        # components for every call, a sixth of the client's CPU on a one-item read.
        user_agent=USER_AGENT,
        max_pool_connections=config.max_pool_connections,
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        # One attempt each as far as botocore is concerned: `datasource.retries` retries. The
        # mode says whether botocore's adaptive rate limiter paces the calls ("adaptive").
        retries={"mode": config.retry_mode, "total_max_attempts": 1},
    )
    credentials: dict[str, str | None] = {}
    if config.aws_access_key_id is not None:
        credentials = {
            "aws_access_key_id": config.aws_access_key_id,
            "aws_secret_access_key": config.aws_secret_access_key,
        }
    # A plain-HTTP endpoint (DynamoDB Local, moto) has no TLS to verify: without this the client
    # still loads the CA bundle, the dearest step of opening a client once botocore's data files
    # are shared. Any https endpoint, AWS's included, is verified as always.
    plain_http = config.endpoint_url is not None and config.endpoint_url.startswith("http://")
    return {
        "region_name": config.region,
        "endpoint_url": config.endpoint_url,
        "config": client_config,
        **({"verify": False} if plain_http else {}),
        **credentials,
    }
