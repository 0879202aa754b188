"""The cost bounds the work, for any valid query (SPEC §21, turn 6): documents of the served
schema drawn by `hypothesis-graphql`, lifted as clients write them (`tests.api.lifted_documents`:
variables with defaults, named fragments), run against a store holding real data (loans of 45
payments, their histories, applications, the default sharded layouts). For each: the objects in
its answer are at most the engine's cost, the items its reads went through too, and
`QUERY_TOO_COSTLY` is decided the same whether its values come as defaults, as variables sent,
or as literals. `make test` runs a few examples; `make test-cost` many (`HYPOTHESIS_PROFILE=long`
and more)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from graphql import DocumentNode, StringValueNode, parse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_graphql import queries

from datasource import DynamoConfig, PaymentStore, event_item, to_item
from domain.enums import PaymentStatus
from domain.history import PaymentEvent, event_of
from domain.payment import LoanRef, Payment, PaymentRef
from domain.transitions import ApplicationRequest, TransitionRequest, apply_transition
from domain.validation import format_timestamp
from domain.webhooks import EVENT_TYPES
from engine import operation_cost
from resolvers.node_ids import loan_node_id, payment_node_id
from schema import build_schema, payments_limits
from tests.api.conftest import Api, Clock, api_client, error_codes
from tests.api.lifted_documents import Stored, lift
from tests.datasource.stored_items import put_items
from tests.hypothesis_profiles import examples
from tests.payment_samples import TEST_ACTOR, sample_payment

S = PaymentStatus
SERVED = build_schema().served
LOANS_PER_USER, PAYMENTS_PER_LOAN = 2, 45
# Below the default (10,000), so that drawn documents are refused as QUERY_TOO_COSTLY too.
MAX_COST = 300


def story(start: datetime) -> tuple[list[Payment], list[PaymentEvent]]:
    """Two users' loans of 45 payments each, a millisecond apart: left PENDING, presented
    (ACHSENT), completed over 1 to 12 installments, or skipped; every write's event."""
    payments, events = [], []
    at = start
    for user in ("alice", "bob"):
        for loan in range(LOANS_PER_USER):
            for n in range(PAYMENTS_PER_LOAN):
                at += timedelta(milliseconds=1)
                payment = sample_payment(user_id=user, loan_id=f"loan-{loan}")
                payment = dataclasses.replace(payment, created_at=at, updated_at=at)
                events.append(event_of(None, payment, TEST_ACTOR))
                for request in _moves(payment, n):
                    at += timedelta(milliseconds=1)
                    moved = apply_transition(payment, request, max_attempts=3, now=at)
                    events.append(event_of(payment, moved, TEST_ACTOR))
                    payment = moved
                payments.append(payment)
    return payments, events


def _moves(payment: Payment, n: int) -> list[TransitionRequest]:
    submit = TransitionRequest.checked(
        S.ACHSENT, "presented", confirmation_id=f"conf-{payment.payment_id}"
    )
    parts = 1 + n % 12
    share = payment.amount_cents // parts
    applications = [ApplicationRequest(f"inst-{k}", share) for k in range(parts - 1)]
    applications.append(
        ApplicationRequest(f"inst-{parts - 1}", payment.amount_cents - share * (parts - 1))
    )
    complete = TransitionRequest.checked(S.COMPLETED, "settled", applications=applications)
    return [
        [],
        [submit],
        [submit, complete],
        [TransitionRequest.checked(S.SKIPPED, "not needed")],
    ][n % 4]


@pytest.fixture
async def stored(
    moto_config: DynamoConfig, moto_store: PaymentStore, clock: Clock
) -> AsyncIterator[tuple[Api, Stored]]:
    """The service (no budgets: the engine's count is what is checked; a query limit that
    refuses some drawn documents) on a table seeded once for every example (they only read)."""
    async with api_client(
        moto_config,
        clock=clock,
        budgets=False,
        layout_refresh_seconds=600,
        max_query_cost=MAX_COST,
    ) as api:
        payments, events = story(clock.now - timedelta(hours=2))
        store = moto_store
        await put_items(
            store,
            [to_item(p, store.layout) for p in payments]
            + [event_item(e, store.feed_layout) for e in events],
        )
        refs = [PaymentRef(p.user_id, p.loan_id, p.payment_id) for p in payments[::7]]
        yield (
            api,
            Stored(
                users=("alice", "bob", "carol"),
                loans=tuple(f"loan-{n}" for n in range(LOANS_PER_USER + 1)),
                payments=tuple(ref.payment_id for ref in refs),
                confirmations=tuple(p.confirmation_id for p in payments[1::7] if p.confirmation_id),
                node_ids=tuple(payment_node_id(ref) for ref in refs)
                + tuple(loan_node_id(LoanRef(ref.user_id, ref.loan_id)) for ref in refs[:4]),
                event_types=EVENT_TYPES,
            ),
        )


def _date_times() -> st.SearchStrategy[StringValueNode]:
    moments = st.datetimes(
        min_value=datetime(2026, 1, 1), max_value=datetime(2026, 4, 1), timezones=st.just(UTC)
    )
    return moments.map(lambda moment: StringValueNode(value=format_timestamp(moment)))


def engine_cost(text: str, values: dict[str, Any]) -> int:
    return operation_cost(SERVED, parse(text), None, values, payments_limits())


def objects(value: Any) -> int:
    """The JSON objects in an answer's `data`, itself included."""
    if isinstance(value, dict):
        return 1 + sum(objects(inner) for inner in value.values())
    if isinstance(value, list):
        return sum(objects(inner) for inner in value)
    return 0


def _documents(fields: list[str] | None) -> st.SearchStrategy[DocumentNode]:
    return queries(
        SERVED,
        fields=fields,
        custom_scalars={"DateTime": _date_times()},
        print_ast=lambda document: document,
        allow_x00=False,
        codec="ascii",
    )


assert SERVED.query_type is not None
# Documents of one root field each (so that every one is drawn often), and of any of them.
DOCUMENTS = st.one_of(*(_documents([name]) for name in SERVED.query_type.fields), _documents(None))


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(document=DOCUMENTS, data=st.data())
async def test_a_query_s_cost_bounds_what_it_answers_and_reads(
    stored: tuple[Api, Stored], document: DocumentNode, data: st.DataObject
) -> None:
    api, holding = stored
    lifted = lift(SERVED, document, holding, data.draw)
    cost = engine_cost(lifted.text, {})
    assert engine_cost(lifted.text, lifted.values) == cost == engine_cost(lifted.literal, {})

    as_defaults = await api.post(lifted.text, debug=True)
    as_sent = await api.post(lifted.text, lifted.values, debug=True)
    costly = "QUERY_TOO_COSTLY"
    for body in (as_defaults, as_sent):
        assert (costly in error_codes(body)) == (cost > MAX_COST), lifted.text
    for body in (as_defaults, as_sent):
        answered = body.get("data")
        if answered is None:
            continue
        assert objects(answered) <= cost, lifted.text
        assert body["extensions"]["dynamodb"]["itemsRead"] <= cost, lifted.text
