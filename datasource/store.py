"""The payment store: every read and write of the one table, behind domain-named methods.

Its arguments are checked values (`PaymentRef`, `LoanRef`, payments from `new_payment` or
`apply_transition`): input is checked once, where it enters, and not again here. Keys are built by
`domain.keys` only. One aioboto3 client, with explicit timeouts and retries, serves the whole
process.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING

from datasource import layouts, shards, versions, writes
from datasource.accounting import attach_accounting
from datasource.batch import Backoff, batch_get_items
from datasource.breaker import CircuitBreaker
from datasource.client import open_client
from datasource.coalesce import Coalescer
from datasource.config import DynamoConfig
from datasource.cursors import CursorCodec, ListScope
from datasource.deadline import storage_call
from datasource.events import FEED_SCOPE, feed_items, feed_partitions, feed_query, feed_start
from datasource.history import HistoryPage, event_from_item, event_key_of, history_query
from datasource.idempotency import put_new_with_key, replayed_move
from datasource.items import Item, from_item, primary_key, projected_attributes, to_item
from datasource.layouts import LayoutRecord, Layouts
from datasource.pages import (
    Page,
    PageQuery,
    Paging,
    merged_page,
    page_of_items,
    query_page,
    read_limit,
)
from datasource.retries import RetryPolicy, Throttles, throttles_of
from datasource.shards import PartitionPage, Placed
from datasource.status_groups import GroupPage, StatusPosition, group_page
from datasource.table import (
    GSI1,
    GSI1PK,
    GSI1SK,
    GSI2,
    GSI2PK,
    GSI2SK,
    GSI3,
    GSI3PK,
    GSI3SK,
    GSI4,
    GSI4SK,
    PK,
    SK,
    page_key_attributes,
)
from datasource.table_fit import TableFit
from datasource.tracing import CallSpans
from datasource.webhooks import WebhookStore
from domain import keys
from domain.enums import PaymentStatus
from domain.errors import PaymentsError, StorageUnavailable
from domain.history import PaymentEvent
from domain.idempotency import IdempotencyClaim, WriteOutcome
from domain.keys import SEED_FEED, SEED_LAYOUT, FeedLayout, StatusLayout
from domain.payment import LoanRef, Payment, PaymentRef
from domain.validation import format_timestamp

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = ["PaymentStore", "loan_query", "open_store", "status_query"]


logger = logging.getLogger("loc_payments.store")


@asynccontextmanager
async def open_store(
    config: DynamoConfig,
    *,
    cursor_secret: bytes,
    layout: StatusLayout = SEED_LAYOUT,
    feed: FeedLayout = SEED_FEED,
    tracer: Tracer | None = None,
) -> AsyncIterator[PaymentStore]:
    """A store on one shared client, open for the life of the block (the life of the service);
    with a tracer, a span per DynamoDB call (`datasource.tracing`)."""
    breaker = CircuitBreaker(
        failures=config.breaker_failures, probe_interval=config.breaker_probe_interval
    )
    async with open_client(config) as client:
        try:
            yield PaymentStore(
                client,
                table_name=config.table_name,
                cursor_secret=cursor_secret,
                layout=layout,
                feed=feed,
                backoff=RetryPolicy(attempts=config.max_attempts).backoff,
                breaker=breaker,
                coalesce=config.coalesce_lookups,
                tracer=tracer,
            )
        finally:
            await breaker.close()


class PaymentStore:
    def __init__(
        self,
        client: DynamoDBClient,
        *,
        table_name: str,
        cursor_secret: bytes,
        backoff: Backoff | None = None,
        layout: StatusLayout = SEED_LAYOUT,
        feed: FeedLayout = SEED_FEED,
        breaker: CircuitBreaker | None = None,
        coalesce: bool = False,
        tracer: Tracer | None = None,
    ) -> None:
        self._client = client
        self._table = table_name
        # GSI2's and the feed's shards: where writes put an item, which partitions a list
        # reads; exactly these, or (`follow_layout_record`) as the table's record says.
        self._layouts = Layouts.fixed(layout, feed)
        self._cursors = CursorCodec(cursor_secret)
        self._backoff = backoff or RetryPolicy().backoff
        # Lookups shared with other requests' (the service's store; a job's reads are its own).
        self._lookups = Coalescer(self._read, tracer=tracer) if coalesce else None
        attach_accounting(client)
        # The process's tracer (None: tracing off); its call spans hook in before the breaker.
        self.tracer = tracer
        if tracer is not None:
            CallSpans(tracer, breaker).attach(client)
        # Fails calls at once while DynamoDB does not answer (the service's own client only).
        self.breaker = breaker
        if breaker is not None:
            breaker.attach(client, probe=self._describe_table)
        # Refuses writes while the table is not as the service needs it (`compare_definition`).
        self.fit: TableFit | None = None

    @property
    def throttles(self) -> Throttles:
        """The attempts DynamoDB throttled, of every call of the store's client."""
        return throttles_of(self._client)

    @property
    def client(self) -> DynamoDBClient:
        """The low-level client, for tests and tools that read raw items."""
        return self._client

    @property
    def table_name(self) -> str:
        return self._table

    @property
    def layout(self) -> StatusLayout:
        """GSI2's layouts, as last read."""
        return self._layouts.status

    @property
    def feed_layout(self) -> FeedLayout:
        """The feed's layout by position, as last read."""
        return self._layouts.feed

    async def follow_layout_record(
        self, *, feed_shards: int, refresh_seconds: float, settle_seconds: float
    ) -> None:
        """Write and read in the layouts the table's record says hold data (made if there is
        none: `datasource.layouts.establish`, the feed in `feed_shards`), read again every
        `refresh_seconds`. If DynamoDB does not answer now, or the table is not known to be as
        the service needs it (`compare_definition`), the service still starts (and is unready):
        the record is read before the first use that needs it."""
        live = Layouts(
            self._layouts.status,
            FeedLayout.of(feed_shards),
            client=self._client,
            table_name=self._table,
            refresh_seconds=refresh_seconds,
            settle_seconds=settle_seconds,
        )
        self._layouts = live
        if self.fit is not None and not self.fit.fits:
            return
        try:
            await live.refresh()
        except PaymentsError as error:
            logger.warning("the layout record is read later: %s", error)

    async def compare_definition(self, *, stream: bool) -> None:
        """Compare the table with `datasource.table`'s definition now (one DescribeTable; the
        stream too with `stream`), and again at each `ping`; until it is as the service needs
        it, writes are refused (`datasource.table_fit`)."""
        if self.fit is None:
            self.fit = TableFit(self._table, stream=stream)
            self.fit.attach(self._client)
        try:
            await self.ping()
        except StorageUnavailable as error:
            logger.warning("table %s: compared once DynamoDB answers (%s)", self._table, error)

    async def layout_record(self) -> LayoutRecord | None:
        return await layouts.read_record(self._client, self._table)

    async def replace_layout_record(self, old: LayoutRecord, new: LayoutRecord) -> bool:
        """Write `new` if the record is still `old` (a reshard's change of layouts)."""
        return await layouts.replace_record(self._client, self._table, old, new)

    @functools.cached_property
    def webhooks(self) -> WebhookStore:
        """The webhook endpoints and their deliveries, on the same client and table."""
        return WebhookStore(self._client, table_name=self._table, cursors=self._cursors)

    async def create(
        self,
        payment: Payment,
        *,
        event: PaymentEvent,
        idempotency: IdempotencyClaim | None = None,
    ) -> WriteOutcome:
        """Store a new payment and its creation's event; Conflict if one with its key exists
        already.

        With an idempotency claim, the claim's record is written with them, or,
        when the key was used before, the payment it made is returned, replayed
        (IdempotencyMismatch if that was for a different request). The payment is as stored
        (timestamps at the stored millisecond precision), equal to what a later read returns.
        """
        now = await self._layouts.current()
        if idempotency is None:
            return await writes.put_new(
                self._client,
                table_name=self._table,
                payment=payment,
                event=event,
                backoff=self._backoff,
                layout=now.status,
                feed=now.feed,
            )
        return await put_new_with_key(
            self._client,
            table_name=self._table,
            payment_item=to_item(payment, now.status),
            event=event,
            claim=idempotency,
            backoff=self._backoff,
            feed=now.feed,
        )

    async def get(self, ref: PaymentRef, *, consistent: bool = True) -> Payment | None:
        async with storage_call():
            response = await self._client.get_item(
                TableName=self._table, Key=primary_key(ref), ConsistentRead=consistent
            )
        item = response.get("Item")
        return from_item(item) if item is not None else None

    async def batch_get(
        self, refs: Sequence[PaymentRef], *, consistent: bool = True
    ) -> list[Payment | None]:
        """The payments in `refs` order, None where there is none; duplicates are read once.
        `consistent=False` for a read that may miss the last second's writes (half the units).

        With coalescing (the service's store), the lookups other requests make within the same
        two turns of the event loop go out in the same call (`datasource.coalesce`)."""
        if not refs:
            return []
        if self._lookups is None:
            found = await self._read(list(dict.fromkeys(refs)), consistent)
        else:
            found = await self._lookups.lookup(refs, consistent=consistent)
        return [found.get(ref) for ref in refs]

    async def _read(self, refs: list[PaymentRef], consistent: bool) -> dict[PaymentRef, Payment]:
        """The stored payments among the distinct `refs`, by ref.

        One key is one GetItem: the same units as a one-key BatchGetItem, with less for the SDK
        to build, validate and sign (about an eighth of the call's CPU)."""
        if len(refs) == 1:
            payment = await self.get(refs[0], consistent=consistent)
            return {} if payment is None else {refs[0]: payment}
        items = await batch_get_items(
            self._client,
            table_name=self._table,
            keys=[primary_key(ref) for ref in refs],
            backoff=self._backoff,
            consistent=consistent,
        )
        found = {(item[PK]["S"], item[SK]["S"]): item for item in items}
        return {
            ref: from_item(item)
            for ref in refs
            if (item := found.get(_key_strings(ref))) is not None
        }

    async def loan_payments(
        self,
        loan: LoanRef,
        *,
        status: PaymentStatus | None,
        first: int | None = None,
        after: str | None = None,
        consistent: bool = False,
        last: int | None = None,
        before: str | None = None,
        fields: frozenset[str] | None = None,
    ) -> Page:
        """A loan's payments, newest first; only those in `status` when given (GSI1); a page
        forward (`first`, `after`) or backward (`last`, `before`: `datasource.pages`).
        `consistent` applies to the table's list; an index is read eventually consistent.
        `fields`: only these fields of Payment are read (`items.from_item`); None: all."""
        paging = Paging.of(first=first, after=after, last=last, before=before)
        return await self._page(loan_query(loan, status, consistent), paging, fields)

    async def payments_by_status(
        self,
        *,
        status: PaymentStatus,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
        fields: frozenset[str] | None = None,
    ) -> Page:
        """Every user's payments in one status, newest first (GSI2), for the jobs; `fields`
        as `loan_payments`'.

        One Query with the seed's layout; with shards, a lazy merge of them (a few rounds of
        Queries at once: `pages.merged_items`) into the same exact pages, in either direction.
        """
        paging = Paging.of(first=first, after=after, last=last, before=before)
        layout = (await self._layouts.current()).status
        if layout.read_partitions() == [keys.GSI2_PARTITION]:
            return await self._page(status_query(status, keys.GSI2_PARTITION), paging, fields)

        def queries(partitions: list[str]) -> list[PageQuery]:
            return [_projected(status_query(status, p), fields) for p in partitions]

        return await merged_page(
            self._client,
            table_name=self._table,
            queries=queries(keys.status_partitions(layout.shards)),
            # A reshard moves payments out of these into the layout written now.
            moving_from=queries(layout.source_partitions()),
            cursors=self._cursors,
            paging=paging,
            node=functools.partial(from_item, fields=fields),
        )

    async def status_group_modulus(self) -> int:
        """How many groups GSI2's lists split into now (`StatusLayout.group_modulus`): one
        partition each in a single layout, the partitions a reshard moves between during one."""
        return (await self._layouts.current()).status.group_modulus

    async def payments_by_status_group(
        self,
        *,
        status: PaymentStatus,
        modulus: int,
        group: int,
        first: int,
        after: StatusPosition | None,
    ) -> GroupPage:
        """The payments in `status` whose shard among `modulus` is `group`, newest first, after
        the position `after` (the collection job's read: `datasource.status_groups`)."""
        layout = (await self._layouts.current()).status
        written, moving = layout.group_partitions(modulus, group)
        return await group_page(
            self._client,
            table_name=self._table,
            cursors=self._cursors,
            queries=[status_query(status, partition) for partition in written],
            moving_from=[status_query(status, partition) for partition in moving],
            status=status,
            modulus=modulus,
            group=group,
            first=first,
            after=after,
        )

    def status_position(self, *, status: PaymentStatus, cursor: str) -> StatusPosition:
        """The place in the list of `status` a `payments_by_status` cursor names (InvalidCursor
        if it is not one of ours)."""
        return StatusPosition.of_key(self._cursors.decode(ListScope(GSI2, status=status), cursor))

    async def payment_by_confirmation(
        self, *, user_id: str, confirmation_id: str
    ) -> Payment | None:
        """The user's payment with this confirmation id (GSI3); both ids checked by the caller."""
        async with storage_call():
            response = await self._client.query(
                TableName=self._table,
                IndexName=GSI3,
                KeyConditionExpression=f"{GSI3PK} = :pk AND {GSI3SK} = :sk",
                ExpressionAttributeValues={
                    ":pk": {"S": keys.user_partition(user_id)},
                    ":sk": {"S": keys.confirmation_sort_key(confirmation_id)},
                },
                Limit=1,
            )
        items = response.get("Items", [])
        return from_item(items[0]) if items else None

    async def transition(
        self,
        current: Payment,
        updated: Payment,
        *,
        event: PaymentEvent,
        idempotency: IdempotencyClaim | None = None,
    ) -> WriteOutcome:
        """Write `updated` over `current`, and the move's event, in one transaction (with the
        claim of its confirmation id when the move takes one, and the idempotency key's record
        when there is a key), if `current` is what is stored.

        NotFound if the payment is gone; Conflict (with the payment found) if another writer
        changed it since `current` was read; InvalidInput on `confirmationId` if another payment
        of the user holds that id. Under a key that this same move was written with before:
        nothing written, the payment as it is now, replayed; IdempotencyMismatch if the key was
        used for another request.
        """
        now = await self._layouts.current()
        return await writes.update_status(
            self._client,
            table_name=self._table,
            current=current,
            updated=updated,
            event=event,
            backoff=self._backoff,
            layout=now.status,
            feed=now.feed,
            idempotency=idempotency,
        )

    async def replayed_move(
        self, claim: IdempotencyClaim, ref: PaymentRef, *, now: datetime
    ) -> Payment | None:
        """The payment as it is now if this very move was written under the claim's key before
        (a refused move sent again: it had happened); None if the key holds no live record;
        IdempotencyMismatch if it was used for another request."""
        return await replayed_move(
            self._client,
            table_name=self._table,
            claim=claim,
            ref=ref,
            now=now,
            backoff=self._backoff,
        )

    async def status_partition_page(
        self, partition: str, *, start_key: Item | None, limit: int
    ) -> PartitionPage:
        """One page of a GSI2 partition, every status (the reshard job's read)."""
        return await shards.partition_page(
            self._client,
            table_name=self._table,
            partition=partition,
            start_key=start_key,
            limit=limit,
        )

    async def move_to_partition(self, payment: Placed, partition: str) -> bool:
        """Rewrite a listed payment's GSI2PK, if it is still where it was listed."""
        return await shards.move_to_partition(
            self._client, table_name=self._table, payment=payment, partition=partition
        )

    async def history(
        self,
        ref: PaymentRef,
        *,
        first: int | None = None,
        after: str | None = None,
        consistent: bool = False,
        last: int | None = None,
        before: str | None = None,
    ) -> HistoryPage:
        """A payment's events, oldest first (one Query; cursors bound to the payment), forward
        or backward; `consistent` for a read that must see every event stored before it (a
        replay)."""
        return await query_page(
            self._client,
            table_name=self._table,
            query=history_query(ref, consistent=consistent),
            cursors=self._cursors,
            paging=Paging.of(first=first, after=after, last=last, before=before),
            node=event_from_item,
        )

    async def events(
        self,
        *,
        first: int | None,
        after: str | None,
        types: Sequence[str] | None,
        created_after: datetime | None,
        upper: str,
        horizon: tuple[datetime, PaymentsError] | None = None,
    ) -> HistoryPage:
        """Every user's settled events (before `upper`), oldest first: the events feed (GSI4);
        one Query while the feed is one shard, a merge of its shards when it is more. A cursor
        before `horizon`'s time raises its error (the feed's retention)."""
        paging = Paging.of(first=first, after=after)
        if horizon is not None:
            start = paging.start_key(self._cursors, FEED_SCOPE)
            if start is not None and start[GSI4SK]["S"] < format_timestamp(horizon[0]):
                raise horizon[1]
        feed = (await self._layouts.current()).feed
        if feed == SEED_FEED:
            return await query_page(
                self._client,
                table_name=self._table,
                query=feed_query(upper=upper, created_after=created_after, types=types),
                cursors=self._cursors,
                paging=paging,
                node=event_from_item,
            )
        lower = feed_start(created_after)
        items, cut = await feed_items(
            self._client,
            table_name=self._table,
            feed=feed,
            lower=lower,
            upper=upper,
            start_key=paging.start_key(self._cursors, FEED_SCOPE),
            wanted=paging.size + 1,
            types=types,
            limit=read_limit(paging.size, feed_partitions(feed, lower, upper)),
        )
        return page_of_items(items, FEED_SCOPE, self._cursors, paging, event_from_item, cut=cut)

    async def feed_after(
        self, *, lower: str, key: Item | None, upper: str, limit: int
    ) -> list[tuple[Item, PaymentEvent]]:
        """Up to `limit` settled events from `lower`, after the feed position `key`, each with
        its GSI4 key and the payment as its write left it (a webhook's delivery): one Query of
        the feed, one BatchGetItem of the events' items (the feed does not carry the payment)."""
        listed, _ = await feed_items(
            self._client,
            table_name=self._table,
            feed=(await self._layouts.current()).feed,
            lower=lower,
            upper=upper,
            start_key=key,
            wanted=limit,
        )
        if not listed:
            return []
        stored = await batch_get_items(
            self._client,
            table_name=self._table,
            keys=[{PK: item[PK], SK: item[SK]} for item in listed],
            backoff=self._backoff,
            # Settled events, written once and never changed.
            consistent=False,
        )
        by_key = {(item[PK]["S"], item[SK]["S"]): item for item in stored}
        names = page_key_attributes(GSI4)
        return [
            (
                {name: item[name] for name in names},
                event_from_item(
                    by_key.get((item[PK]["S"], item[SK]["S"]), item), with_payment=True
                ),
            )
            for item in listed
        ]

    async def event(self, ref: PaymentRef, version: int) -> PaymentEvent | None:
        """One stored event, with the payment as its write left it."""
        async with storage_call():
            response = await self._client.get_item(
                TableName=self._table, Key=event_key_of(ref, version), ConsistentRead=True
            )
        item = response.get("Item")
        return None if item is None else event_from_item(item, with_payment=True)

    async def stored_versions(self, *, user_id: str, loan_id: str | None) -> dict[str, int]:
        """Payment id -> version of the user's payments (the loan's, when given), strongly
        consistent: what a live subscription starts from (`datasource.versions`)."""
        return await versions.stored_versions(
            self._client, table_name=self._table, user_id=user_id, loan_id=loan_id
        )

    async def _describe_table(self) -> object:
        described = await self._client.describe_table(TableName=self._table)
        if self.fit is not None:
            self.fit.compare(described["Table"])
        return described

    async def ping(self) -> None:
        """Raise StorageUnavailable unless the table answers (readiness); compare it with what
        the service needs, if asked to (`compare_definition`)."""
        try:
            async with storage_call():
                await self._describe_table()
        except PaymentsError as error:
            # Denied access or a wrong region is as unready as a timeout, whatever the cause.
            if isinstance(error, StorageUnavailable):
                raise
            raise StorageUnavailable(f"the payments table does not answer: {error}") from error

    async def _page(
        self, query: PageQuery, paging: Paging, fields: frozenset[str] | None = None
    ) -> Page:
        return await query_page(
            self._client,
            table_name=self._table,
            query=_projected(query, fields),
            cursors=self._cursors,
            paging=paging,
            node=from_item if fields is None else functools.partial(from_item, fields=fields),
        )


