"""A transaction botocore sends again, with the ClientRequestToken it gave the first try, is
applied once: on DynamoDB Local as on DynamoDB, and on moto as `tests/moto_idempotency.py`
makes it."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from botocore.awsrequest import AWSPreparedRequest
from botocore.exceptions import ClientError, ReadTimeoutError

from datasource import PaymentStore, count_calls
from datasource.history import event_item
from datasource.items import to_item
from domain.enums import PaymentMethod, PaymentStatus
from domain.history import event_of
from domain.transitions import RULES, apply_transition
from tests.datasource.stored_items import raw_claim, raw_event, raw_item
from tests.payment_samples import (
    LATER,
    TEST_ACTOR,
    payment_in,
    request_for,
    stored_move,
    stored_new,
)

S = PaymentStatus
PRESENTMENT = next(rule for rule in RULES if (rule.source, rule.target) == (S.PENDING, S.ACHSENT))
SEND_TRANSACTION = "before-send.dynamodb.TransactWriteItems"


def _lose_the_first_answer(sent: list[str]) -> Callable[..., Awaitable[None]]:
    """A `before-send` hook: the first try reaches DynamoDB, and its answer never comes back
    (botocore's read timeout, which it retries); later tries go as usual."""

    async def send(request: AWSPreparedRequest, **_: Any) -> None:
        body = request.body if isinstance(request.body, bytes) else str(request.body).encode()
        sent.append(body.decode())
        if len(sent) == 1:
            async with httpx.AsyncClient() as http:
                answer = await http.post(request.url, content=body, headers=dict(request.headers))
            assert answer.status_code == 200, answer.text
            raise ReadTimeoutError(endpoint_url=request.url)

    return send


async def test_a_move_whose_answer_was_lost_is_applied_once(store: PaymentStore) -> None:
    current = await stored_new(store, payment_in(S.PENDING, PaymentMethod.ACH))
    updated = apply_transition(current, request_for(PRESENTMENT), max_attempts=3, now=LATER)
    sent: list[str] = []
    events = store.client.meta.events
    events.register(SEND_TRANSACTION, _lose_the_first_answer(sent), unique_id="lose-answer")
    try:
        with count_calls() as count:
            written = await stored_move(store, current, updated)
    finally:
        events.unregister(SEND_TRANSACTION, unique_id="lose-answer")

    # Sent twice, the same request with the same token; the store saw one call and a success.
    assert len(sent) == 2
    assert sent[0] == sent[1]
    assert '"ClientRequestToken"' in sent[0]
    assert count.operations == {"TransactWriteItems": 1}
    assert written == updated
    # One presentment: the version counts one move, one event, the confirmation id claimed.
    assert await raw_item(store, current) == to_item(updated)
    assert await raw_event(store, updated) == event_item(event_of(current, updated, TEST_ACTOR))
    assert await raw_claim(store, "alice", updated.confirmation_id) is not None


def _put(table_name: str, key: str) -> list[Any]:
    """A transaction creating one item, refused if it exists."""
    return [
        {
            "Put": {
                "TableName": table_name,
                "Item": {"PK": {"S": key}, "SK": {"S": "token-test"}},
                "ConditionExpression": "attribute_not_exists(PK)",
            }
        }
    ]


async def _outcome(store: PaymentStore, items: list[Any], token: str) -> str:
    try:
        await store.client.transact_write_items(TransactItems=items, ClientRequestToken=token)
    except ClientError as error:
        return str(error.response["Error"]["Code"])
    return "done"


async def test_a_token_answers_its_transaction_once_and_refuses_another(
    store: PaymentStore,
) -> None:
    token = str(uuid.uuid4())
    assert await _outcome(store, _put(store.table_name, "a"), token) == "done"
    # The repeat writes nothing (its condition would fail if it ran) and answers success.
    assert await _outcome(store, _put(store.table_name, "a"), token) == "done"
    # The token of a transaction that went through cannot carry a different one.
    mismatch = await _outcome(store, _put(store.table_name, "b"), token)
    assert mismatch == "IdempotentParameterMismatchException"
    assert await _outcome(store, _put(store.table_name, "b"), str(uuid.uuid4())) == "done"


async def test_a_cancelled_transaction_may_be_tried_again_with_its_token(
    store: PaymentStore,
) -> None:
    key = "c"
    assert await _outcome(store, _put(store.table_name, key), str(uuid.uuid4())) == "done"
    token = str(uuid.uuid4())
    refused = await _outcome(store, _put(store.table_name, key), token)
    assert refused == "TransactionCanceledException"
    # A cancelled transaction wrote nothing: once its condition holds, the same token runs it.
    await store.client.delete_item(
        TableName=store.table_name, Key={"PK": {"S": key}, "SK": {"S": "token-test"}}
    )
    assert await _outcome(store, _put(store.table_name, key), token) == "done"
