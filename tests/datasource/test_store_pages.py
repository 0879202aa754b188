"""The three list patterns: newest first, pages filled exactly, cursors that continue."""

import dataclasses
import itertools
from typing import Any

import pytest

from datasource import HistoryPage, Page, PageOf, PaymentStore, count_calls
from datasource.history import event_item, history_query
from datasource.items import Item
from datasource.store import loan_query, status_query
from domain import keys
from domain.audit import Actor, ActorKind
from domain.enums import PaymentMethod, PaymentStatus
from domain.errors import InvalidCursor
from domain.history import event_of
from domain.payment import LoanRef, Payment
from tests.datasource.stored_items import put_all, put_items
from tests.payment_samples import sample_payment

S = PaymentStatus


async def _seed(store: PaymentStore, payments: list[Payment]) -> list[Payment]:
    await put_all(store, payments)
    return payments


def _ids(page: Page) -> list[str]:
    return [edge.node.payment_id for edge in page.edges]


def _newest_first(payments: list[Payment]) -> list[str]:
    return [payment.payment_id for payment in reversed(payments)]


async def _every_page(fetch: Any, first: int) -> list[Page]:
    pages = [await fetch(first=first, after=None)]
    while pages[-1].has_next_page:
        pages.append(await fetch(first=first, after=pages[-1].end_cursor))
    return pages


async def test_a_loans_payments_come_newest_first_over_several_pages(store: PaymentStore) -> None:
    mine = await _seed(store, [sample_payment() for _ in range(7)])
    # Same user, a loan whose id extends ours; another user's loan of the same id.
    await _seed(store, [sample_payment(loan_id="loan-12"), sample_payment(user_id="bob")])

    async def fetch(*, first: int, after: str | None) -> Page:
        return await store.loan_payments(
            LoanRef("alice", "loan-1"), status=None, first=first, after=after
        )

    pages = await _every_page(fetch, first=3)
    assert [len(page.edges) for page in pages] == [3, 3, 1]
    assert [page.has_next_page for page in pages] == [True, True, False]
    assert [id for page in pages for id in _ids(page)] == _newest_first(mine)
    assert all(page.end_cursor == page.edges[-1].cursor for page in pages)


async def test_has_next_page_is_exact_at_the_boundary(store: PaymentStore) -> None:
    mine = await _seed(store, [sample_payment() for _ in range(6)])
    list_all = store.loan_payments
    whole = await list_all(LoanRef("alice", "loan-1"), status=None, first=6, after=None)
    assert (_ids(whole), whole.has_next_page) == (_newest_first(mine), False)
    short = await list_all(LoanRef("alice", "loan-1"), status=None, first=5, after=None)
    assert short.has_next_page
    last = await list_all(LoanRef("alice", "loan-1"), status=None, first=1, after=short.end_cursor)
    assert (_ids(last), last.has_next_page) == ([mine[0].payment_id], False)


async def test_any_edge_cursor_continues_right_after_its_edge(store: PaymentStore) -> None:
    mine = await _seed(store, [sample_payment() for _ in range(5)])
    page = await store.loan_payments(LoanRef("alice", "loan-1"), status=None, first=5, after=None)
    for position, edge in enumerate(page.edges):
        rest = await store.loan_payments(
            LoanRef("alice", "loan-1"), status=None, first=5, after=edge.cursor
        )
        assert _ids(rest) == _newest_first(mine)[position + 1 :]


async def test_an_empty_list_is_one_empty_page(store: PaymentStore) -> None:
    page = await store.loan_payments(LoanRef("alice", "loan-1"), status=None, first=10, after=None)
    assert page == PageOf(edges=[], has_next_page=False, end_cursor=None)


async def test_a_loans_payments_in_one_status_use_gsi1(store: PaymentStore) -> None:
    pending = [sample_payment() for _ in range(5)]
    others = [sample_payment(status=S.RETRY), sample_payment(loan_id="loan-2")]
    await _seed(store, pending[:2] + others + pending[2:])

    async def fetch(*, first: int, after: str | None) -> Page:
        return await store.loan_payments(
            LoanRef("alice", "loan-1"), status=S.PENDING, first=first, after=after
        )

    pages = await _every_page(fetch, first=2)
    assert [len(page.edges) for page in pages] == [2, 2, 1]
    assert [id for page in pages for id in _ids(page)] == _newest_first(pending)
    retry = await store.loan_payments(
        LoanRef("alice", "loan-1"), status=S.RETRY, first=10, after=None
    )
    assert _ids(retry) == [others[0].payment_id]


