"""The benchmark's fake DynamoDB answers the store's reads exactly as DynamoDB (moto) does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from bench import data
from bench.fake_dynamodb import FakeDynamoDB, as_client
from datasource import Page, PaymentStore, count_calls
from domain.enums import PaymentStatus
from domain.payment import LoanRef, PaymentRef
from tests.backends import CURSOR_SECRET

ITEMS = list(data.items(users=range(2), loans_per_user=2, payments_per_loan=7))
MISSING = PaymentRef("user-0000", "loan-00", "00000000-0000-7000-8000-000000000000")


async def every_page(fetch: Callable[..., Awaitable[Page]], first: int) -> list[Page]:
    pages = [await fetch(first=first, after=None)]
    while pages[-1].has_next_page:
        pages.append(await fetch(first=first, after=pages[-1].end_cursor))
    return pages


async def status_lists(store: PaymentStore) -> list[list[Page]]:
    return [
        await every_page(partial(store.payments_by_status, status=status), first=4)
        for status in PaymentStatus
    ]


async def other_reads(store: PaymentStore) -> list[Any]:
    """Loan lists (a loan id that prefixes others, and by status), lookups, a missing key."""
    loan_lists = [
        await every_page(partial(store.loan_payments, LoanRef(user, loan), status=status), first=3)
        for user in ("user-0000", "user-0001")
        for loan in ("loan-00", "loan-01", "loan-0")
        for status in (None, PaymentStatus.PENDING, PaymentStatus.RETRY)
    ]
    refs = [
        PaymentRef(item["loc_user_id"]["S"], item["loc_loan_id"]["S"], item["loc_payment_id"]["S"])
        for item in ITEMS[::5]
    ]
    return [
        loan_lists,
        await store.batch_get([*refs, MISSING]),
        await store.get(refs[0]),
        await store.payment_by_confirmation(user_id="user-0000", confirmation_id="ach-1"),
    ]


async def test_the_fake_answers_every_read_as_dynamodb_does(moto_store: PaymentStore) -> None:
    await data.load(moto_store.client, moto_store.table_name, iter(ITEMS))
    fake = FakeDynamoDB(moto_store.table_name, ITEMS, latency=0)
    fake_store = PaymentStore(
        as_client(fake), table_name=moto_store.table_name, cursor_secret=CURSOR_SECRET
    )

    with count_calls() as calls:
        by_status = await status_lists(fake_store)
        others = await other_reads(fake_store)

    # The benchmark's items are in the seed's one-shard layout, as the fake (and the Node peer)
    # reads them; moto_store writes the service's default shards.
    seed_layout = PaymentStore(
        moto_store.client, table_name=moto_store.table_name, cursor_secret=CURSOR_SECRET
    )
    assert by_status == await status_lists(seed_layout)
    assert others == await other_reads(seed_layout)
    assert sum(len(page.edges) for pages in by_status for page in pages) == len(ITEMS)
    assert calls.requests == sum(fake.calls.values())
    assert set(calls.operations) == {"Query", "BatchGetItem", "GetItem"}
