"""Fifty writers race to move one payment: exactly one wins, and the table holds the winner's write.

On Amazon DynamoDB Local (the real emulator, whose conditional writes are atomic), through the
GraphQL API. Each round creates an ACH payment, checks that the API allows both contested moves
from PENDING (`allowedTransitions`), then fires 25 `submitPayment` (each with its own confirmation
id) and 25 `skipPayment` at once. Every request carries its own reason, so the stored
`loc_update_reason` names the request that won.

Each write stores its event with it, in one transaction (`datasource.history`): a round leaves
exactly one new event, the winner's, and `history` lists the creation and that move. Two more
tests show the transaction is all or nothing: a write whose payment condition fails (a stale
writer) stores no event, and a move whose event cannot be stored (a hand-written item holds its
version) stores nothing at all and answers INTERNAL.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from datasource import DynamoConfig, PaymentStore
from domain.audit import Actor, ActorKind
from domain.enums import PaymentStatus
from domain.errors import Conflict
from domain.payment import PaymentRef
from domain.transitions import TransitionRequest
from resolvers.workflow import move_payment
from tests.api.conftest import Api, api_client, error_codes
from tests.api.races import LOSER_TYPES, READ, SKIP, SUBMIT, TARGET
from tests.api.raw_table import event_items, partition, raw_client, raw_item, versions
from tests.payment_samples import LATER

ROUNDS = 10
WRITERS_PER_MOVE = 25  # of each move, so 50 writers a round

HISTORY = """query($u: ID!, $l: ID!, $p: ID!) {
  payment(userId: $u, loanId: $l, paymentId: $p) {
    history(first: 10) { complete edges { node { version fromStatus toStatus reason } } }
  }
}"""


async def listed_history(api: Api, payment: dict[str, Any]) -> dict[str, Any]:
    """The payment's `history`, as the API lists it."""
    variables = {"u": payment["userId"], "l": payment["loanId"], "p": payment["paymentId"]}
    history: dict[str, Any] = (await api.data(HISTORY, variables))["payment"]["history"]
    return history


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
            events_before = event_items(ddblocal_config, created)
            assert versions(events_before) == [created["version"]] == [1]

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

            # The history gained one event, the winner's: the 49 losers stored none.
            events = event_items(ddblocal_config, created)
            assert events[:-1] == events_before, events
            assert versions(events) == [1, created["version"] + 1], events
            event = events[-1]
            assert event["loc_from_status"] == {"S": "PENDING"}, event
            assert event["loc_to_status"] == {"S": status}, event
            assert event["loc_update_reason"] == {"S": won_input["reason"]}, event
            assert event["loc_event_date"] == after["loc_last_updated"], event
            if won_query == SUBMIT:
                assert event["loc_confirmation_id"] == {"S": won_input["confirmationId"]}, event
            else:
                assert "loc_confirmation_id" not in event, event
            history = await listed_history(api, created)
            assert history["complete"] is True
            assert [edge["node"] for edge in history["edges"]] == [
                {
                    "version": 1,
                    "fromStatus": None,
                    "toStatus": "PENDING",
                    "reason": created["updateReason"],
                },
                {
                    "version": 2,
                    "fromStatus": "PENDING",
                    "toStatus": status,
                    "reason": won_input["reason"],
                },
            ]
    # The writers did race: some read PENDING and lost at the conditional write.
    assert conflicts_seen > 0


STALE_WRITER = Actor(ActorKind.JOB, "stale-writer")


@pytest.mark.ddblocal
async def test_a_write_whose_condition_fails_stores_no_event(
    ddblocal_config: DynamoConfig, ddblocal_store: PaymentStore
) -> None:
    async with api_client(ddblocal_config) as api:
        created = await api.create(user="stale", loan="loan-stale", method="ACH")
        ref = PaymentRef(created["userId"], created["loanId"], created["paymentId"])
        stale = await ddblocal_store.get(ref)
        assert stale is not None
        assert stale.version == 1
        moved = await api.move("submitPayment", created, reason="fresh", confirmationId="conf-1")
        assert moved["__typename"] == "PaymentPayload", moved
        before = partition(ddblocal_config, "stale")  # the payment, its claim, two events
        assert versions(event_items(ddblocal_config, created)) == [1, 2]

        skip = TransitionRequest.checked(PaymentStatus.SKIPPED, "stale skip")
        # A writer that read version 1 (PENDING) and skips it now: its payment's condition fails
        # (and the version its event would take is taken).
        with pytest.raises(Conflict) as conflict:
            await move_payment(
                ddblocal_store, stale, skip, actor=STALE_WRITER, clock=lambda: LATER, max_attempts=3
            )
        assert conflict.value.found is PaymentStatus.ACHSENT
        # One that expects a version nobody wrote: its event's version (8) is free, so only the
        # payment's condition stands in its way, and that is enough.
        forged = dataclasses.replace(stale, version=7)
        with pytest.raises(Conflict):
            await move_payment(
                ddblocal_store,
                forged,
                skip,
                actor=STALE_WRITER,
                clock=lambda: LATER,
                max_attempts=3,
            )

        # Not one item changed or appeared: the history is the creation and the submission.
        assert partition(ddblocal_config, "stale") == before
        history = await listed_history(api, created)
        assert [
            (edge["node"]["version"], edge["node"]["toStatus"]) for edge in history["edges"]
        ] == [
            (1, "PENDING"),
            (2, "ACHSENT"),
        ]


@pytest.mark.ddblocal
async def test_a_move_whose_event_cannot_be_stored_stores_nothing(
    ddblocal_config: DynamoConfig,
) -> None:
    async with api_client(ddblocal_config) as api:
        created = await api.create(user="collider", loan="loan-collide", method="ACH")
        # By hand, an event at the version the next move produces: the move's event cannot be
        # put (an event is never overwritten), though the payment's own condition holds.
        [creation] = event_items(ddblocal_config, created)
        hand_written = {
            **creation,
            "SK": {"S": creation["SK"]["S"].removesuffix("000001") + "000002"},
            "loc_version": {"N": "2"},
            "loc_from_status": {"S": "PENDING"},
            "loc_to_status": {"S": "SKIPPED"},
            "loc_update_reason": {"S": "written by hand"},
        }
        raw_client(ddblocal_config).put_item(
            TableName=ddblocal_config.table_name, Item=hand_written
        )
        payment_before = raw_item(ddblocal_config, created)
        before = partition(ddblocal_config, "collider")
        assert before == [creation, hand_written, payment_before]  # in key order

        named = {k: created[k] for k in ("userId", "loanId", "paymentId")}
        input = {**named, "confirmationId": "conf-collide", "reason": "collide"}
        body = await api.post(SUBMIT, {"input": input})

        # Our bug or a foreign item, never the caller's doing: masked, as INTERNAL.
        assert error_codes(body) == ["INTERNAL"], body
        assert [error["message"] for error in body["errors"]] == ["Unexpected error."], body
        assert body["data"] is None, body
        # All or nothing: the payment is unchanged, the confirmation id unclaimed, and the
        # history holds the creation and the hand-written item, untouched.
        assert raw_item(ddblocal_config, created) == payment_before
        assert event_items(ddblocal_config, created) == [creation, hand_written]
        assert partition(ddblocal_config, "collider", "CONFIRMATION#") == []
        assert partition(ddblocal_config, "collider") == before
