"""Moves under an idempotency key and an expected version: a resend applies once, a stale
client is told, and a key reused for something else is refused, with nothing written."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

import pytest

from datasource import DynamoConfig
from tests.api.conftest import ALICE, Api, Clock, api_client, stored_items
from tests.api.raw_table import as_written_before_scoping

CONFLICT_FIELDS = "... on ConflictError { currentPayment { status version attempts } }"


def history_versions(config: DynamoConfig, payment: dict[str, Any]) -> list[int]:
    prefix = f"HISTORY#LOAN#{payment['loanId']}#PAYMENT#{payment['paymentId']}#V#"
    return [
        int(item["loc_version"]["N"])
        for item in stored_items(config)
        if item["SK"]["S"].startswith(prefix)
    ]


async def move(api: Api, mutation: str, input: dict[str, Any]) -> dict[str, Any]:
    type_name = mutation[0].upper() + mutation[1:] + "Input"
    data = await api.data(
        f"mutation($input: {type_name}!) {{ {mutation}(input: $input) {{ __typename "
        "... on PaymentPayload { replayed payment { status version attempts } } "
        f"... on UserError {{ code message }} ... on InvalidInputError {{ field }} "
        f"{CONFLICT_FIELDS} }} }}",
        {"input": input},
    )
    result: dict[str, Any] = data[mutation]
    return result


def named(payment: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "userId": payment["userId"],
        "loanId": payment["loanId"],
        "paymentId": payment["paymentId"],
        "reason": "declined: insufficient funds",
        **extra,
    }


async def declined_once(api: Api) -> dict[str, Any]:
    """A PINless payment declined once: RETRY, one attempt, version 2."""
    payment = await api.create(method="PINLESS")
    first = await move(api, "schedulePaymentRetry", named(payment))
    assert first["payment"] == {"status": "RETRY", "version": 2, "attempts": 1}, first
    return payment


async def test_a_decline_sent_again_with_its_key_is_applied_once(
    api: Api, moto_config: DynamoConfig
) -> None:
    payment = await declined_once(api)
    decline = named(payment, idempotencyKey="decline-2")

    first = await move(api, "schedulePaymentRetry", decline)
    after_first = stored_items(moto_config)
    again = await move(api, "schedulePaymentRetry", decline)

    assert first == {
        "__typename": "PaymentPayload",
        "replayed": False,
        "payment": {"status": "RETRY", "version": 3, "attempts": 2},
    }
    # RETRY -> RETRY is a legal move, yet the resend is the first one's answer, not a second.
    assert again == {**first, "replayed": True}
    assert stored_items(moto_config) == after_first
    assert history_versions(moto_config, payment) == [1, 2, 3]


async def test_a_resend_answers_the_payment_as_it_is_now(api: Api) -> None:
    payment = await api.create(method="ACH")
    submit = named(payment, confirmationId="ach-1", idempotencyKey="submit-1")
    await move(api, "submitPayment", submit)
    await move(api, "completePayment", named(payment, idempotencyKey="complete-1"))

    again = await move(api, "submitPayment", submit)

    # Stripe's semantics: the key's request happened; what it wrote has since moved on.
    assert again["replayed"] is True
    assert again["payment"] == {"status": "COMPLETED", "version": 3, "attempts": 1}


@pytest.mark.parametrize(
    "change",
    [
        {"reason": "another reason"},
        {"returnCode": "R01"},
        {"expectedVersion": 3},
    ],
    ids=["reason", "returnCode", "expectedVersion"],
)
async def test_the_key_with_another_input_is_refused(
    api: Api, moto_config: DynamoConfig, change: dict[str, Any]
) -> None:
    payment = await declined_once(api)
    await move(api, "schedulePaymentRetry", named(payment, idempotencyKey="k"))
    before = stored_items(moto_config)

    other = await move(api, "schedulePaymentRetry", named(payment, idempotencyKey="k", **change))

    assert (other["__typename"], other["code"]) == (
        "IdempotencyMismatchError",
        "IDEMPOTENCY_MISMATCH",
    )
    assert stored_items(moto_config) == before


async def test_one_key_is_one_request_whatever_the_mutation(
    api: Api, moto_config: DynamoConfig
) -> None:
    payment = await api.create(method="PINLESS", idempotencyKey="shared")
    other = await api.create(method="PINLESS")
    before = stored_items(moto_config)

    # The creation's key, then a move's: another payment, another move, another mutation.
    attempts = [
        ("skipPayment", named(payment, idempotencyKey="shared")),
        ("schedulePaymentRetry", named(other, idempotencyKey="shared")),
    ]
    for mutation, input in attempts:
        result = await move(api, mutation, input)
        assert result["code"] == "IDEMPOTENCY_MISMATCH", result
    await move(api, "schedulePaymentRetry", named(other, idempotencyKey="move"))
    after = stored_items(moto_config)
    result = await move(api, "failPayment", named(other, idempotencyKey="move"))
    assert result["code"] == "IDEMPOTENCY_MISMATCH", result
    assert stored_items(moto_config) == after != before


async def test_a_move_s_record_is_stored_with_it_and_outside_every_access_pattern(
    api: Api, moto_config: DynamoConfig
) -> None:
    payment = await declined_once(api)
    result = await move(api, "skipPayment", named(payment, idempotencyKey="skip-17"))
    assert result["payment"]["status"] == "SKIPPED"

    digest = hashlib.sha256(b"skip-17").hexdigest()
    # Only a service moves a payment: its key is a service's.
    [record] = [
        i for i in stored_items(moto_config) if i["SK"]["S"] == f"IDEMPOTENCY#SERVICE#{digest}"
    ]
    assert record["PK"] == {"S": f"USER#{payment['userId']}"}
    assert record["loc_payment_id"] == {"S": payment["paymentId"]}
    assert record["loc_version"] == {"N": "3"}
    assert not any(name.startswith("GSI") for name in record)
    [item] = [i for i in stored_items(moto_config) if i["SK"]["S"].endswith(payment["paymentId"])
              and i["SK"]["S"].startswith("LOAN#")]  # fmt: skip
    # Written with the move, remembered 24 hours from it (DynamoDB's TTL, epoch seconds).
    assert record["loc_created_date"] == item["loc_last_updated"]
    moved = datetime.fromisoformat(item["loc_last_updated"]["S"])
    assert int(record["loc_expires_at"]["N"]) == int((moved + timedelta(hours=24)).timestamp())


async def test_a_key_is_the_user_s_own(api: Api, moto_config: DynamoConfig) -> None:
    mine = await declined_once(api)
    theirs = await api.create(user="bob", method="PINLESS")
    await move(api, "schedulePaymentRetry", named(theirs))

    a = await move(api, "schedulePaymentRetry", named(mine, idempotencyKey="nightly"))
    b = await move(api, "schedulePaymentRetry", named(theirs, idempotencyKey="nightly"))

    assert (a["replayed"], b["replayed"]) == (False, False)
    assert a["payment"]["attempts"] == b["payment"]["attempts"] == 2


async def test_a_decline_stored_before_keys_were_scoped_is_applied_once(
    api: Api, moto_config: DynamoConfig
) -> None:
    payment = await declined_once(api)
    decline = named(payment, idempotencyKey="decline-old")
    first = await move(api, "schedulePaymentRetry", decline)
    # Its record as the service stored it before keys were scoped by the caller's kind.
    as_written_before_scoping(moto_config, payment["userId"], "decline-old")
    before = stored_items(moto_config)

    again = await move(api, "schedulePaymentRetry", decline)
    other = await move(api, "schedulePaymentRetry", {**decline, "reason": "another reason"})

    # RETRY -> RETRY is legal: only the old record keeps the resend from a second presentment.
    assert again == {**first, "replayed": True}
    assert other["code"] == "IDEMPOTENCY_MISMATCH", other
    assert stored_items(moto_config) == before
    assert history_versions(moto_config, payment) == [1, 2, 3]


async def test_a_refused_resend_finds_a_record_stored_before_keys_were_scoped(
    api: Api, moto_config: DynamoConfig
) -> None:
    payment = await api.create(method="ACH")
    skip = named(payment, idempotencyKey="skip-old")
    first = await move(api, "skipPayment", skip)
    as_written_before_scoping(moto_config, payment["userId"], "skip-old")

    # SKIPPED is terminal: the resend is refused by the table, then answered by the record.
    again = await move(api, "skipPayment", skip)

    assert again == {**first, "replayed": True}


@pytest.mark.parametrize("stored_before_scoping", [False, True], ids=["scoped", "old-form"])
async def test_a_customer_s_key_does_not_block_the_service_s_move(
    api: Api, moto_config: DynamoConfig, stored_before_scoping: bool
) -> None:
    # Issue 55: a customer sent the key the service uses for its presentment on a creation.
    key = "ach-file-2026-12-02-1400-7001"
    payment = await api.create(method="ACH")
    mine = {"loanId": "loan-1", "amountCents": 700, "method": "ACH", "idempotencyKey": key}
    await api.mutate("createPayment", mine, as_=ALICE)
    if stored_before_scoping:
        as_written_before_scoping(moto_config, "alice", key)

    submit = named(payment, confirmationId="ach-7001", idempotencyKey=key)
    first = await move(api, "submitPayment", submit)
    again = await move(api, "submitPayment", submit)

    assert first["payment"] == {"status": "ACHSENT", "version": 2, "attempts": 1}, first
    assert again == {**first, "replayed": True}


async def test_a_key_is_forgotten_after_24_hours(moto_config: DynamoConfig) -> None:
    clock = Clock()
    async with api_client(moto_config, clock=clock) as api:
        payment = await declined_once(api)
        decline = named(payment, idempotencyKey="decline")
        await move(api, "schedulePaymentRetry", decline)
        clock.now += timedelta(hours=24, seconds=2)

        late = await move(api, "schedulePaymentRetry", decline)

    # A day later the key names nothing: the same input is a new decline.
    assert (late["replayed"], late["payment"]["attempts"]) == (False, 3)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("idempotencyKey", ""),
        ("idempotencyKey", "   "),
        ("idempotencyKey", "k" * 256),
        ("idempotencyKey", "a\tb"),
        ("idempotencyKey", "a\x00b"),
        ("expectedVersion", 0),
        ("expectedVersion", -3),
    ],
)
async def test_bad_keys_and_versions_are_refused_by_name(
    api: Api, moto_config: DynamoConfig, field: str, value: Any
) -> None:
    payment = await declined_once(api)
    before = stored_items(moto_config)

    result = await move(api, "schedulePaymentRetry", named(payment, **{field: value}))

    assert (result["__typename"], result["field"]) == ("InvalidInputError", field)
    assert stored_items(moto_config) == before


async def test_an_expected_version_that_is_not_the_payment_s_is_a_conflict(
    api: Api, moto_config: DynamoConfig
) -> None:
    payment = await declined_once(api)
    before = stored_items(moto_config)

    stale = await move(api, "schedulePaymentRetry", named(payment, expectedVersion=1))

    assert (stale["__typename"], stale["code"]) == ("ConflictError", "CONFLICT")
    assert stale["currentPayment"] == {"status": "RETRY", "version": 2, "attempts": 1}
    assert "version 2" in stale["message"]
    assert stored_items(moto_config) == before

    fresh = await move(api, "schedulePaymentRetry", named(payment, expectedVersion=2))
    assert fresh["payment"] == {"status": "RETRY", "version": 3, "attempts": 2}


async def test_an_expected_version_with_a_key_sent_again_is_the_first_answer(
    api: Api, moto_config: DynamoConfig
) -> None:
    payment = await declined_once(api)
    decline = named(payment, expectedVersion=2, idempotencyKey="v2-decline")
    first = await move(api, "schedulePaymentRetry", decline)

    # The version moved on because of this very request: its answer again, not CONFLICT.
    again = await move(api, "schedulePaymentRetry", decline)

    assert again == {**first, "replayed": True}
    assert history_versions(moto_config, payment) == [1, 2, 3]


async def test_a_refused_move_leaves_no_record_and_is_decided_again(
    api: Api, moto_config: DynamoConfig
) -> None:
    payment = await api.create(method="ACH")
    complete = named(payment, idempotencyKey="early")

    refused = await move(api, "completePayment", complete)
    assert refused["code"] == "INVALID_TRANSITION"
    assert not [i for i in stored_items(moto_config) if i["SK"]["S"].startswith("IDEMPOTENCY#")]

    await move(api, "submitPayment", named(payment, confirmationId="ach-9"))
    later = await move(api, "completePayment", complete)
    assert (later["replayed"], later["payment"]["status"]) == (False, "COMPLETED")


async def test_a_creation_answered_from_its_key_says_replayed(api: Api) -> None:
    fields = {"userId": "alice", "loanId": "loan-1", "amountCents": 900, "method": "ACH"}
    query = (
        "mutation($input: CreatePaymentInput!) { createPayment(input: $input) { "
        "... on PaymentPayload { replayed payment { paymentId } } } }"
    )
    input = {**fields, "idempotencyKey": "order-5"}

    first = (await api.data(query, {"input": input}))["createPayment"]
    again = (await api.data(query, {"input": input}))["createPayment"]

    assert (first["replayed"], again["replayed"]) == (False, True)
    assert first["payment"] == again["payment"]
