"""The stores' errors become domain errors here, so nothing above the datasource sees them:
DynamoDB's (`storage_errors`: throttling, 5xx, timeouts, lost connections and a missing table
-> StorageUnavailable after the retries; anything else it refuses -> PaymentsError INTERNAL, a
bug of ours) and the Redis broker's (`broker_errors`: any of redis-py's, a socket's or a
timeout -> StorageUnavailable; callers go on without it). A failed condition is not handled
here: each conditional write reads its own answer from it. The datasource's own exceptions:

    FastParsingMissing(RuntimeError)  the client would parse answers with botocore's shape walker
    FieldNotRead(LookupError)         a projected payment's field its read left out (a bug)
    LeaseLost(Exception)              the stream reader's lease is another's now
    StreamMissing(RuntimeError)       the table has no stream
    SinkRefused(RuntimeError)         the live updates' sink cannot take a delivery now
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

__all__ = [
    "FastParsingMissing",
    "FieldNotRead",
    "LeaseLost",
    "SinkRefused",
    "StreamMissing",
    "broker_errors",
    "error_code",
    "storage_errors",
]


class FastParsingMissing(RuntimeError):
    """The client would parse DynamoDB's answers with botocore's shape walker."""


class FieldNotRead(LookupError):
    """A field of a payment read with a projection that left its attribute out: a reader
    asked for less than it uses (a bug, never a value made up)."""


class LeaseLost(Exception):
    """The lease this reader held is another's now (or expired): it must stop reading."""


class StreamMissing(RuntimeError):
    """The table has no stream: `create_table_if_missing` (or the template) turns it on."""


class SinkRefused(RuntimeError):
    """The sink could not take a delivery now (its broker is down): the records are read
    again, after a wait."""


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
