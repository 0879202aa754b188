"""No hot key (SPEC §20): `paymentsByStatus` and the events feed answer over any number of shards
exactly what they answer with one (order, cursors, both directions, filters, settling), each feed
range read in its own layout; a page of 100 at the defaults costs at most 3 rounds of Queries and
a one-shard page's units + 0.5 per shard; a table holding the seed's one-shard data stays whole
under the default settings until its reshard ends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datasource import Page, PaymentStore, count_calls
from datasource.events import feed_start
from domain import keys
from domain.enums import PaymentStatus
from domain.history import PaymentEvent
from domain.keys import FeedLayout, StatusLayout
from domain.payment import Payment
from tests.backends import CURSOR_SECRET, Backend, fresh_table
from tests.datasource.shard_pages import ids
from tests.datasource.sharded_tables import event_ids, lives, position, seed
from tests.hypothesis_profiles import examples
from tests.payment_samples import sample_payment


@pytest.fixture
def backend(ddblocal_backend: Backend) -> Backend:
    """DynamoDB Local only, not moto as well: these read many shards of many payments, and
    moto's Query goes through its whole table in Python (about 12 ms of this process's CPU a
    call, 3 with DynamoDB Local's JVM); the store's reads on moto are the other files' tests."""
    return ddblocal_backend


S = PaymentStatus
EVENT_TYPES = ["payment.created", "payment.skipped", "payment.retry", "payment.achsent"]


