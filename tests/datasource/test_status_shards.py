"""GSI2 write sharding (SPEC §11): the same `paymentsByStatus` pages whatever the number of shards,
one Query per shard, and lists that stay complete while payments are in two layouts."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from datasource import PaymentStore, count_calls
from datasource.table import GSI2PK
from domain import keys
from domain.audit import Actor, ActorKind
from domain.enums import PaymentStatus
from domain.history import event_of
from domain.keys import StatusLayout
from domain.transitions import TransitionRequest, apply_transition
from tests.backends import CURSOR_SECRET, Backend, fresh_table
from tests.datasource.shard_pages import every_page, ids, mixed_payments, newest_first
from tests.datasource.stored_items import all_items, put_all
from tests.payment_samples import sample_payment


@pytest.fixture
def backend(ddblocal_backend: Backend) -> Backend:
    """DynamoDB Local only, not moto as well: these read many shards of many payments, and
    moto's Query goes through its whole table in Python (about 12 ms of this process's CPU a
    call, 3 with DynamoDB Local's JVM); the store's reads on moto are the other files' tests."""
    return ddblocal_backend


S = PaymentStatus
StoreOf = Callable[[StatusLayout], PaymentStore]


@pytest.fixture
async def store_of(backend: Backend) -> AsyncIterator[StoreOf]:
    """Stores on one fresh table, each with its own GSI2 layout."""
    table_name = await fresh_table(backend)

    def store(layout: StatusLayout) -> PaymentStore:
        return PaymentStore(
            backend.client, table_name=table_name, cursor_secret=CURSOR_SECRET, layout=layout
        )

    yield store
    await backend.client.delete_table(TableName=table_name)


@pytest.mark.parametrize("shards", [1, 4, 16])
async def test_the_same_pages_whatever_the_number_of_shards(store_of: StoreOf, shards: int) -> None:
    store = store_of(StatusLayout(shards))
    payments = mixed_payments(90)
    await put_all(store, payments)

    pending = await every_page(store, S.PENDING, first=7)

    # 45 PENDING payments: six full pages and one of three, newest first, each exact.
    assert [len(page.edges) for page in pending] == [7] * 6 + [3]
    assert [page.has_next_page for page in pending] == [True] * 6 + [False]
    assert [i for page in ids(pending) for i in page] == newest_first(payments, S.PENDING)
    retry = await every_page(store, S.RETRY, first=100)
    assert ids(retry) == [newest_first(payments, S.RETRY)]
    # Each item is in its payment's shard: PAYMENT alone with one shard, as the seed says.
    partitions = {item[GSI2PK]["S"] for item in await all_items(store) if GSI2PK in item}
    assert partitions <= set(keys.status_partitions(shards))
    assert len(partitions) == 1 if shards == 1 else len(partitions) > shards // 2
    for item in await all_items(store):
        if GSI2PK in item:
            expected = keys.status_partition(item["loc_payment_id"]["S"], shards)
            assert item[GSI2PK]["S"] == expected


@pytest.mark.parametrize("shards", [1, 4, 16])
async def test_the_same_pages_backward_whatever_the_number_of_shards(
    store_of: StoreOf, shards: int
) -> None:
    store = store_of(StatusLayout(shards))
    payments = mixed_payments(90)
    await put_all(store, payments)
    forward = await every_page(store, S.PENDING, first=5)

    backward = [await store.payments_by_status(status=S.PENDING, last=5)]
    while backward[-1].has_previous_page:
        before = backward[-1].edges[0].cursor
        backward.append(await store.payments_by_status(status=S.PENDING, last=5, before=before))

    # 45 PENDING payments: nine pages of 5 either way, the same pages in the other order.
    assert ids(backward[::-1]) == ids(forward)
    assert [i for page in ids(backward[::-1]) for i in page] == newest_first(payments, S.PENDING)
    assert [page.has_previous_page for page in backward] == [True] * 8 + [False]
    # From the middle: back from a forward page's start, forward from a backward page's end.
    middle = forward[4]
    back = await store.payments_by_status(status=S.PENDING, last=5, before=middle.edges[0].cursor)
    assert ids([back]) == ids([forward[3]])
    ahead = await store.payments_by_status(status=S.PENDING, first=5, after=back.end_cursor)
    assert ids([ahead]) == ids([middle])
    with count_calls() as calls:
        await store.payments_by_status(status=S.PENDING, last=5, before=middle.edges[0].cursor)
    assert calls.operations["Query"] >= shards and calls.list_rounds <= 3