async def test_all_payments_in_one_status_use_gsi2_across_users(store: PaymentStore) -> None:
    completed = [
        sample_payment(user_id=user, status=S.COMPLETED, method=PaymentMethod.PINLESS)
        for user in ("alice", "bob", "carol", "alice", "dave")
    ]
    await _seed(store, [sample_payment(), *completed, sample_payment(status=S.CHARGED_BACK)])

    async def fetch(*, first: int, after: str | None) -> Page:
        return await store.payments_by_status(status=S.COMPLETED, first=first, after=after)

    pages = await _every_page(fetch, first=2)
    assert [len(page.edges) for page in pages] == [2, 2, 1]
    assert [id for page in pages for id in _ids(page)] == _newest_first(completed)


async def test_a_page_is_filled_even_when_dynamodb_stops_early(
    store: PaymentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = await _seed(store, [sample_payment() for _ in range(7)])
    real_query = store.client.query

    async def short_query(**parameters: Any) -> Any:
        # As DynamoDB does at its 1 MB limit: fewer items than asked, with a LastEvaluatedKey.
        return await real_query(**(parameters | {"Limit": min(parameters["Limit"], 2)}))

    monkeypatch.setattr(store.client, "query", short_query)
    with count_calls() as count:
        page = await store.loan_payments(
            LoanRef("alice", "loan-1"), status=None, first=5, after=None
        )
    assert _ids(page) == _newest_first(mine)[:5]
    assert page.has_next_page
    assert count.operations == {"Query": 3}  # 2 + 2 + 2 items: the page and one more


async def test_cursors_are_refused_on_every_other_list(store: PaymentStore) -> None:
    await _seed(
        store,
        [
            *(sample_payment() for _ in range(2)),
            *(sample_payment(status=S.COMPLETED) for _ in range(2)),
            *(sample_payment(loan_id="loan-2") for _ in range(2)),
            *(sample_payment(user_id="bob") for _ in range(2)),
        ],
    )
    lists: dict[str, Any] = {
        "alice/loan-1": lambda **page: store.loan_payments(
            LoanRef("alice", "loan-1"), status=None, **page
        ),
        "alice/loan-2": lambda **page: store.loan_payments(
            LoanRef("alice", "loan-2"), status=None, **page
        ),
        "bob/loan-1": lambda **page: store.loan_payments(
            LoanRef("bob", "loan-1"), status=None, **page
        ),
        "alice/loan-1/PENDING": lambda **page: store.loan_payments(
            LoanRef("alice", "loan-1"), status=S.PENDING, **page
        ),
        "alice/loan-1/COMPLETED": lambda **page: store.loan_payments(
            LoanRef("alice", "loan-1"), status=S.COMPLETED, **page
        ),
        "bob/loan-1/PENDING": lambda **page: store.loan_payments(
            LoanRef("bob", "loan-1"), status=S.PENDING, **page
        ),
        "PENDING": lambda **page: store.payments_by_status(status=S.PENDING, **page),
        "COMPLETED": lambda **page: store.payments_by_status(status=S.COMPLETED, **page),
    }
    cursors = {}
    for name, fetch in lists.items():
        page = await fetch(first=1, after=None)
        assert page.has_next_page, name
        cursors[name] = page.end_cursor
        assert (await fetch(first=1, after=page.end_cursor)).edges, name
    with count_calls() as count:
        for name, fetch in lists.items():
            for other, cursor in cursors.items():
                if other != name:
                    with pytest.raises(InvalidCursor):
                        await fetch(first=1, after=cursor)
                    with pytest.raises(InvalidCursor) as backward:
                        await fetch(last=1, before=cursor)
                    assert backward.value.field == "before"
    assert count.requests == 0


async def test_a_tampered_cursor_is_refused(store: PaymentStore) -> None:
    await _seed(store, [sample_payment() for _ in range(2)])
    page = await store.payments_by_status(status=S.PENDING, first=1, after=None)
    assert page.end_cursor is not None
    cursor = page.end_cursor
    for altered in (
        cursor[:-1],
        cursor + "A",
        cursor[::-1],
        cursor.replace(cursor[5], "x" if cursor[5] != "x" else "y", 1),
    ):
        with pytest.raises(InvalidCursor):
            await store.payments_by_status(status=S.PENDING, first=1, after=altered)
    other_secret = type(store)(store.client, table_name=store.table_name, cursor_secret=b"other")
    with pytest.raises(InvalidCursor):
        await other_secret.payments_by_status(status=S.PENDING, first=1, after=cursor)


# Loans whose keys sort right next to loan `1`'s, on both sides of its prefix and of the range's
# end (`keys.prefix_end`): `!` and `"` sort before `#`, `$` is the end's own character.
NEIGHBOUR_LOANS = ("1", "12", "1!", '1"', "1$", "1$x", "0", "2")


async def _all_items(store: PaymentStore, parameters: dict[str, Any]) -> list[Item]:
    items: list[Item] = []
    start: dict[str, Any] = {}
    while True:
        response = await store.client.query(**parameters, **start)
        items += response["Items"]
        if "LastEvaluatedKey" not in response:
            return items
        start = {"ExclusiveStartKey": response["LastEvaluatedKey"]}


async def test_every_list_s_key_range_finds_exactly_what_begins_with_finds(
    store: PaymentStore,
) -> None:
    """The lists ask for their sort-key prefix as a range (`BETWEEN`), which DynamoDB Local reads
    through its index; on either backend it must select what `begins_with` selects, among keys
    that sort right next to the prefix, in the same order."""
    payments = [
        sample_payment(user_id="alice", loan_id=loan, status=status)
        for loan in NEIGHBOUR_LOANS
        for status in (S.PENDING, S.RETRY, S.PENDING)
    ]
    await put_all(store, payments)
    actor = Actor(ActorKind.SERVICE, "svc", None)
    await put_items(store, [event_item(event_of(None, payment, actor)) for payment in payments])
    one = payments[0]
    queries = {
        "a loan": loan_query(LoanRef("alice", "1"), None),
        "a loan in one status": loan_query(LoanRef("alice", "1"), S.PENDING),
        "one status": status_query(S.PENDING, keys.GSI2_PARTITION),
        "a payment's history": history_query(one.ref),
    }
    for name, query in queries.items():
        parameters: dict[str, Any] = {**query.parameters(store.table_name), "Limit": 5}
        assert "BETWEEN" in parameters["KeyConditionExpression"]
        as_prefix = {
            **parameters,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
            "ExpressionAttributeValues": {
                name: value
                for name, value in parameters["ExpressionAttributeValues"].items()
                if name != ":end"
            },
        }
        expected = await _all_items(store, as_prefix)
        assert expected, name
        assert await _all_items(store, parameters) == expected, name
    # And what a caller sees: loan `1`'s payments, none of its neighbours'.
    page = await store.loan_payments(LoanRef("alice", "1"), status=None, first=50, after=None)
    assert sorted(_ids(page)) == sorted(p.payment_id for p in payments if p.loan_id == "1")


def test_a_prefix_s_range_ends_at_its_delimiter_s_successor() -> None:
    assert keys.prefix_end("LOAN#1#PAYMENT#") == "LOAN#1#PAYMENT$"
    with pytest.raises(ValueError, match="ends in '#'"):
        keys.prefix_end("LOAN#1")


# -- Backward (`last`, `before`) -----------------------------------------------------------------


async def _every_page_backward(fetch: Any, last: int) -> list[Page]:
    """From the list's end back to its start: the pages in the order read (last page first)."""
    pages = [await fetch(last=last, before=None)]
    while pages[-1].has_previous_page:
        start = pages[-1].edges[0].cursor
        pages.append(await fetch(last=last, before=start))
    return pages


def _keys(page: PageOf[Any]) -> list[Any]:
    return [
        edge.node.payment_id if isinstance(edge.node, Payment) else edge.node.version
        for edge in page.edges
    ]


async def _both_ways(fetch: Any, expected: list[Any]) -> None:
    """Pages of 5 forward and backward over one list: the same items in the same order, every
    page exact at its far end, and each page's cursors continuing the other way."""
    forward = []
    page = await fetch(first=5, after=None)
    forward.append(page)
    while page.has_next_page:
        page = await fetch(first=5, after=page.end_cursor)
        forward.append(page)
    backward = await _every_page_backward(fetch, last=5)
    sizes = [len(page.edges) for page in forward]
    assert [k for page in forward for k in _keys(page)] == expected
    assert [k for page in reversed(backward) for k in _keys(page)] == expected
    assert [len(page.edges) for page in reversed(backward)] == sizes[::-1]
    # The far end exact; the near one says whether a cursor was given.
    assert [page.has_previous_page for page in backward] == [True] * (len(backward) - 1) + [False]
    assert [page.has_next_page for page in backward] == [False] + [True] * (len(backward) - 1)
    assert [page.has_previous_page for page in forward] == [False] + [True] * (len(forward) - 1)
    # A forward page's start cursor, paged back, gives the page before it exactly.
    for previous, page in itertools.pairwise(forward):
        back = await fetch(last=5, before=page.edges[0].cursor)
        assert _keys(back) == _keys(previous)
        assert back.has_previous_page == previous.has_previous_page
        assert back.has_next_page
        # And a backward page's end cursor, paged forward, gives what follows it.
        ahead = await fetch(first=5, after=back.end_cursor)
        assert _keys(ahead) == _keys(page)


async def test_a_loans_payments_page_both_ways_next_to_neighbouring_keys(
    store: PaymentStore,
) -> None:
    mine = [sample_payment(loan_id="1") for _ in range(12)]
    neighbours = [sample_payment(loan_id=loan) for loan in NEIGHBOUR_LOANS[1:] for _ in range(2)]
    await put_all(store, mine + neighbours)

    async def fetch(**page: Any) -> Page:
        return await store.loan_payments(LoanRef("alice", "1"), status=None, **page)

    await _both_ways(fetch, _newest_first(mine))


async def test_a_loans_payments_in_one_status_page_both_ways(store: PaymentStore) -> None:
    pending = [sample_payment(loan_id="1") for _ in range(11)]
    others = [
        *(sample_payment(loan_id="1", status=S.RETRY) for _ in range(3)),
        *(sample_payment(loan_id=loan) for loan in NEIGHBOUR_LOANS[1:]),
    ]
    await put_all(store, pending[:4] + others + pending[4:])

    async def fetch(**page: Any) -> Page:
        return await store.loan_payments(LoanRef("alice", "1"), status=S.PENDING, **page)

    await _both_ways(fetch, _newest_first(pending))


async def test_one_status_pages_both_ways(store: PaymentStore) -> None:
    completed = [
        sample_payment(user_id=f"user-{n % 3}", status=S.COMPLETED, method=PaymentMethod.PINLESS)
        for n in range(13)
    ]
    await put_all(store, [sample_payment(), *completed, sample_payment(status=S.CHARGED_BACK)])

    async def fetch(**page: Any) -> Page:
        return await store.payments_by_status(status=S.COMPLETED, **page)

    await _both_ways(fetch, _newest_first(completed))


async def test_a_payments_history_pages_both_ways_next_to_neighbouring_keys(
    store: PaymentStore,
) -> None:
    actor = Actor(ActorKind.SERVICE, "svc", None)
    one = sample_payment(loan_id="1")
    events = [
        event_of(None, dataclasses.replace(one, version=version), actor) for version in range(1, 13)
    ]
    neighbours = [
        event_of(None, sample_payment(loan_id=loan), actor) for loan in NEIGHBOUR_LOANS[1:]
    ]
    await put_items(store, [event_item(event) for event in events + neighbours])

    async def fetch(**page: Any) -> HistoryPage:
        return await store.history(one.ref, **page)

    await _both_ways(fetch, list(range(1, 13)))  # oldest first


async def test_a_page_backward_is_one_query(store: PaymentStore) -> None:
    await put_all(store, [sample_payment() for _ in range(9)])
    loan = LoanRef("alice", "loan-1")
    end = await store.loan_payments(loan, status=None, first=3, after=None)
    with count_calls() as count:
        back = await store.loan_payments(loan, status=None, last=3)
        await store.loan_payments(loan, status=None, last=3, before=back.edges[0].cursor)
        await store.loan_payments(loan, status=None, last=3, before=end.end_cursor)
    assert count.operations == {"Query": 3}
