"""Idempotent creation: a retried request creates at most one payment."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import datetime, timedelta
from typing import Any

import pytest

from datasource import DynamoConfig
from tests.api.conftest import ALICE, SERVICE, Api, Clock, api_client, stored_items, token
from tests.api.races import REQUEST
from tests.api.raw_table import as_written_before_scoping

# The key format the docs show for autopay (docs/api.md), and the service's AUTO creation that
# sends it; a customer may send any key it likes on its own MANUAL creations.
AUTOPAY_KEY = "autopay-alice-loan-1-2026-12"
AUTOPAY = {**REQUEST, "process": "AUTO", "idempotencyKey": AUTOPAY_KEY}
BY_HAND = {"loanId": "loan-1", "amountCents": 700, "method": "ACH", "idempotencyKey": AUTOPAY_KEY}


def payments(config: DynamoConfig) -> list[dict[str, Any]]:
    return [item for item in stored_items(config) if "loc_status" in item]


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


async def test_the_same_key_and_request_returns_the_same_payment(
    api: Api, moto_config: DynamoConfig
) -> None:
    first = await api.mutate("createPayment", {**REQUEST, "idempotencyKey": "order-17"})
    again = await api.mutate("createPayment", {**REQUEST, "idempotencyKey": "order-17"})

    assert first["__typename"] == again["__typename"] == "PaymentPayload"
    assert again["payment"] == first["payment"]
    [payment] = payments(moto_config)
    [record] = [item for item in stored_items(moto_config) if "IDEMPOTENCY#" in item["SK"]["S"]]
    assert record["PK"] == {"S": "USER#alice"}
    # Scoped by the caller's kind as well as the user: a service's key, here.
    assert record["SK"] == {"S": f"IDEMPOTENCY#SERVICE#{digest('order-17')}"}
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
    [record] = [item for item in stored_items(moto_config) if "IDEMPOTENCY#" in item["SK"]["S"]]
    assert record["SK"] == {"S": f"IDEMPOTENCY#CUSTOMER#{digest('tap-1')}"}


@pytest.mark.parametrize("customer_first", [True, False], ids=["customer-first", "service-first"])
async def test_a_customer_s_key_does_not_block_the_service_s_creation(
    api: Api, moto_config: DynamoConfig, customer_first: bool
) -> None:
    # Issue 55: keys were scoped to the user alone, so a customer who sent the autopay key
    # first made the service's AUTO creation an IDEMPOTENCY_MISMATCH.
    async def customer() -> dict[str, Any]:
        return await api.mutate("createPayment", BY_HAND, as_=ALICE)

    async def service() -> dict[str, Any]:
        return await api.mutate("createPayment", AUTOPAY)

    if customer_first:
        by_hand, autopay = await customer(), await service()
    else:
        autopay, by_hand = await service(), await customer()

    assert by_hand["__typename"] == autopay["__typename"] == "PaymentPayload", (by_hand, autopay)
    assert (by_hand["payment"]["process"], autopay["payment"]["process"]) == ("MANUAL", "AUTO")
    assert by_hand["payment"]["paymentId"] != autopay["payment"]["paymentId"]
    # Each kind's retry answers its own payment, and writes nothing.
    before = stored_items(moto_config)
    assert (await customer())["payment"] == by_hand["payment"]
    assert (await service())["payment"] == autopay["payment"]
    assert stored_items(moto_config) == before
    assert len(payments(moto_config)) == 2


async def test_a_key_is_the_service_s_whichever_client_sends_it(
    api: Api, moto_config: DynamoConfig
) -> None:
    # Scoped by the kind of caller, not its client id, which rotates.
    first = await api.mutate("createPayment", AUTOPAY)
    again = await api.mutate("createPayment", AUTOPAY, as_=token("autopay-v2", service=True))
    assert again["payment"] == first["payment"]
    assert len(payments(moto_config)) == 1


@pytest.mark.parametrize("customer", [False, True], ids=["service", "customer"])
async def test_a_key_stored_before_scoping_replays_its_creation(
    api: Api, moto_config: DynamoConfig, customer: bool
) -> None:
    request, as_ = (BY_HAND, ALICE) if customer else (AUTOPAY, SERVICE)
    first = await api.mutate("createPayment", request, as_=as_)
    as_written_before_scoping(moto_config, "alice", AUTOPAY_KEY)
    before = stored_items(moto_config)

    again = await api.mutate("createPayment", request, as_=as_)

    assert again["payment"] == first["payment"]
    assert stored_items(moto_config) == before
    assert len(payments(moto_config)) == 1


async def test_a_key_stored_before_scoping_still_refuses_another_request_of_its_kind(
    api: Api, moto_config: DynamoConfig
) -> None:
    await api.mutate("createPayment", AUTOPAY)
    as_written_before_scoping(moto_config, "alice", AUTOPAY_KEY)
    before = stored_items(moto_config)

    other = await api.mutate("createPayment", {**AUTOPAY, "amountCents": 2600})

    assert other["code"] == "IDEMPOTENCY_MISMATCH"
    assert stored_items(moto_config) == before


async def test_a_customer_s_key_stored_before_scoping_does_not_block_the_service(
    api: Api, moto_config: DynamoConfig, clock: Clock
) -> None:
    by_hand = await api.mutate("createPayment", BY_HAND, as_=ALICE)
    as_written_before_scoping(moto_config, "alice", AUTOPAY_KEY)

    autopay = await api.mutate("createPayment", AUTOPAY)

    assert autopay["__typename"] == "PaymentPayload", autopay
    assert autopay["payment"]["paymentId"] != by_hand["payment"]["paymentId"]
    # The customer's record still answers the customer, as it did before the change.
    again = await api.mutate("createPayment", BY_HAND, as_=ALICE)
    assert again["payment"] == by_hand["payment"]
    assert len(payments(moto_config)) == 2
    # A day on, the old record is no longer live and answers nobody.
    clock.now += timedelta(hours=25)
    later = await api.mutate("createPayment", BY_HAND, as_=ALICE)
    assert later["payment"]["paymentId"] not in {
        by_hand["payment"]["paymentId"],
        autopay["payment"]["paymentId"],
    }


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


@pytest.mark.race
async def test_a_customer_and_the_service_racing_with_one_key_make_one_payment_each(
    ddblocal_config: DynamoConfig,
) -> None:
    async with api_client(ddblocal_config) as api:
        sent = [api.mutate("createPayment", BY_HAND, as_=ALICE) for _ in range(10)]
        sent += [api.mutate("createPayment", AUTOPAY) for _ in range(10)]
        results = await asyncio.gather(*sent)

        by_hand = {result["payment"]["paymentId"] for result in results[:10]}
        autopay = {result["payment"]["paymentId"] for result in results[10:]}
        assert len(by_hand) == len(autopay) == 1
        assert {item["loc_payment_id"]["S"] for item in payments(ddblocal_config)} == (
            by_hand | autopay
        )
