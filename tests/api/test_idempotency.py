"""Idempotent creation: a retried request creates at most one payment."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import datetime, timedelta
from typing import Any

import pytest

from datasource import DynamoConfig
from tests.api.conftest import ALICE, Api, Clock, api_client, stored_items
from tests.api.races import REQUEST


def payments(config: DynamoConfig) -> list[dict[str, Any]]:
    return [item for item in stored_items(config) if "loc_status" in item]


async def test_the_same_key_and_request_returns_the_same_payment(
    api: Api, moto_config: DynamoConfig
) -> None:
    first = await api.mutate("createPayment", {**REQUEST, "idempotencyKey": "order-17"})
    again = await api.mutate("createPayment", {**REQUEST, "idempotencyKey": "order-17"})

    assert first["__typename"] == again["__typename"] == "PaymentPayload"
    assert again["payment"] == first["payment"]
    [payment] = payments(moto_config)
    [record] = [item for item in stored_items(moto_config) if "IDEMPOTENCY#" in item["SK"]["S"]]
    digest = hashlib.sha256(b"order-17").hexdigest()
    assert record["PK"] == {"S": "USER#alice"}
    assert record["SK"] == {"S": f"IDEMPOTENCY#{digest}"}
    assert record["loc_payment_id"] == payment["loc_payment_id"]
    # Kept 24 hours: DynamoDB's TTL deletes it after `loc_expires_at` (epoch seconds).
    created = datetime.fromisoformat(first["payment"]["createdAt"])
    assert int(record["loc_expires_at"]["N"]) == int((created + timedelta(hours=24)).timestamp())
    assert not any(name.startswith("GSI") for name in record)


async def test_the_same_key_with_another_request_is_refused(
    api: Api, moto_config: DynamoConfig
) -> None:
    await api.mutate("createPayment", {**REQUEST, "idempotencyKey": "order-18"})
    before = stored_items(moto_config)

    for change in ({"amountCents": 2501}, {"loanId": "loan-2"}, {"method": "PINLESS"}):
        result = await api.mutate(
            "createPayment", {**REQUEST, **change, "idempotencyKey": "order-18"}
        )
        assert (result["__typename"], result["code"]) == (
            "IdempotencyMismatchError",
            "IDEMPOTENCY_MISMATCH",
        )
    assert stored_items(moto_config) == before


async def test_keys_are_scoped_to_the_user(api: Api, moto_config: DynamoConfig) -> None:
    mine = await api.mutate("createPayment", {**REQUEST, "idempotencyKey": "k"})
    theirs = await api.mutate("createPayment", {**REQUEST, "userId": "bob", "idempotencyKey": "k"})
    assert mine["payment"]["paymentId"] != theirs["payment"]["paymentId"]
    assert len(payments(moto_config)) == 2


async def test_a_customer_retry_is_idempotent_too(api: Api, moto_config: DynamoConfig) -> None:
    fields = {"loanId": "loan-1", "amountCents": 700, "method": "ACH", "idempotencyKey": "tap-1"}
    first = await api.mutate("createPayment", fields, as_=ALICE)
    again = await api.mutate("createPayment", fields, as_=ALICE)
    assert first["payment"]["paymentId"] == again["payment"]["paymentId"]
    assert len(payments(moto_config)) == 1


async def test_a_key_is_forgotten_after_24_hours(
    api: Api, moto_config: DynamoConfig, clock: Clock
) -> None:
    first = await api.mutate("createPayment", {**REQUEST, "idempotencyKey": "monthly"})
    clock.now += timedelta(hours=23)
    within = await api.mutate("createPayment", {**REQUEST, "idempotencyKey": "monthly"})
    clock.now += timedelta(hours=2)
    after = await api.mutate("createPayment", {**REQUEST, "idempotencyKey": "monthly"})

    assert within["payment"]["paymentId"] == first["payment"]["paymentId"]
    assert after["payment"]["paymentId"] != first["payment"]["paymentId"]
    assert len(payments(moto_config)) == 2


@pytest.mark.parametrize("key", ["", "k" * 256, "bad\nkey"])
async def test_bad_keys_are_refused(api: Api, moto_config: DynamoConfig, key: str) -> None:
    result = await api.mutate("createPayment", {**REQUEST, "idempotencyKey": key})
    assert (result["code"], result["field"]) == ("INVALID_INPUT", "idempotencyKey")
    assert stored_items(moto_config) == []


async def test_records_stay_out_of_every_access_pattern(api: Api) -> None:
    created = await api.mutate("createPayment", {**REQUEST, "idempotencyKey": "x"})
    listed = await api.data(
        """query { loan(userId: "alice", loanId: "loan-1") { payments { edges { cursor } } }
           paymentsByStatus(status: PENDING) { edges { node { paymentId } } } }"""
    )
    assert len(listed["loan"]["payments"]["edges"]) == 1
    assert listed["paymentsByStatus"]["edges"] == [
        {"node": {"paymentId": created["payment"]["paymentId"]}}
    ]


@pytest.mark.race
async def test_fifty_concurrent_creations_with_one_key_make_one_payment(
    ddblocal_config: DynamoConfig,
) -> None:
    async with api_client(ddblocal_config) as api:
        results = await asyncio.gather(
            *(
                api.mutate("createPayment", {**REQUEST, "idempotencyKey": "burst"})
                for _ in range(50)
            )
        )
        named = {result["payment"]["paymentId"] for result in results}
        [payment] = payments(ddblocal_config)
        assert named == {payment["loc_payment_id"]["S"]}

        before = stored_items(ddblocal_config)
        mismatch = await api.mutate(
            "createPayment", {**REQUEST, "amountCents": 9999, "idempotencyKey": "burst"}
        )
        assert mismatch["code"] == "IDEMPOTENCY_MISMATCH"
        assert stored_items(ddblocal_config) == before
