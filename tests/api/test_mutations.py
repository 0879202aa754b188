"""Creation and the seven transitions: what a caller sees, and what the table then holds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from datasource import DynamoConfig
from domain import keys
from domain.errors import StorageUnavailable
from tests.api.conftest import ALICE, Api, Clock, api_client, payment_items, stored_items


async def test_create_payment_stores_the_documented_item(
    api: Api, moto_config: DynamoConfig, clock: Clock
) -> None:
    payment = await api.create(user="alice", loan="loan-1", amount=5000, reason="autopay run")

    [item] = payment_items(moto_config)
    p = payment["paymentId"]
    assert item == {
        "PK": {"S": "USER#alice"},
        "SK": {"S": f"LOAN#loan-1#PAYMENT#{p}"},
        "GSI1PK": {"S": "USER#alice"},
        "GSI1SK": {"S": f"LOAN#loan-1#STATUS#PENDING#PAYMENT#{p}"},
        # Its shard of GSI2's default layout (64 shards: `PAYMENT#<k>`).
        "GSI2PK": {"S": keys.status_partition(p, keys.DEFAULT_GSI2_SHARDS)},
        "GSI2SK": {"S": f"STATUS#PENDING#PAYMENT#{p}"},
        "loc_user_id": {"S": "alice"},
        "loc_loan_id": {"S": "loan-1"},
        "loc_payment_id": {"S": p},
        "loc_amount": {"N": "5000"},
        "loc_status": {"S": "PENDING"},
        "loc_payment_method": {"S": "ach"},
        "loc_process": {"S": "MANUAL"},
        "loc_account_last_four": {"S": "6789"},
        "loc_intended_installment_id": {"S": "inst-1"},
        "loc_payment_attempts": {"N": "0"},
        "loc_applications": {"L": []},
        "loc_update_reason": {"S": "autopay run"},
        "loc_created_date": {"S": payment["createdAt"]},
        "loc_last_updated": {"S": payment["createdAt"]},
        "loc_version": {"N": "1"},
        "loc_history_from": {"N": "1"},
    }
    # A version-7 UUID: its first 48 bits are the creation time in milliseconds.
    assert p[14] == "7"


async def test_create_payment_defaults(api: Api) -> None:
    result = await api.mutate(
        "createPayment", {"loanId": "loan-1", "amountCents": 100, "method": "PINLESS"}, as_=ALICE
    )
    payment = result["payment"]
    assert payment["userId"] == "alice"
    assert payment["process"] == "MANUAL"
    assert payment["updateReason"] == "payment created"
    assert payment["accountLastFour"] is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("amountCents", 0),
        ("amountCents", -5),
        ("accountLastFour", "12345"),
        ("accountLastFour", "4111111111111111"),
        ("accountLastFour", "12a4"),
        ("loanId", "loan#1"),
        ("loanId", ""),
        ("loanId", "x" * 129),
        ("loanId", "loan\n1"),
        ("userId", "al#ice"),
        ("intendedInstallmentId", "inst#1"),
        ("reason", ""),
    ],
)
async def test_bad_input_to_create_is_refused_and_nothing_is_written(
    api: Api, moto_config: DynamoConfig, field: str, value: Any
) -> None:
    fields = {"userId": "alice", "loanId": "loan-1", "amountCents": 500, "method": "ACH"}
    result = await api.mutate("createPayment", {**fields, field: value})

    assert result["__typename"] == "InvalidInputError"
    assert result["code"] == "INVALID_INPUT"
    assert result["field"] == field
    assert "4111111111111111" not in result["message"]
    assert stored_items(moto_config) == []


async def test_amounts_beyond_graphql_int_are_refused_before_the_resolver(
    api: Api, moto_config: DynamoConfig
) -> None:
    for amount in (2_147_483_648, 12.5, "500"):
        body = await api.post(
            'mutation($a: Int!) { createPayment(input: {userId: "alice", loanId: "l",'
            " amountCents: $a, method: ACH}) { __typename } }",
            {"a": amount},
        )
        # Refused while coercing the variables: nothing ran, so no `data` entry.
        assert "data" not in body and body["errors"], amount
    assert stored_items(moto_config) == []


async def test_ach_lifecycle_with_a_late_return(api: Api, moto_config: DynamoConfig) -> None:
    payment = await api.create(method="ACH", amount=5000)

    sent = await api.move("submitPayment", payment, confirmationId="conf-1", reason="submitted")
    assert sent["payment"]["status"] == "ACHSENT"
    assert sent["payment"]["attempts"] == 1
    assert sent["payment"]["confirmationId"] == "conf-1"
    assert sent["payment"]["allowedTransitions"] == ["COMPLETED", "RETRY", "RETURNED"]

    done = await api.move("completePayment", payment, reason="settled")
    completed = done["payment"]
    assert completed["status"] == "COMPLETED"
    assert completed["applications"] == [
        {
            "paymentId": payment["paymentId"],
            "installmentId": "inst-1",
            "amountCents": 5000,
            "paymentDate": completed["updatedAt"],
        }
    ]

    returned = await api.move("returnPayment", payment, returnCode="R10", reason="unauthorized")
    assert returned["payment"]["status"] == "RETURNED"
    assert returned["payment"]["returnCode"] == "R10"
    assert returned["payment"]["allowedTransitions"] == []
    assert returned["payment"]["version"] == 4

    [item] = payment_items(moto_config)
    p = payment["paymentId"]
    assert item["loc_status"] == {"S": "RETURNED"}
    assert item["GSI1SK"] == {"S": f"LOAN#loan-1#STATUS#RETURNED#PAYMENT#{p}"}
    assert item["GSI2SK"] == {"S": f"STATUS#RETURNED#PAYMENT#{p}"}
    assert item["GSI3PK"] == {"S": "USER#alice"}
    assert item["GSI3SK"] == {"S": "CONFIRMATION#conf-1"}
    assert item["loc_update_reason"] == {"S": "unauthorized"}
    assert item["loc_return_code"] == {"S": "R10"}
    assert item["loc_applications"] == {
        "L": [
            {
                "M": {
                    "payment_id": {"S": p},
                    "installment_id": {"S": "inst-1"},
                    "amount": {"N": "5000"},
                    "payment_date": {"S": completed["updatedAt"]},
                }
            }
        ]
    }


async def test_pinless_completion_splits_across_installments(api: Api) -> None:
    payment = await api.create(method="PINLESS", amount=10_000)
    split = [
        {"installmentId": "inst-1", "amountCents": 6000},
        {"installmentId": "inst-2", "amountCents": 4000},
    ]

    result = await api.move("completePayment", payment, confirmationId="card-9", applications=split)

    completed = result["payment"]
    assert completed["status"] == "COMPLETED"
    assert completed["attempts"] == 1
    assert completed["allowedTransitions"] == ["CHARGED_BACK"]
    assert [(a["installmentId"], a["amountCents"]) for a in completed["applications"]] == [
        ("inst-1", 6000),
        ("inst-2", 4000),
    ]
    charged = await api.move("chargeBackPayment", payment, reason="cardholder dispute")
    assert charged["payment"]["status"] == "CHARGED_BACK"


async def test_applications_that_do_not_add_up_change_nothing(
    api: Api, moto_config: DynamoConfig
) -> None:
    payment = await api.create(method="PINLESS", amount=10_000)
    before = stored_items(moto_config)

    result = await api.move(
        "completePayment",
        payment,
        confirmationId="card-9",
        applications=[{"installmentId": "inst-1", "amountCents": 9999}],
    )

    assert result["code"] == "INVALID_INPUT"
    assert result["field"] == "applications"
    assert stored_items(moto_config) == before


async def test_completion_without_applications_or_intended_installment(api: Api) -> None:
    payment = await api.create(method="PINLESS", intendedInstallmentId=None)
    result = await api.move("completePayment", payment, confirmationId="card-1")
    assert (result["code"], result["field"]) == ("INVALID_INPUT", "applications")


async def test_pinless_decline_and_retry(api: Api) -> None:
    payment = await api.create(method="PINLESS")
    declined = await api.move("schedulePaymentRetry", payment, reason="do not honor")
    assert (declined["payment"]["status"], declined["payment"]["attempts"]) == ("RETRY", 1)
    again = await api.move("schedulePaymentRetry", payment, reason="insufficient funds")
    assert (again["payment"]["status"], again["payment"]["attempts"]) == ("RETRY", 2)
    skipped = await api.move("skipPayment", payment, reason="loan paid off")
    assert skipped["payment"]["status"] == "SKIPPED"


async def test_refused_moves_change_nothing(api: Api, moto_config: DynamoConfig) -> None:
    ach = await api.create(method="ACH")
    before = stored_items(moto_config)

    for mutation, extra, code in [
        ("returnPayment", {"returnCode": "R01"}, "INVALID_TRANSITION"),
        ("chargeBackPayment", {}, "INVALID_TRANSITION"),
        ("completePayment", {}, "INVALID_TRANSITION"),
        ("schedulePaymentRetry", {"returnCode": "R01"}, "INVALID_TRANSITION"),
        ("failPayment", {}, "INVALID_TRANSITION"),  # PENDING -> FAILED is PINless only
        ("submitPayment", {"confirmationId": "c#1"}, "INVALID_INPUT"),
        ("submitPayment", {"confirmationId": "c-1", "reason": ""}, "INVALID_INPUT"),
        ("returnPayment", {"returnCode": "X01"}, "INVALID_INPUT"),
    ]:
        result = await api.move(mutation, ach, **extra)
        assert result["code"] == code, (mutation, result)
    assert stored_items(moto_config) == before


async def test_terminal_payments_never_move(api: Api) -> None:
    payment = await api.create(method="ACH")
    await api.move("skipPayment", payment)
    for mutation, extra in [
        ("submitPayment", {"confirmationId": "c-1"}),
        ("skipPayment", {}),
        ("failPayment", {}),
    ]:
        result = await api.move(mutation, payment, **extra)
        assert result["code"] == "INVALID_TRANSITION"
        assert "final" in result["message"]


# Each mutation, with a payment in a status it can move from and the input that move needs.
MOVES: dict[str, tuple[str, list[tuple[str, dict[str, Any]]], dict[str, Any]]] = {
    "submitPayment": ("ACH", [], {"confirmationId": "conf-1"}),
    "completePayment": ("PINLESS", [], {"confirmationId": "card-1"}),
    "schedulePaymentRetry": ("PINLESS", [], {}),
    "failPayment": ("PINLESS", [], {}),
    "returnPayment": ("ACH", [("submitPayment", {"confirmationId": "c"})], {"returnCode": "R01"}),
    "chargeBackPayment": ("PINLESS", [("completePayment", {"confirmationId": "c"})], {}),
    "skipPayment": ("ACH", [], {}),
}


async def payment_ready_for(api: Api, mutation: str) -> tuple[dict[str, Any], dict[str, Any]]:
    method, before, extra = MOVES[mutation]
    payment = await api.create(method=method)
    for earlier, earlier_extra in before:
        assert (await api.move(earlier, payment, **earlier_extra))["__typename"] == "PaymentPayload"
    return payment, extra


@pytest.mark.parametrize("mutation", MOVES)
async def test_unknown_payment_is_not_found(api: Api, mutation: str) -> None:
    ghost = {
        "userId": "alice",
        "loanId": "loan-1",
        "paymentId": "0190f5a4-0000-7000-8000-000000000000",
    }
    result = await api.move(mutation, ghost, **MOVES[mutation][2])
    assert (result["__typename"], result["code"]) == ("NotFoundError", "NOT_FOUND")


# moto serves requests on threads and does not make a conditional write atomic against another
# one, so races are run on DynamoDB Local, which does.
@pytest.mark.race
@pytest.mark.parametrize("mutation", MOVES)
async def test_a_lost_race_is_a_conflict_and_the_winner_stands(
    ddblocal_config: DynamoConfig, mutation: str
) -> None:
    async with api_client(ddblocal_config) as api:
        payment, extra = await payment_ready_for(api, mutation)
        version = int(payment_items(ddblocal_config)[0]["loc_version"]["N"])
        store = api.app.state.store
        read = store.batch_get
        both_read = asyncio.Barrier(2)

        async def read_then_wait(refs: Any, **options: Any) -> Any:
            found = await read(refs, **options)
            await both_read.wait()  # both writers now hold the same version of the payment
            return found

        store.batch_get = read_then_wait
        try:
            first, second = await asyncio.gather(
                api.move(mutation, payment, reason="first", **extra),
                api.move(mutation, payment, reason="second", **extra),
            )
        finally:
            del store.batch_get

    assert sorted([first["__typename"], second["__typename"]]) == [
        "ConflictError",
        "PaymentPayload",
    ]
    winner, loser = (first, second) if first["__typename"] == "PaymentPayload" else (second, first)
    assert loser["code"] == "CONFLICT"
    assert loser["foundStatus"] == winner["payment"]["status"]
    [item] = payment_items(ddblocal_config)
    assert item["loc_status"] == {"S": winner["payment"]["status"]}
    assert item["loc_update_reason"] == {"S": winner["payment"]["updateReason"]}
    assert item["loc_version"] == {"N": str(version + 1)}


@pytest.mark.parametrize("mutation", [*MOVES, "createPayment"])
async def test_storage_that_does_not_answer_is_a_retryable_error(
    api: Api, moto_config: DynamoConfig, monkeypatch: pytest.MonkeyPatch, mutation: str
) -> None:
    extra: dict[str, Any]
    if mutation == "createPayment":
        payment, extra = None, {}
    else:
        payment, extra = await payment_ready_for(api, mutation)
    before = stored_items(moto_config)

    async def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise StorageUnavailable()

    store = api.app.state.store
    monkeypatch.setattr(store, "create", unavailable)
    monkeypatch.setattr(store, "transition", unavailable)
    if payment is None:
        result = await api.mutate(
            "createPayment", {"userId": "alice", "loanId": "l", "amountCents": 1, "method": "ACH"}
        )
    else:
        result = await api.move(mutation, payment, **extra)

    assert (result["__typename"], result["code"]) == ("UnavailableError", "UNAVAILABLE")
    assert stored_items(moto_config) == before


async def test_an_ach_retry_needs_the_return_code(api: Api) -> None:
    payment = await api.create(method="ACH")
    await api.move("submitPayment", payment, confirmationId="conf-1")
    result = await api.move("schedulePaymentRetry", payment)
    assert (result["code"], result["field"]) == ("INVALID_INPUT", "returnCode")
