"""Spans of the datasource (issue 32): a lookup shared by several requests is one span, a child
of the first caller's and linked to every caller's, each caller's linked back; a lookup of one
request is its own call, its DynamoDB span the request's child; and a store without a tracer
makes none."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from datasource import DynamoConfig, PaymentStore
from datasource.client import open_client
from domain.payment import Payment
from tests.backends import CURSOR_SECRET
from tests.datasource.stored_items import put_all
from tests.payment_samples import ref_of, sample_payment
from tests.spans import Spans


@pytest.fixture
async def traced(moto_config: DynamoConfig) -> AsyncIterator[tuple[PaymentStore, Spans]]:
    """A coalescing store with a tracer, on a client of its own (its hooks stay on it)."""
    spans = Spans()
    async with open_client(moto_config) as client:
        store = PaymentStore(
            client,
            table_name=moto_config.table_name,
            cursor_secret=CURSOR_SECRET,
            coalesce=True,
            tracer=spans.provider.get_tracer("test"),
        )
        yield store, spans
    spans.provider.shutdown()


async def _lookup(store: PaymentStore, spans: Spans, name: str, payment: Payment) -> None:
    """One request's lookup, under a span of its own (as a DataLoader batch is)."""
    with spans.provider.get_tracer("test").start_as_current_span(name):
        assert await store.batch_get([ref_of(payment)], consistent=False) == [payment]


async def test_a_shared_lookup_is_one_span_linked_to_each_caller(
    traced: tuple[PaymentStore, Spans],
) -> None:
    store, spans = traced
    payments = [sample_payment(user_id=f"user-{n}") for n in range(3)]
    await put_all(store, payments)
    spans.clear()

    names = [f"request-{n}" for n in range(3)]
    await asyncio.gather(
        *(_lookup(store, spans, n, p) for n, p in zip(names, payments, strict=True))
    )

    by_name = {span.name: span for span in spans.finished()}
    assert sorted(by_name) == sorted(["coalesced lookup", "DynamoDB.BatchGetItem", *names])
    group, call = by_name["coalesced lookup"], by_name["DynamoDB.BatchGetItem"]
    assert spans.chain(call) == ["DynamoDB.BatchGetItem", "coalesced lookup", "request-0"]
    assert group.attributes is not None
    assert (group.attributes["loc.coalesce.callers"], group.attributes["loc.coalesce.keys"]) == (
        3,
        3,
    )
    callers = {by_name[name].context.span_id for name in names}
    assert {link.context.span_id for link in group.links} == callers
    for name in names:
        assert [link.context.span_id for link in by_name[name].links] == [group.context.span_id]
    assert call.attributes is not None
    assert call.attributes["loc.dynamodb.items"] == 3


async def test_a_lookup_of_one_request_is_its_own_call(
    traced: tuple[PaymentStore, Spans],
) -> None:
    store, spans = traced
    payment = sample_payment()
    await put_all(store, [payment])
    spans.clear()

    await _lookup(store, spans, "request", payment)

    [call] = [span for span in spans.finished() if span.name == "DynamoDB.GetItem"]
    assert spans.chain(call) == ["DynamoDB.GetItem", "request"]
    assert len(spans.finished()) == 2


async def test_a_call_outside_any_trace_makes_no_span(traced: tuple[PaymentStore, Spans]) -> None:
    store, spans = traced
    payment = sample_payment()
    await put_all(store, [payment])

    assert await store.batch_get([ref_of(payment)]) == [payment]
    assert spans.finished() == ()


async def test_a_store_without_a_tracer_makes_no_span_even_inside_a_trace(
    moto_config: DynamoConfig,
) -> None:
    spans = Spans()
    payment = sample_payment()
    async with open_client(moto_config) as client:
        store = PaymentStore(client, table_name=moto_config.table_name, cursor_secret=CURSOR_SECRET)
        await put_all(store, [payment])
        await _lookup(store, spans, "request", payment)
    assert [span.name for span in spans.finished()] == ["request"]
