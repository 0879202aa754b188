"""Fifty writers race to move one payment: exactly one wins, and the table holds the winner's write.

On Amazon DynamoDB Local (the real emulator, whose conditional writes are atomic), through the
GraphQL API. Each round creates an ACH payment, checks that the API allows both contested moves
from PENDING (`allowedTransitions`), then fires 25 `submitPayment` (each with its own confirmation
id) and 25 `skipPayment` at once. Every request carries its own reason, so the stored
`loc_update_reason` names the request that won.
"""

from __future__ import annotations

import asyncio
from typing import Any

import boto3
import pytest

from datasource import DynamoConfig
from tests.api.conftest import PAYMENT_FIELDS, RESULT_FIELDS, Api, api_client

ROUNDS = 10
WRITERS_PER_MOVE = 25  # of each move, so 50 writers a round

SUBMIT = f"""mutation($input: SubmitPaymentInput!) {{
  result: submitPayment(input: $input) {{ {RESULT_FIELDS} }}
}}"""
SKIP = f"""mutation($input: SkipPaymentInput!) {{
  result: skipPayment(input: $input) {{ {RESULT_FIELDS} }}
}}"""
READ = f"""query($u: ID!, $l: ID!, $p: ID!) {{
  payment(userId: $u, loanId: $l, paymentId: $p) {{ {PAYMENT_FIELDS} }}
}}"""
TARGET = {SUBMIT: "ACHSENT", SKIP: "SKIPPED"}
LOSER_TYPES = {"ConflictError": "CONFLICT", "InvalidTransitionError": "INVALID_TRANSITION"}


def raw_item(config: DynamoConfig, payment: dict[str, Any]) -> dict[str, Any]:
    """The payment's item exactly as DynamoDB holds it (a strongly consistent GetItem)."""
    client = boto3.client(
        "dynamodb",
        region_name=config.region,
        endpoint_url=config.endpoint_url,
        aws_access_key_id=config.aws_access_key_id,
        aws_secret_access_key=config.aws_secret_access_key,
    )
    key = {
        "PK": {"S": f"USER#{payment['userId']}"},
        "SK": {"S": f"LOAN#{payment['loanId']}#PAYMENT#{payment['paymentId']}"},
    }
    item: dict[str, Any] = client.get_item(
        TableName=config.table_name, Key=key, ConsistentRead=True
    )["Item"]
    return item


async def race(
    api: Api, payment: dict[str, Any], round_: int
) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Fire every writer of one round at once: (mutation, its input, the whole response) each."""
    named = {k: payment[k] for k in ("userId", "loanId", "paymentId")}
    requests: list[tuple[str, dict[str, Any]]] = []
    for writer in range(WRITERS_PER_MOVE):
        submit = {
            **named,
            "confirmationId": f"conf-{round_}-{writer}",
            "reason": f"submit {writer}",
        }
        skip = {**named, "reason": f"skip {writer}"}
        # Interleave the two moves, and alternate which one is fired first.
        pair = [(SUBMIT, submit), (SKIP, skip)]
        requests.extend(pair if (writer + round_) % 2 == 0 else pair[::-1])
    bodies = await asyncio.gather(
        *(api.post(mutation, {"input": input}) for mutation, input in requests)
    )
    return [
        (mutation, input, body) for (mutation, input), body in zip(requests, bodies, strict=True)
    ]


@pytest.mark.race
async def test_fifty_conflicting_transitions_have_exactly_one_winner(
    ddblocal_config: DynamoConfig,
) -> None:
    conflicts_seen = 0
    async with api_client(ddblocal_config) as api:
        for round_ in range(ROUNDS):
            created = await api.create(user="racer", loan=f"loan-{round_}", method="ACH")
            assert created["status"] == "PENDING"
            # Both moves are open to a fresh ACH payment: the race is real, whoever wins.
            assert {"ACHSENT", "SKIPPED"} <= set(created["allowedTransitions"]), created
            before = raw_item(ddblocal_config, created)

            answers = await race(api, created, round_)

            assert len(answers) == 2 * WRITERS_PER_MOVE
            for _, _, body in answers:
                assert "errors" not in body, body
            results = [
                (mutation, input, body["data"]["result"]) for mutation, input, body in answers
            ]
            winners = [r for r in results if r[2]["__typename"] == "PaymentPayload"]
            assert len(winners) == 1, [r[2]["__typename"] for r in results]
            [(won_query, won_input, won)] = winners
            payment = won["payment"]

            # The winner's answer is the move it asked for.
            assert payment["paymentId"] == created["paymentId"]
            assert payment["status"] == TARGET[won_query]
            assert payment["updateReason"] == won_input["reason"]
            assert payment["version"] == created["version"] + 1
            assert payment["amountCents"] == created["amountCents"]
            if won_query == SUBMIT:
                assert payment["confirmationId"] == won_input["confirmationId"]
            else:
                assert payment["confirmationId"] == created["confirmationId"]

            # Every other writer lost, as a lost race or as a move the new status forbids.
            for query, _, result in results:
                if result is won:
                    continue
                assert result["__typename"] in LOSER_TYPES, result
                assert result["code"] == LOSER_TYPES[result["__typename"]], result
                if result["__typename"] == "ConflictError":
                    conflicts_seen += 1
                    assert result["foundStatus"] == payment["status"], result
                else:
                    # It read the payment after the one write: the winner's status.
                    assert result["currentStatus"] == payment["status"], result
                    assert result["targetStatus"] == TARGET[query], result
                    assert result["targetStatus"] not in payment["allowedTransitions"], result

            # The table holds the winner's write, once.
            after = raw_item(ddblocal_config, created)
            p, loan, status = created["paymentId"], created["loanId"], payment["status"]
            assert int(after["loc_version"]["N"]) == int(before["loc_version"]["N"]) + 1
            assert after["loc_status"] == {"S": status}
            assert after["GSI1SK"] == {"S": f"LOAN#{loan}#STATUS#{status}#PAYMENT#{p}"}
            assert after["GSI2SK"] == {"S": f"STATUS#{status}#PAYMENT#{p}"}
            assert after["loc_update_reason"] == {"S": won_input["reason"]}
            assert after["loc_last_updated"] == {"S": payment["updatedAt"]}
            assert after["loc_payment_attempts"] == {"N": str(payment["attempts"])}
            assert after["loc_amount"] == before["loc_amount"]
            if payment["confirmationId"] is None:
                assert "loc_confirmation_id" not in after
                assert "GSI3SK" not in after
            else:
                assert after["loc_confirmation_id"] == {"S": payment["confirmationId"]}
                assert after["GSI3SK"] == {"S": f"CONFIRMATION#{payment['confirmationId']}"}
            # And the API reads back exactly what the winner was told.
            read = await api.data(READ, {"u": created["userId"], "l": loan, "p": p})
            assert read["payment"] == payment
    # The writers did race: some read PENDING and lost at the conditional write.
    assert conflicts_seen > 0