def _projected(query: PageQuery, fields: frozenset[str] | None) -> PageQuery:
    """The query reading only the attributes of `fields` (all when None)."""
    if fields is None:
        return query
    return dataclasses.replace(query, projection=projected_attributes(fields))


def _key_strings(ref: PaymentRef) -> tuple[str, str]:
    return keys.user_partition(ref.user_id), keys.payment_sort_key(ref.loan_id, ref.payment_id)


def loan_query(loan: LoanRef, status: PaymentStatus | None, consistent: bool = False) -> PageQuery:
    """The Query of a loan's payments (the table), or of those in `status` (GSI1, whose reads
    are eventually consistent whatever `consistent` says)."""
    user_id, loan_id = loan.user_id, loan.loan_id
    if status is None:
        return PageQuery(
            scope=ListScope(None, user_id, loan_id),
            partition_attribute=PK,
            partition=keys.user_partition(user_id),
            sort_attribute=SK,
            sort_prefix=keys.loan_payments_prefix(loan_id),
            consistent=consistent,
        )
    return PageQuery(
        scope=ListScope(GSI1, user_id, loan_id, status),
        partition_attribute=GSI1PK,
        partition=keys.user_partition(user_id),
        sort_attribute=GSI1SK,
        sort_prefix=keys.loan_status_prefix(loan_id, status),
    )


def status_query(status: PaymentStatus, partition: str) -> PageQuery:
    """The Query of the payments in `status` on one GSI2 partition."""
    return PageQuery(
        scope=ListScope(GSI2, status=status),
        partition_attribute=GSI2PK,
        partition=partition,
        sort_attribute=GSI2SK,
        sort_prefix=keys.status_prefix(status),
    )
