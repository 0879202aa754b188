"""The fast parser against botocore's: the same request, the same answer, for every operation
the store makes, on moto and on DynamoDB Local. An aiobotocore upgrade that changes either
shows here."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aioboto3
import pytest
from aiobotocore.session import AioSession
from botocore.exceptions import ClientError
from botocore.parsers import JSONParser

import datasource.client
from datasource import PaymentStore
from datasource.client import open_client
from datasource.errors import FastParsingMissing
from datasource.items import Item, to_item
from domain.payment import LoanRef
from tests.backends import REGION, TEST_KEY, Backend, backend_config
from tests.payment_samples import ref_of, sample_payment

Call = Callable[[Any], Awaitable[dict[str, Any]]]


@pytest.fixture
async def botocore_client(backend: Backend) -> AsyncIterator[Any]:
    """A client as the SDK makes it by default: botocore's parser, shape walker and all."""
    async with aioboto3.Session().client(
        "dynamodb",
        region_name=REGION,
        endpoint_url=backend.endpoint_url,
        aws_access_key_id=TEST_KEY,
        aws_secret_access_key=TEST_KEY,
    ) as client:
        yield client


def _answer(response: dict[str, Any]) -> dict[str, Any]:
    # The metadata holds the request id and the Date header, which differ between two calls.
    return {name: value for name, value in response.items() if name != "ResponseMetadata"}


async def _same_answer(store: PaymentStore, botocore_client: Any, call: Call) -> dict[str, Any]:
    # Once before, so that a write's two compared calls find the same item and cost the same.
    await call(botocore_client)
    fast = _answer(await call(store.client))
    reference = _answer(await call(botocore_client))
    assert fast == reference
    return fast


async def _same_refusal(store: PaymentStore, botocore_client: Any, call: Call) -> dict[str, Any]:
    refusals = []
    for client in (store.client, botocore_client):
        with pytest.raises(ClientError) as refused:
            await call(client)
        refusals.append(_answer(refused.value.response))
    assert refusals[0] == refusals[1]
    return refusals[0]


@pytest.fixture
async def stored(store: PaymentStore) -> list[Item]:
    items = [to_item(sample_payment(loan_id="loan-1")) for _ in range(3)]
    for item in items:
        await store.client.put_item(TableName=store.table_name, Item=item)
    return items


CAPACITY = {"ReturnConsumedCapacity": "INDEXES"}


def primary_key_of(item: Item) -> Item:
    return {"PK": item["PK"], "SK": item["SK"]}


async def test_get_item(store: PaymentStore, botocore_client: Any, stored: list[Item]) -> None:
    key = primary_key_of(stored[0])

    answer = await _same_answer(
        store,
        botocore_client,
        lambda client: client.get_item(
            TableName=store.table_name, Key=key, ConsistentRead=True, **CAPACITY
        ),
    )

    assert answer["Item"] == stored[0]


async def test_batch_get_item(
    store: PaymentStore, botocore_client: Any, stored: list[Item]
) -> None:
    keys = [primary_key_of(item) for item in stored]
    missing = {"PK": {"S": "USER#nobody"}, "SK": {"S": "LOAN#l#PAYMENT#p"}}

    async def call(client: Any) -> dict[str, Any]:
        response: dict[str, Any] = await client.batch_get_item(
            RequestItems={store.table_name: {"Keys": [*keys, missing], "ConsistentRead": True}},
            **CAPACITY,
        )
        # Items come back in no particular order.
        response["Responses"][store.table_name].sort(key=lambda item: item["SK"]["S"])
        return response

    answer = await _same_answer(store, botocore_client, call)

    assert answer["Responses"][store.table_name] == sorted(stored, key=lambda i: i["SK"]["S"])
    assert answer["UnprocessedKeys"] == {}


async def test_query_with_a_last_evaluated_key(
    store: PaymentStore, botocore_client: Any, stored: list[Item]
) -> None:
    answer = await _same_answer(
        store,
        botocore_client,
        lambda client: client.query(
            TableName=store.table_name,
            KeyConditionExpression="PK = :pk AND begins_with(SK, :prefix)",
            ExpressionAttributeValues={
                ":pk": {"S": "USER#alice"},
                ":prefix": {"S": "LOAN#loan-1#PAYMENT#"},
            },
            ScanIndexForward=False,
            Limit=2,
            **CAPACITY,
        ),
    )

    assert len(answer["Items"]) == answer["Count"] == 2
    assert set(answer["LastEvaluatedKey"]) == {"PK", "SK"}


