"""moto's TransactWriteItems made idempotent by its ClientRequestToken, as DynamoDB's is.

botocore gives every TransactWriteItems a ClientRequestToken and sends the same token when it
tries the call again (a read timeout, a dropped connection). DynamoDB, and DynamoDB Local, answer
the repeat of a transaction that went through with success and write nothing. moto ignores the
token and runs the transaction again, whose conditions then fail against its own first write: on
a loaded machine, where moto stalls past the client's read timeout, a move the SDK sent twice was
refused as another writer's ("changed by another writer (now SKIPPED)"), in tests that are not
about faults at all. `tests/datasource/test_transaction_tokens.py` holds both emulators to
DynamoDB's behaviour.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from moto.core.responses import ActionResult
from moto.dynamodb.exceptions import DynamodbException
from moto.dynamodb.responses import DynamoHandler

# DynamoDB remembers a token for ten minutes.
TOKEN_LIFETIME_SECONDS = 600.0

Handler = Callable[[DynamoHandler], ActionResult]


class IdempotentParameterMismatch(DynamodbException):
    """DynamoDB's answer to a token used again for a different transaction."""

    def __init__(self) -> None:
        super().__init__(
            "com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException",
            message="The request uses the same client token as a previous, but non-identical "
            "request.",
        )


@dataclass(frozen=True)
class _Done:
    request: str
    result: ActionResult
    at: float


def idempotent(
    transact_write_items: Handler, *, clock: Callable[[], float] = time.monotonic
) -> Handler:
    """`transact_write_items` answering a token it has carried out (within the token's lifetime)
    with that call's result, and writing nothing; a cancelled transaction wrote nothing, so its
    token may be tried again, as on DynamoDB."""
    done: dict[str, _Done] = {}
    # One transaction at a time: a repeat that arrives while the first is running waits for it.
    lock = threading.Lock()

    def handler(self: DynamoHandler) -> ActionResult:
        token = self.body.get("ClientRequestToken")
        if token is None:
            return transact_write_items(self)
        request = json.dumps(self.body["TransactItems"], sort_keys=True)
        with lock:
            now = clock()
            previous = done.get(token)
            if previous is not None and now - previous.at < TOKEN_LIFETIME_SECONDS:
                if previous.request != request:
                    raise IdempotentParameterMismatch()
                return previous.result
            result = transact_write_items(self)
            _forget_expired(done, now)
            done.pop(token, None)  # a token stored again goes last, so the oldest stay first
            done[token] = _Done(request, result, now)
            return result

    return handler


def _forget_expired(done: dict[str, _Done], now: float) -> None:
    """Drop the tokens past their lifetime: the oldest first, as they were stored."""
    while done:
        oldest = next(iter(done))
        if now - done[oldest].at < TOKEN_LIFETIME_SECONDS:
            return
        del done[oldest]


@contextmanager
def transactions_idempotent_by_token() -> Iterator[None]:
    """moto's DynamoDB, in this process (`ThreadedMotoServer`), honouring ClientRequestToken."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            DynamoHandler,
            "transact_write_items",
            idempotent(DynamoHandler.transact_write_items),
        )
        yield