class Tables:
    """Tables of the test's own, each read and written by stores of given layouts; the pair an
    example-drawing test seeds once and reads in every example."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.names: list[str] = []
        self.pair: tuple[PaymentStore, PaymentStore] | None = None
        self.events: list[PaymentEvent] = []

    async def new_table(self) -> None:
        self.names.append(await fresh_table(self.backend))

    def store(self, status: StatusLayout, feed: FeedLayout) -> PaymentStore:
        """A store on the newest table."""
        return PaymentStore(
            self.backend.client,
            table_name=self.names[-1],
            cursor_secret=CURSOR_SECRET,
            layout=status,
            feed=feed,
        )

    async def seeded_pair(self, shards: int, count: int) -> tuple[PaymentStore, PaymentStore]:
        """The same payments and events in the seed's layouts and in `shards` shards, the feed
        changing to half as many from the middle of its events on (made once)."""
        if self.pair is None:
            payments, self.events = lives(count)
            await self.new_table()
            one = self.store(keys.SEED_LAYOUT, keys.SEED_FEED)
            await seed(one, payments, self.events)
            middle = self.events[len(self.events) // 2].at
            await self.new_table()
            feed = FeedLayout.of(shards).then(position(middle), max(1, shards // 2))
            many = self.store(StatusLayout(shards), feed)
            await seed(many, payments, self.events)
            self.pair = (one, many)
        return self.pair


@pytest.fixture
async def tables(backend: Backend) -> AsyncIterator[Tables]:
    made = Tables(backend)
    yield made
    for table in made.names:
        await backend.client.delete_table(TableName=table)


EXAMPLE_SETTINGS = settings(
    max_examples=examples(6),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.mark.parametrize("shards", [1, 3, 32, 64])
@EXAMPLE_SETTINGS
@given(data=st.data())
async def test_payments_by_status_answers_what_one_shard_answers(
    tables: Tables, shards: int, data: st.DataObject
) -> None:
    one, many = await tables.seeded_pair(shards, 90)
    status = data.draw(st.sampled_from([S.PENDING, S.RETRY, S.ACHSENT, S.SKIPPED]))
    size = data.draw(st.integers(1, 100))
    backward = data.draw(st.booleans())
    # From the start, or from the cursor of the n-th payment of a first page.
    skip = data.draw(st.integers(0, 40))

    async def page(store: PaymentStore, count: int, cursor: str | None) -> Page:
        if backward:
            return await store.payments_by_status(status=status, last=count, before=cursor)
        return await store.payments_by_status(status=status, first=count, after=cursor)

    async def pages(store: PaymentStore) -> list[Page]:
        answers = []
        cursor = None
        if skip:
            head = await page(store, skip, None)
            answers.append(head)
            cursor = (head.edges[0].cursor if backward else head.end_cursor) if head.edges else None
        for _ in range(3):
            answer = await page(store, size, cursor)
            answers.append(answer)
            more = answer.has_previous_page if backward else answer.has_next_page
            if not more or not answer.edges:
                break
            cursor = answer.edges[0].cursor if backward else answer.end_cursor
        return answers

    expected, got = await pages(one), await pages(many)
    assert ids(got) == ids(expected)
    flags = [(p.has_next_page, p.has_previous_page) for p in expected]
    assert [(p.has_next_page, p.has_previous_page) for p in got] == flags


@pytest.mark.parametrize("shards", [1, 3, 32, 64])
@EXAMPLE_SETTINGS
@given(data=st.data())
async def test_the_events_feed_answers_what_one_shard_answers(
    tables: Tables, shards: int, data: st.DataObject
) -> None:
    one, many = await tables.seeded_pair(shards, 70)
    times = sorted({event.at for event in tables.events})
    size = data.draw(st.integers(1, 100))
    types = data.draw(st.none() | st.lists(st.sampled_from(EVENT_TYPES), min_size=1, unique=True))
    created_after = data.draw(st.none() | st.sampled_from(times))
    # Settled up to a drawn event's time (events of and after its millisecond not yet listed).
    settled = data.draw(st.sampled_from([*times, times[-1] + timedelta(seconds=1)]))
    upper = settled.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    async def pages(store: PaymentStore) -> list[Any]:
        answers, after = [], None
        for _ in range(3 if types is None else 8):
            page = await store.events(
                first=size, after=after, types=types, created_after=created_after, upper=upper
            )
            answers.append(page)
            if not page.has_next_page:
                break
            after = page.end_cursor
        return answers

    expected, got = await pages(one), await pages(many)
    if types is None:
        assert event_ids(got) == event_ids(expected)
        assert [p.has_next_page for p in got] == [p.has_next_page for p in expected]
    else:
        # A filtered page reads at most its read limit (`pages.read_limit`, more over many
        # shards than over one), so it may come back short, each with the cursor where it
        # stopped: page after page, the same events in the same order.
        listed = [edge for page in event_ids(got) for edge in page]
        listed_one = [edge for page in event_ids(expected) for edge in page]
        assert all(len(page.edges) <= size for page in (*got, *expected))
        shorter = min(len(listed), len(listed_one))
        assert listed[:shorter] == listed_one[:shorter]
        if not got[-1].has_next_page and not expected[-1].has_next_page:
            assert listed == listed_one

    # A webhook's delivery reads the same merge, from any event it reached.
    limit = data.draw(st.integers(1, 30))
    lower = feed_start(created_after)
    expected_after = await one.feed_after(lower=lower, key=None, upper=upper, limit=limit)
    got_after = await many.feed_after(lower=lower, key=None, upper=upper, limit=limit)
    assert [(e.payment_id, e.version) for _, e in got_after] == [
        (e.payment_id, e.version) for _, e in expected_after
    ]
    if got_after:
        key = got_after[-1][0]
        more = await many.feed_after(lower=lower, key=key, upper=upper, limit=limit)
        expected_more = await one.feed_after(
            lower=lower, key=expected_after[-1][0], upper=upper, limit=limit
        )
        assert [(e.payment_id, e.version) for _, e in more] == [
            (e.payment_id, e.version) for _, e in expected_more
        ]


async def test_a_cursor_from_the_one_shard_feed_resumes_in_the_sharded_one(
    tables: Tables,
) -> None:
    payments, events = lives(40)
    await tables.new_table()
    before = tables.store(keys.SEED_LAYOUT, keys.SEED_FEED)
    await seed(before, payments, events[:30])
    upper = "9999"
    first = await before.events(first=10, after=None, types=None, created_after=None, upper=upper)
    # The feed changes to 32 shards from a position after the events stored so far.
    after = tables.store(StatusLayout(64), keys.SEED_FEED.then(position(events[29].at), 32))
    await seed(after, [], events[30:])

    rest = await after.events(
        first=100, after=first.end_cursor, types=None, created_after=None, upper=upper
    )

    assert event_ids([first, rest]) == [
        [(e.payment_id, e.version) for e in events[:10]],
        [(e.payment_id, e.version) for e in events[10:]],
    ]


async def test_a_page_held_by_one_shard_takes_three_rounds_and_is_whole(
    tables: Tables,
) -> None:
    # 25 payments, all in shard 0 of 64: the first round gets 3 of them, the second 3 more,
    # the third all the page lacks.
    crowded: list[Payment] = []
    while len(crowded) < 25:
        payment = sample_payment(user_id=f"user-{len(crowded) % 3}")
        if keys.status_shard(payment.payment_id, 64) == 0:
            crowded.append(payment)
    await tables.new_table()
    one = tables.store(keys.SEED_LAYOUT, keys.SEED_FEED)
    await seed(one, crowded, [])
    await tables.new_table()
    many = tables.store(StatusLayout(64), keys.SEED_FEED)
    await seed(many, crowded, [])

    with count_calls() as calls:
        page = await many.payments_by_status(status=S.PENDING, first=19)
    expected = await one.payments_by_status(status=S.PENDING, first=19)

    assert ids([page]) == ids([expected]) and page.has_next_page
    assert calls.list_rounds == 3
    assert calls.operations["Query"] == 64 + 2


async def test_a_page_of_100_at_the_defaults_costs_three_rounds_at_most_and_little_more(
    tables: Tables, backend: Backend
) -> None:
    payments, events = lives(600, start=datetime.now(UTC) - timedelta(hours=1))
    await tables.new_table()
    one = tables.store(keys.SEED_LAYOUT, keys.SEED_FEED)
    await seed(one, payments, events)
    await tables.new_table()
    defaults = tables.store(
        StatusLayout(keys.DEFAULT_GSI2_SHARDS), FeedLayout.of(keys.DEFAULT_FEED_SHARDS)
    )
    await seed(defaults, payments, events)

    async def cost(store: PaymentStore, feed: bool, after: str | None) -> tuple[float, int, Any]:
        with count_calls() as calls:
            if feed:
                page: Any = await store.events(
                    first=100, after=after, types=None, created_after=None, upper="9999"
                )
            else:
                page = await store.payments_by_status(status=S.PENDING, first=100, after=after)
        return calls.units.read, calls.list_rounds, page

    for feed, shards in ((False, keys.DEFAULT_GSI2_SHARDS), (True, keys.DEFAULT_FEED_SHARDS)):
        after_one = after_many = None
        for _ in range(2):
            units_one, rounds_one, page_one = await cost(one, feed, after_one)
            units, rounds, page = await cost(defaults, feed, after_many)
            listed = (event_ids if feed else ids)([page])
            assert listed == (event_ids if feed else ids)([page_one])
            assert rounds_one == 1 and rounds <= 3
            assert units <= units_one + 0.5 * shards, (feed, units, units_one)
            after_one, after_many = page_one.end_cursor, page.end_cursor