async def test_put_item(store: PaymentStore, botocore_client: Any, stored: list[Item]) -> None:
    answer = await _same_answer(
        store,
        botocore_client,
        lambda client: client.put_item(
            TableName=store.table_name, Item=stored[0], ReturnValues="ALL_OLD", **CAPACITY
        ),
    )

    assert answer["Attributes"] == stored[0]


async def test_update_item(store: PaymentStore, botocore_client: Any, stored: list[Item]) -> None:
    answer = await _same_answer(
        store,
        botocore_client,
        lambda client: client.update_item(
            TableName=store.table_name,
            Key=primary_key_of(stored[0]),
            UpdateExpression="SET loc_update_reason = :reason",
            ExpressionAttributeValues={":reason": {"S": "contract"}},
            ReturnValues="ALL_NEW",
            **CAPACITY,
        ),
    )

    assert answer["Attributes"] == stored[0] | {"loc_update_reason": {"S": "contract"}}


async def test_a_failed_condition_returns_the_old_item(
    store: PaymentStore, botocore_client: Any, stored: list[Item]
) -> None:
    refusal = await _same_refusal(
        store,
        botocore_client,
        lambda client: client.update_item(
            TableName=store.table_name,
            Key=primary_key_of(stored[0]),
            UpdateExpression="SET loc_update_reason = :reason",
            ConditionExpression="loc_version = :other",
            ExpressionAttributeValues={":reason": {"S": "never"}, ":other": {"N": "99"}},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        ),
    )

    assert refusal["Error"]["Code"] == "ConditionalCheckFailedException"
    assert refusal["Item"] == stored[0]


async def test_transactions_and_their_cancellation_reasons(
    store: PaymentStore, botocore_client: Any, stored: list[Item]
) -> None:
    def transaction(version: str) -> Call:
        return lambda client: client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": store.table_name,
                        "Key": primary_key_of(item),
                        "UpdateExpression": "SET loc_update_reason = :reason",
                        "ConditionExpression": "loc_version = :version",
                        "ExpressionAttributeValues": {
                            ":reason": {"S": "contract"},
                            ":version": {"N": version},
                        },
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
                for item in stored[:2]
            ],
            **CAPACITY,
        )

    await _same_answer(store, botocore_client, transaction("1"))
    refusal = await _same_refusal(store, botocore_client, transaction("99"))

    assert refusal["Error"]["Code"] == "TransactionCanceledException"
    reasons = refusal["CancellationReasons"]
    assert [reason["Code"] for reason in reasons] == ["ConditionalCheckFailed"] * 2
    assert [reason["Item"]["SK"] for reason in reasons] == [item["SK"] for item in stored[:2]]


async def test_describe_table_keeps_botocores_parsing(
    store: PaymentStore, botocore_client: Any
) -> None:
    answer = await _same_answer(
        store,
        botocore_client,
        lambda client: client.describe_table(TableName=store.table_name),
    )

    # A timestamp, which only the shape walker makes a datetime: the control plane keeps it.
    assert answer["Table"]["CreationDateTime"].tzinfo is not None


async def test_data_answers_never_reach_the_shape_walker(
    store: PaymentStore, stored: list[Item], monkeypatch: pytest.MonkeyPatch
) -> None:
    def walk(*_: Any) -> Any:
        raise AssertionError("botocore walked a data answer shape by shape")

    monkeypatch.setattr(JSONParser, "_parse_shape", walk)
    payments = await store.loan_payments(
        LoanRef("alice", "loan-1"), status=None, first=10, after=None
    )
    found = await store.batch_get([ref_of(edge.node) for edge in payments.edges])

    assert len(payments.edges) == len(found) == len(stored)


async def test_a_client_without_the_fast_parser_is_refused(
    moto_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(datasource.client, "fast_session", AioSession)

    with pytest.raises(FastParsingMissing, match="response parser"):
        async with open_client(backend_config(moto_backend.endpoint_url, "any")):
            pass


def test_an_aiobotocore_of_another_release_line_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import aiobotocore

    from datasource.aiobotocore_adapter import check_fast_parsing

    monkeypatch.setattr(aiobotocore, "__version__", "3.0.0")

    with pytest.raises(FastParsingMissing, match="release line"):
        check_fast_parsing(None)  # type: ignore[arg-type]
