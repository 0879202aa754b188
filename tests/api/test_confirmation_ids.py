"""A confirmation id names one payment of a user: a second payment cannot take it, even racing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from datasource import DynamoConfig
from tests.api.conftest import Api, api_client, payment_items, stored_items

BY_CONFIRMATION = """query($u: ID!, $c: String!) {
  paymentByConfirmation(userId: $u, confirmationId: $c) { paymentId status } }"""


def claims(config: DynamoConfig) -> list[dict[str, Any]]:
    return [item for item in stored_items(config) if item["SK"]["S"].startswith("CONFIRMATION#")]


async def test_a_presentment_with_another_payments_id_is_refused_and_writes_nothing(
    api: Api, moto_config: DynamoConfig
) -> None:
    first = await api.create(method="ACH")
    second = await api.create(method="ACH", loan="loan-2")
    card = await api.create(method="PINLESS")
    await api.move("submitPayment", first, confirmationId="ach-7001")
    before = stored_items(moto_config)

    submitted = await api.move("submitPayment", second, confirmationId="ach-7001")
    completed = await api.move("completePayment", card, confirmationId="ach-7001")

    for refused in (submitted, completed):
        assert refused["__typename"] == "InvalidInputError", refused
        assert (refused["code"], refused["field"]) == ("INVALID_INPUT", "confirmationId")
    assert stored_items(moto_config) == before
    found = await api.data(BY_CONFIRMATION, {"u": "alice", "c": "ach-7001"})
    assert found["paymentByConfirmation"]["paymentId"] == first["paymentId"]


async def test_the_claim_is_stored_outside_every_access_pattern(
    api: Api, moto_config: DynamoConfig
) -> None:
    payment = await api.create(method="ACH")
    sent = await api.move("submitPayment", payment, confirmationId="ach-7001")

    [claim] = claims(moto_config)
    assert claim == {
        "PK": {"S": "USER#alice"},
        "SK": {"S": "CONFIRMATION#ach-7001"},
        "loc_user_id": {"S": "alice"},
        "loc_loan_id": {"S": "loan-1"},
        "loc_payment_id": {"S": payment["paymentId"]},
        "loc_confirmation_id": {"S": "ach-7001"},
        "loc_created_date": {"S": sent["payment"]["updatedAt"]},
    }
    listed = await api.data(
        """{ loan(userId: "alice", loanId: "loan-1") { payments { edges { node { paymentId } } } }
             paymentsByStatus(status: ACHSENT) { edges { node { paymentId } } } }"""
    )
    assert len(listed["loan"]["payments"]["edges"]) == 1
    assert len(listed["paymentsByStatus"]["edges"]) == 1


async def test_a_payment_keeps_its_own_id_and_other_users_have_their_own(
    api: Api, moto_config: DynamoConfig
) -> None:
    payment = await api.create(method="ACH")
    await api.move("submitPayment", payment, confirmationId="ach-7001")
    await api.move("schedulePaymentRetry", payment, returnCode="R01")

    again = await api.move("submitPayment", payment, confirmationId="ach-7001")
    bobs = await api.create(user="bob", method="ACH")
    bob_sent = await api.move("submitPayment", bobs, confirmationId="ach-7001")

    assert (again["payment"]["status"], again["payment"]["attempts"]) == ("ACHSENT", 2)
    assert bob_sent["payment"]["confirmationId"] == "ach-7001"
    owners = {(c["PK"]["S"], c["loc_payment_id"]["S"]) for c in claims(moto_config)}
    assert owners == {
        ("USER#alice", payment["paymentId"]),
        ("USER#bob", bobs["paymentId"]),
    }


async def test_an_id_a_payment_held_before_stays_its_own(api: Api) -> None:
    first = await api.create(method="ACH")
    await api.move("submitPayment", first, confirmationId="ach-1")
    await api.move("schedulePaymentRetry", first, returnCode="R01")
    await api.move("submitPayment", first, confirmationId="ach-2")
    second = await api.create(method="ACH")

    refused = await api.move("submitPayment", second, confirmationId="ach-1")

    assert (refused["code"], refused["field"]) == ("INVALID_INPUT", "confirmationId")


ROUNDS = 10


# Races on DynamoDB Local only: moto's conditional writes are not atomic across its threads.
@pytest.mark.race
async def test_two_payments_racing_for_one_id_have_exactly_one_winner(
    ddblocal_config: DynamoConfig,
) -> None:
    async with api_client(ddblocal_config) as api:
        for round_ in range(ROUNDS):
            loan = f"loan-{round_}"
            racers = [
                await api.create(user="racer", loan=loan, method=method)
                for method in ("ACH", "PINLESS")
            ]
            confirmation = f"conf-{round_}"
            answers = await asyncio.gather(
                api.move("submitPayment", racers[0], confirmationId=confirmation),
                api.move("completePayment", racers[1], confirmationId=confirmation),
            )

            won = [answer for answer in answers if answer["__typename"] == "PaymentPayload"]
            lost = [answer for answer in answers if answer["__typename"] != "PaymentPayload"]
            assert len(won) == 1, answers
            assert [(a["code"], a["field"]) for a in lost] == [
                ("INVALID_INPUT", "confirmationId")
            ], answers
            winner = won[0]["payment"]["paymentId"]
            items = {
                item["loc_payment_id"]["S"]: item
                for item in payment_items(ddblocal_config)
                if item["loc_loan_id"]["S"] == loan
            }
            for racer in racers:
                item = items[racer["paymentId"]]
                if racer["paymentId"] == winner:
                    assert item["loc_confirmation_id"] == {"S": confirmation}
                else:
                    assert item["loc_version"] == {"N": "1"}
                    assert "loc_confirmation_id" not in item
            [claim] = [
                c for c in claims(ddblocal_config) if c["SK"]["S"] == f"CONFIRMATION#{confirmation}"
            ]
            assert claim["loc_payment_id"] == {"S": winner}
