"""Status transitions in storage: one conditional write that re-keys the indexes, or nothing."""

import asyncio
import dataclasses
import itertools

import pytest

from datasource import PaymentStore, count_calls
from datasource.history import event_item
from datasource.items import to_item
from domain.enums import PaymentMethod, PaymentStatus
from domain.errors import Conflict, InvalidTransition, NotFound
from domain.history import event_of
from domain.payment import LoanRef, Payment
from domain.transitions import RULES, Rule, apply_transition
from tests.datasource.stored_items import raw_claim, raw_event, raw_item
from tests.payment_samples import (
    ALLOWED_MOVES,
    LATER,
    TEST_ACTOR,
    payment_in,
    ref_of,
    request_for,
    sample_payment,
    stored_move,
    stored_new,
)

S = PaymentStatus
MAX_ATTEMPTS = 3


def _id(move: tuple[Rule, PaymentMethod]) -> str:
    rule, method = move
    return f"{rule.source.value}->{rule.target.value}-{method.value}"


async def _in_lists(store: PaymentStore, payment: Payment, status: PaymentStatus) -> set[str]:
    """Which status lists (GSI1 for its loan, GSI2) hold `payment` under `status`."""
    found = set()
    loan = await store.loan_payments(
        LoanRef(payment.user_id, payment.loan_id), status=status, first=100, after=None
    )
    if payment.payment_id in {edge.node.payment_id for edge in loan.edges}:
        found.add("GSI1")
    jobs = await store.payments_by_status(status=status, first=100, after=None)
    if payment.payment_id in {edge.node.payment_id for edge in jobs.edges}:
        found.add("GSI2")
    return found


@pytest.mark.parametrize("move", ALLOWED_MOVES, ids=_id)
async def test_every_allowed_transition_is_written(
    store: PaymentStore, move: tuple[Rule, PaymentMethod]
) -> None:
    rule, method = move
    current = await stored_new(store, payment_in(rule.source, method))
    updated = apply_transition(current, request_for(rule), max_attempts=MAX_ATTEMPTS, now=LATER)

    with count_calls() as count:
        written = await stored_move(store, current, updated)

    # One transaction: the move, its event, and the claim of a presentment's confirmation id.
    claims = rule.presentment and updated.confirmation_id is not None
    assert count.operations == {"TransactWriteItems": 1}
    assert written == updated
    assert await raw_event(store, updated) == event_item(event_of(current, updated, TEST_ACTOR))
    assert await store.get(ref_of(current)) == updated
    raw = await raw_item(store, current)
    assert raw == to_item(updated)
    pid = current.payment_id
    assert raw["loc_status"] == {"S": rule.target.value}
    assert raw["GSI1SK"] == {"S": f"LOAN#loan-1#STATUS#{rule.target.value}#PAYMENT#{pid}"}
    assert raw["GSI2SK"] == {"S": f"STATUS#{rule.target.value}#PAYMENT#{pid}"}
    assert raw["loc_version"] == {"N": str(current.version + 1)}
    assert raw["loc_last_updated"] == {"S": "2026-03-02T16:45:10.456Z"}
    assert await _in_lists(store, current, rule.target) == {"GSI1", "GSI2"}
    if rule.source is not rule.target:
        assert await _in_lists(store, current, rule.source) == set()
    if updated.confirmation_id is not None:
        assert raw["GSI3SK"] == {"S": f"CONFIRMATION#{updated.confirmation_id}"}
        by_confirmation = await store.payment_by_confirmation(
            user_id="alice", confirmation_id=updated.confirmation_id
        )
        assert by_confirmation == updated
    claim = await raw_claim(store, "alice", updated.confirmation_id)
    if claims:
        assert claim == {
            "PK": {"S": "USER#alice"},
            "SK": {"S": f"CONFIRMATION#{updated.confirmation_id}"},
            "loc_user_id": {"S": "alice"},
            "loc_loan_id": {"S": "loan-1"},
            "loc_payment_id": {"S": pid},
            "loc_confirmation_id": {"S": updated.confirmation_id},
            "loc_created_date": {"S": "2026-03-02T16:45:10.456Z"},
        }
    else:
        assert claim is None
    if current.confirmation_id not in (None, updated.confirmation_id):
        stale = await store.payment_by_confirmation(
            user_id="alice", confirmation_id=current.confirmation_id
        )
        assert stale is None

    # The same write again is a writer that lost the race: refused, the item untouched.
    with pytest.raises(Conflict) as conflict:
        await stored_move(store, current, updated)
    assert conflict.value.found is rule.target
    assert await raw_item(store, current) == raw