@pytest.mark.parametrize("shards", [1, 4, 16])
async def test_a_page_asks_every_shard_at_once_in_at_most_three_rounds(
    store_of: StoreOf, shards: int
) -> None:
    store = store_of(StatusLayout(shards))
    await put_all(store, mixed_payments(40))
    first_page = await store.payments_by_status(status=S.PENDING, first=5, after=None)
    with count_calls() as calls:
        await store.payments_by_status(status=S.PENDING, first=5, after=first_page.end_cursor)
    # One Query with one shard, as the seed's layout always made; with more, each shard in the
    # first round and only some in the next (a lazy merge).
    assert calls.operations["Query"] == 1 if shards == 1 else shards <= calls.operations["Query"]
    assert calls.operations["Query"] < 2 * shards and calls.list_rounds <= 3


async def test_a_cursor_made_with_one_shard_continues_in_any_layout_that_reads_it(
    store_of: StoreOf,
) -> None:
    seed = store_of(StatusLayout(1))
    payments = mixed_payments(40)
    await put_all(seed, payments)
    first_page = await seed.payments_by_status(status=S.PENDING, first=6, after=None)

    during = store_of(StatusLayout(4, also_read=(1,)))
    rest = await during.payments_by_status(status=S.PENDING, first=100, after=first_page.end_cursor)

    assert ids([first_page, rest]) == [
        newest_first(payments, S.PENDING)[:6],
        newest_first(payments, S.PENDING)[6:],
    ]


async def test_half_in_each_layout_every_payment_is_listed_once(store_of: StoreOf) -> None:
    payments = mixed_payments(60)
    # Every fourth one (half the PENDING ones) still in the seed's layout: a reshard halfway.
    await put_all(store_of(StatusLayout(1)), payments[0::4])
    await put_all(store_of(StatusLayout(4)), [p for n, p in enumerate(payments) if n % 4])

    during = store_of(StatusLayout(4, also_read=(1,)))
    pages = await every_page(during, S.PENDING, first=4)

    assert [i for page in ids(pages) for i in page] == newest_first(payments, S.PENDING)
    assert all(len(page.edges) == 4 for page in pages[:-1])
    # Without the old layout, the payments still in it are missing: the setting matters.
    only_new = await every_page(store_of(StatusLayout(4)), S.PENDING, first=100)
    assert len(ids(only_new)[0]) < len(newest_first(payments, S.PENDING))


async def test_a_move_puts_the_payment_in_its_shard_of_the_layout_written_now(
    store_of: StoreOf,
) -> None:
    old = store_of(StatusLayout(1))
    payment = sample_payment()
    await put_all(old, [payment])
    new = store_of(StatusLayout(16, also_read=(1,)))
    request = TransitionRequest.checked(S.SKIPPED, "customer asked")
    updated = apply_transition(payment, request, max_attempts=3, now=payment.updated_at)
    event = event_of(payment, updated, Actor(ActorKind.SERVICE, "svc", None))
    await new.transition(payment, updated, event=event)

    [item] = [i for i in await all_items(new) if i["SK"]["S"].startswith("LOAN#")]
    assert item[GSI2PK]["S"] == keys.status_partition(payment.payment_id, 16)
    listed = await new.payments_by_status(status=S.SKIPPED, first=10, after=None)
    assert ids([listed]) == [[payment.payment_id]]
