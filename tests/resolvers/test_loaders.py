"""A request's loaders: what they read again after a write or a live event, and how they read."""

from __future__ import annotations

import gc
import weakref
from datetime import UTC, datetime
from typing import Any, cast

from datasource import EdgeOf, Page, PageOf, PaymentStore
from domain.enums import PaymentStatus
from domain.payment import LoanRef, Payment, PaymentRef
from resolvers.callers import Caller
from resolvers.context import Context
from resolvers.loaders import Loaders, LoanPageKey
from tests.payment_samples import sample_payment

STORED = sample_payment()
KEY = LoanPageKey(LoanRef(STORED.user_id, STORED.loan_id), None, 20, None)


class CountingStore:
    """The store's reads the loaders use, counted, with how consistent each was."""

    def __init__(self) -> None:
        self.lookups: list[tuple[list[PaymentRef], bool]] = []
        self.lists = 0

    async def batch_get(self, refs: list[PaymentRef], *, consistent: bool) -> list[Payment | None]:
        self.lookups.append((list(refs), consistent))
        return [STORED if ref == STORED.ref else None for ref in refs]

    async def loan_payments(self, loan: LoanRef, **_: Any) -> Page:
        self.lists += 1
        return PageOf([EdgeOf(STORED, lambda: "cursor")], has_next_page=False, end_cursor=None)


def loaders(store: CountingStore, *, consistent: bool = False) -> Loaders:
    return Loaders(cast(PaymentStore, store), consistent=consistent)


async def test_a_lookup_is_read_once_until_forgotten() -> None:
    store = CountingStore()
    request = loaders(store)

    assert await request.payment(STORED.ref) == STORED
    assert await request.payment(STORED.ref) == STORED
    request.forget(STORED.ref)
    assert await request.payment(STORED.ref) == STORED

    assert store.lookups == [([STORED.ref], False), ([STORED.ref], False)]


async def test_forgetting_what_was_never_read_is_nothing() -> None:
    store = CountingStore()
    request = loaders(store)

    request.forget(STORED.ref)
    request.forget_lists()

    assert await request.payment(STORED.ref) == STORED
    assert len(store.lookups) == 1


async def test_a_list_is_read_again_after_a_write() -> None:
    store = CountingStore()
    request = loaders(store)

    await request.loan_pages.load(KEY)
    await request.loan_pages.load(KEY)
    assert store.lists == 1
    request.forget_lists()
    await request.loan_pages.load(KEY)

    assert store.lists == 2


async def test_a_listed_payment_needs_no_lookup() -> None:
    store = CountingStore()
    request = loaders(store)

    await request.loan_pages.load(KEY)

    assert await request.payment(STORED.ref) == STORED
    assert store.lookups == []


async def test_reads_are_strong_once_asked_for() -> None:
    store = CountingStore()
    request = loaders(store)
    other = sample_payment(status=PaymentStatus.ACHSENT).ref

    await request.payment(other)
    request.read_strongly()
    request.forget(other)
    await request.payment(other)

    assert [consistent for _, consistent in store.lookups] == [False, True]
    assert request.consistent
    assert loaders(store, consistent=True).consistent


async def test_a_requests_loaders_go_with_it() -> None:
    """No cycle: a request's loaders, and what they read, are freed by reference counting, as
    soon as the request lets go of them, with the garbage collector off."""
    store = CountingStore()
    gc.disable()
    try:
        request = loaders(store)
        await request.payment(sample_payment().ref)
        await request.loan_pages.load(KEY)
        loaders_gone = weakref.ref(request)
        loader_gone = weakref.ref(request.loan_pages)
        del request
        assert loaders_gone() is None
        assert loader_gone() is None
    finally:
        gc.enable()


def test_a_context_makes_its_loaders_when_its_request_first_reads() -> None:
    """None for a request refused before it runs (over its budget: most of a flood of them);
    each operation of a WebSocket connection (`Context.fresh`) its own, as consistent."""
    context = Context(
        store=cast(PaymentStore, CountingStore()),
        max_attempts=1,
        clock=lambda: datetime.now(UTC),
        authenticated=Caller("alice"),
        strong_reads=True,
    )
    assert "loaders" not in vars(context)

    assert context.loaders is context.loaders and context.loaders.consistent
    operation = context.fresh()
    assert operation.loaders is not context.loaders and operation.loaders.consistent