async def test_refused_moves_leave_the_item_identical(store: PaymentStore) -> None:
    allowed = {(rule.source, rule.target, method) for rule, method in ALLOWED_MOVES}
    states = list(itertools.product(S, PaymentMethod))
    stored = [await stored_new(store, payment_in(status, method)) for status, method in states]
    before = [await raw_item(store, payment) for payment in stored]
    refused = 0
    with count_calls() as count:
        for payment in stored:
            for target in S:
                if (payment.status, target, payment.method) in allowed:
                    continue
                # As a resolver does it: read, decide, write only what the table allows.
                current = await store.get(ref_of(payment))
                assert current is not None
                rule = Rule(current.status, target, frozenset(PaymentMethod))
                with pytest.raises(InvalidTransition):
                    updated = apply_transition(
                        current, request_for(rule), max_attempts=3, now=LATER
                    )
                    await stored_move(store, current, updated)
                refused += 1
    assert refused == len(states) * len(S) - len(allowed)
    assert set(count.operations) == {"GetItem"}
    assert [await raw_item(store, payment) for payment in stored] == before


# Races on DynamoDB Local only: moto's conditional writes are not atomic across its threads.
@pytest.mark.race
async def test_a_lost_race_is_a_conflict_naming_the_status_found(
    ddblocal_store: PaymentStore,
) -> None:
    store = ddblocal_store
    current = await stored_new(store, payment_in(S.PENDING, PaymentMethod.ACH))
    submit = next(rule for rule in RULES if (rule.source, rule.target) == (S.PENDING, S.ACHSENT))
    skip = next(rule for rule in RULES if (rule.source, rule.target) == (S.PENDING, S.SKIPPED))
    moves = [
        apply_transition(current, request_for(rule), max_attempts=3, now=LATER)
        for rule in (submit, skip)
    ]
    results = await asyncio.gather(
        *(stored_move(store, current, move) for move in moves), return_exceptions=True
    )
    [winner] = [result for result in results if isinstance(result, Payment)]
    [loser] = [result for result in results if isinstance(result, Conflict)]
    assert loser.found is winner.status
    assert await raw_item(store, current) == to_item(winner, store.layout)


async def test_a_same_status_race_is_caught_by_the_version(store: PaymentStore) -> None:
    current = await stored_new(store, payment_in(S.RETRY, PaymentMethod.PINLESS))
    again = next(rule for rule in RULES if (rule.source, rule.target) == (S.RETRY, S.RETRY))
    first = apply_transition(current, request_for(again), max_attempts=3, now=LATER)
    await stored_move(store, current, first)
    second = dataclasses.replace(first, update_reason="declined, seen by a slower job")
    with pytest.raises(Conflict) as conflict:
        await stored_move(store, current, second)
    assert conflict.value.found is S.RETRY
    assert await store.get(ref_of(current)) == first


async def test_moving_a_missing_payment_is_not_found_and_writes_nothing(
    store: PaymentStore,
) -> None:
    ghost = sample_payment()
    skip = next(rule for rule in RULES if (rule.source, rule.target) == (S.PENDING, S.SKIPPED))
    updated = apply_transition(ghost, request_for(skip), max_attempts=3, now=LATER)
    with pytest.raises(NotFound):
        await stored_move(store, ghost, updated)
    assert await raw_item(store, ghost) is None
