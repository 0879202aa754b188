"""The stores' errors become domain errors here, so nothing above the datasource sees them.

DynamoDB (botocore), in `storage_errors`:

    throttling, 5xx, timeouts, lost connections  -> StorageUnavailable (after botocore's retries)
    the table does not exist (yet)               -> StorageUnavailable
    anything else DynamoDB refuses               -> PaymentsError (code INTERNAL): a bug of ours

The Redis broker (redis-py), in `broker_errors`:

    any RedisError, a socket's error, a timeout  -> StorageUnavailable: callers go on without it

A failed condition is not handled here: each conditional write reads its own answer from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError
from redis.exceptions import RedisError

from domain.errors import PaymentsError, StorageUnavailable

__all__ = ["broker_errors", "error_code", "storage_errors"]

# Error codes that mean "try again later", not "this request is wrong".
RETRYABLE_CODES = frozenset(
    {
        "InternalServerError",
        "LimitExceededException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "ServiceUnavailable",
        "ThrottlingException",
        "TransactionInProgressException",
    }
)


def error_code(error: ClientError) -> str:
    code: str = error.response.get("Error", {}).get("Code", "")
    return code


@contextmanager
def storage_errors() -> Iterator[None]:
    try:
        yield
    except ClientError as error:
        code = error_code(error)
        if code in RETRYABLE_CODES:
            raise StorageUnavailable() from error
        if code == "ResourceNotFoundException":
            raise StorageUnavailable("the payments table does not exist") from error
        raise PaymentsError(f"DynamoDB refused the request ({code})") from error
    except (BotoConnectionError, HTTPClientError) as error:
        raise StorageUnavailable() from error
    except BotoCoreError as error:
        raise PaymentsError(f"the DynamoDB client failed ({type(error).__name__})") from error


@contextmanager
def broker_errors(broker: str) -> Iterator[None]:
    """`broker` names it in the error (`the live updates' broker`). A timeout is the caller's
    (`asyncio.timeout`) or the client's: either way the broker did not answer in time."""
    try:
        yield
    except (RedisError, OSError, TimeoutError) as error:
        raise StorageUnavailable(f"{broker}: {type(error).__name__}") from error
