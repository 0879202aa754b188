"""GSI2's list of one status read group by group (the collection job's read): the groups hold
each payment once, each newest first, in any layout and halfway through a reshard; between
reshards a group's page is one Query."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from datasource import PaymentStore, StatusPosition, count_calls
from domain.enums import PaymentStatus
from domain.keys import StatusLayout, status_shard
from tests.backends import CURSOR_SECRET, Backend, fresh_table
from tests.datasource.shard_pages import mixed_payments, newest_first
from tests.datasource.stored_items import put_all

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


async def every_group(store: PaymentStore, first: int) -> dict[int, list[str]]:
    """Each group's RETRY payment ids, page after page, and that each page came after the last."""
    modulus = await store.status_group_modulus()
    found: dict[int, list[str]] = {}
    for group in range(modulus):
        after: StatusPosition | None = None
        found[group] = []
        while True:
            page = await store.payments_by_status_group(
                status=S.RETRY, modulus=modulus, group=group, first=first, after=after
            )
            assert len(page.payments) <= first
            assert all(after is None or after > at for at, _ in page.payments)
            found[group] += [payment.payment_id for _, payment in page.payments]
            if page.done:
                break
            after = page.end
    return found


@pytest.mark.parametrize(
    ("written_in", "moved_to", "modulus"),
    [
        (StatusLayout(1), None, 1),
        (StatusLayout(16), None, 16),
        # Halfway through reshards: 1 -> 4, 4 -> 16, 16 -> 24 (by gcd, 8 groups).
        (StatusLayout(1), StatusLayout(4, also_read=(1,)), 1),
        (StatusLayout(4), StatusLayout(16, also_read=(4,)), 4),
        (StatusLayout(16), StatusLayout(24, also_read=(16,)), 8),
    ],
)
async def test_the_groups_hold_each_payment_once_newest_first(
    store_of: StoreOf, written_in: StatusLayout, moved_to: StatusLayout | None, modulus: int
) -> None:
    payments = mixed_payments(160)
    await put_all(store_of(written_in), payments)
    store = store_of(written_in)
    if moved_to is not None:
        # Every other payment moved already (each put in its partition of the new layout).
        store = store_of(moved_to)
        await put_all(store, payments[::2])

    groups = await every_group(store, first=7)

    assert len(groups) == modulus
    retry = newest_first(payments, S.RETRY)
    for group, listed in groups.items():
        assert listed == [i for i in retry if status_shard(i, modulus) == group]


async def test_between_reshards_a_groups_page_is_one_query(store_of: StoreOf) -> None:
    store = store_of(StatusLayout(16))
    payments = mixed_payments(160)
    await put_all(store, payments)
    assert await store.status_group_modulus() == 16

    with count_calls() as calls:
        groups = await every_group(store, first=100)

    assert calls.operations == {"Query": 16}
    assert sum(len(listed) for listed in groups.values()) == len(newest_first(payments, S.RETRY))


async def test_a_modulus_the_layouts_no_longer_divide_still_reads_its_group_alone(
    store_of: StoreOf,
) -> None:
    # Read with 4 groups while the layouts are 6 shards (their modulus changed meanwhile).
    store = store_of(StatusLayout(6))
    payments = mixed_payments(160)
    await put_all(store, payments)
    groups = {}
    for group in range(4):
        page = await store.payments_by_status_group(
            status=S.RETRY, modulus=4, group=group, first=100, after=None
        )
        assert page.done
        groups[group] = [payment.payment_id for _, payment in page.payments]

    retry = newest_first(payments, S.RETRY)
    assert groups == {g: [i for i in retry if status_shard(i, 4) == g] for g in range(4)}
