"""The reshard job (`loc-payments reshard`): every payment into its GSI2 partition of the layout
written now (`LOC_GSI2_SHARDS`), from the layouts it may still be in (those the layout record
names, and `LOC_GSI2_READ_SHARDS`); and the events feed into `LOC_EVENTS_SHARDS` shards from a
feed position a little ahead on (`reshard_feed`; events before it stay where they are).

Page by page, it rewrites the GSI2PK of each payment that belongs elsewhere, each conditional on
the partition it was listed in, then saves the checkpoint (the partition and the key after the
page): a resumed run loses and repeats nothing, and the counts of finished pages are exact. A
finished run records the new layout in the layout record (`record_status_end`).

How to run it, and why a resumed run is safe: docs/operating.md ("Resharding").
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable
from dataclasses import asdict, astuple, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from datasource import RESHARD_JOB, Item, PaymentStore, Placed, acting_as, switch_at
from domain import keys
from domain.keys import FeedLayout, StatusLayout
from jobs.checkpoint import read_checkpoint, refuse_mismatch, replace_file
from jobs.errors import CheckpointRefused
from process.bootstrap import payment_store
from process.settings import Settings
from process.tracing import job_trace, open_tracing

__all__ = [
    "DEFAULT_CONCURRENCY",
    "ReshardCheckpoint",
    "ReshardCounts",
    "fresh_checkpoint",
    "load_reshard_checkpoint",
    "reshard",
    "reshard_feed",
    "reshard_with_settings",
]

DEFAULT_PAGE_SIZE = 100
DEFAULT_CONCURRENCY = 16
_FORMAT = "loc-payments-reshard/1"

logger = logging.getLogger("loc_payments.reshard")


@dataclass(frozen=True, slots=True)
class ReshardCounts:
    scanned: int = 0  # listed in the old layouts' partitions
    moved: int = 0  # GSI2PK rewritten to the new layout
    in_place: int = 0  # already in their partition of the new layout
    changed: int = 0  # moved by the service (or deleted) between our read and our write

    def plus(self, other: ReshardCounts) -> ReshardCounts:
        return ReshardCounts(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def summary(self) -> str:
        return ", ".join(
            f"{name.replace('_', ' ')} {value}" for name, value in asdict(self).items()
        )


@dataclass(frozen=True, slots=True)
class ReshardCheckpoint:
    """Where a run stands: bound to its table and layouts, which a resumed run must share."""

    table_name: str
    shards: int
    sources: tuple[str, ...]  # the partitions to read, in order
    position: int = 0  # the partition being read (an index into `sources`)
    start_key: Item | None = None  # after the last finished page of that partition
    counts: ReshardCounts = ReshardCounts()

    @property
    def finished(self) -> bool:
        return self.position >= len(self.sources)

    def check_matches(self, other: ReshardCheckpoint) -> None:
        refuse_mismatch(
            "a reshard",
            "settings",
            ("table", self.table_name, other.table_name),
            ("LOC_GSI2_SHARDS", self.shards, other.shards),
            ("partitions to read (LOC_GSI2_READ_SHARDS)", self.sources, other.sources),
        )


def fresh_checkpoint(table_name: str, layout: StatusLayout) -> ReshardCheckpoint:
    """The start of a reshard of GSI2 to `layout`'s shards, from the layouts it also reads (none:
    a checkpoint already finished)."""
    return ReshardCheckpoint(
        table_name=table_name,
        shards=layout.shards,
        sources=tuple(layout.source_partitions()),
    )


def load_reshard_checkpoint(path: Path) -> ReshardCheckpoint | None:
    data = read_checkpoint(path, format=_FORMAT, job="reshard")
    if data is None:
        return None
    try:
        return ReshardCheckpoint(
            table_name=data["table_name"],
            shards=data["shards"],
            sources=tuple(data["sources"]),
            position=data["position"],
            start_key=data["start_key"],
            counts=ReshardCounts(**data["counts"]),
        )
    except (KeyError, TypeError) as error:
        raise CheckpointRefused(f"the checkpoint {path} is damaged: {error}") from None


def save_reshard_checkpoint(path: Path, checkpoint: ReshardCheckpoint) -> None:
    body: dict[str, Any] = {"format": _FORMAT, **asdict(checkpoint)}
    replace_file(path, json.dumps(body, indent=2).encode())


def start_or_resume(path: Path | None, fresh: ReshardCheckpoint) -> ReshardCheckpoint:
    saved = load_reshard_checkpoint(path) if path is not None else None
    if saved is None:
        return fresh
    if saved.finished and not fresh.sources:
        # Its end is recorded already: the layouts it read are no longer among those read.
        saved.check_matches(dataclasses.replace(fresh, sources=saved.sources))
        return saved
    saved.check_matches(fresh)
    return saved


async def reshard_feed(store: PaymentStore, shards: int, *, at: str) -> FeedLayout | None:
    """Record that the feed is written in `shards` shards from the position `at` on (None: it
    is already, from its last change on)."""
    for _ in range(5):
        record = await store.layout_record()
        if record is None:
            raise CheckpointRefused(f"the table {store.table_name} has no layout record yet")
        if record.feed.latest == shards:
            return None
        since, latest = record.feed.changes[-1]
        if at <= since:
            # Another run recorded its own change from a position at or past ours: a second
            # change would apply before the first one had (never written over it).
            raise CheckpointRefused(
                f"the feed's layout changed meanwhile: {latest} shard(s) from {since}; "
                "run the reshard again once it applies"
            )
        feed = record.feed.then(at, shards)
        if await store.replace_layout_record(record, dataclasses.replace(record, feed=feed)):
            return feed
    raise CheckpointRefused("the layout record keeps changing; run the reshard again")


async def record_status_end(store: PaymentStore, checkpoint: ReshardCheckpoint) -> None:
    """Record that GSI2's payments are all in `checkpoint.shards` shards: the layouts it moved
    them from are no longer read. Refused if another layout appeared meanwhile (an instance
    writing it: move its payments too, with a new run). A table with no record (one made before
    records, never opened by the service since) is left without one."""
    sources = set(checkpoint.sources)
    moved_from = {
        count for count in store.layout.also_read if set(keys.status_partitions(count)) <= sources
    }
    for _ in range(5):
        record = await store.layout_record()
        if record is None:
            return
        others = record.status - moved_from - {checkpoint.shards}
        if others:
            raise CheckpointRefused(
                f"GSI2 layouts {sorted(others)} were added while the reshard ran: run it again"
            )
        ended = dataclasses.replace(record, status=frozenset({checkpoint.shards}))
        if record == ended or await store.replace_layout_record(record, ended):
            return
    raise CheckpointRefused("the layout record keeps changing; run the reshard again")


@dataclass(frozen=True, slots=True)
class ReshardRun:
    """What a run did: GSI2's final checkpoint, and the feed's new layout if it recorded one."""

    status: ReshardCheckpoint
    feed: FeedLayout | None


async def reshard_with_settings(
    settings: Settings,
    *,
    endpoint_url: str | None,
    checkpoint_path: Path | None,
    page_size: int = DEFAULT_PAGE_SIZE,
    concurrency: int = DEFAULT_CONCURRENCY,
    announce: Callable[[str], None] = lambda _: None,
    on_page: Callable[[int, ReshardCounts], None] | None = None,
) -> ReshardRun:
    """`reshard` on the table the settings name, from the layouts its record names, and the
    feed's change of layout; with tracing on, the run is one trace. Refused (CheckpointRefused)
    when neither has anything to do."""
    # Recorded as the job's, not the service's (`datasource.permissions`).
    with acting_as(RESHARD_JOB):
        async with (
            open_tracing(settings) as tracer,
            payment_store(settings, endpoint_url=endpoint_url, tracer=tracer) as (store, _created),
        ):
            start = start_or_resume(
                checkpoint_path, fresh_checkpoint(settings.table_name, store.layout)
            )
            at = switch_at(
                datetime.now(UTC),
                refresh_seconds=settings.layout_refresh_seconds,
                settle_seconds=settings.events_settle_seconds,
            )
            feed = await reshard_feed(store, settings.events_shards, at=at)
            if feed is not None:
                announce(
                    f"the feed is written in {settings.events_shards} shard(s) "
                    f"from {keys.feed_bound_time(at)} on"
                )
            if not start.sources and feed is None:
                raise CheckpointRefused(
                    f"nothing to reshard: GSI2's payments are all in {start.shards} shard(s) "
                    f"(LOC_GSI2_SHARDS) and the feed is written in {settings.events_shards} "
                    "(LOC_EVENTS_SHARDS), as the table's layout record says"
                )
            if start.finished:  # (its end recorded again: a run may stop just before that)
                await record_status_end(store, start)
                return ReshardRun(start, feed)
            if start.counts.scanned:
                announce(f"resuming after {start.counts.scanned} payments")
            announce(f"GSI2 to {start.shards} shard(s), reading {', '.join(start.sources)}")
            with job_trace(tracer, "reshard") as span:
                final = await reshard(
                    store,
                    start,
                    checkpoint_path=checkpoint_path,
                    page_size=page_size,
                    concurrency=concurrency,
                    on_page=on_page,
                )
                span.set_attributes(
                    {f"loc.reshard.{name}": count for name, count in asdict(final.counts).items()}
                )
                return ReshardRun(final, feed)


async def reshard(
    store: PaymentStore,
    start: ReshardCheckpoint,
    *,
    checkpoint_path: Path | None,
    page_size: int = DEFAULT_PAGE_SIZE,
    concurrency: int = DEFAULT_CONCURRENCY,
    on_page: Callable[[int, ReshardCounts], None] | None = None,
) -> ReshardCheckpoint:
    """Move every payment listed in `start`'s partitions (after its position) to its partition
    of the store's layout; the final checkpoint says the totals."""
    if start.shards != store.layout.shards:
        raise CheckpointRefused(
            f"the checkpoint reshards to {start.shards} shards, the store writes "
            f"{store.layout.shards}"
        )
    checkpoint = start
    limit = asyncio.Semaphore(concurrency)

    async def place(payment: Placed) -> ReshardCounts:
        target = store.layout.partition(payment.payment_id)
        if payment.partition == target:
            return ReshardCounts(scanned=1, in_place=1)
        async with limit:
            moved = await store.move_to_partition(payment, target)
        return ReshardCounts(scanned=1, moved=1) if moved else ReshardCounts(scanned=1, changed=1)

    while not checkpoint.finished:
        partition = checkpoint.sources[checkpoint.position]
        page = await store.status_partition_page(
            partition, start_key=checkpoint.start_key, limit=page_size
        )
        counts = ReshardCounts()
        for outcome in await asyncio.gather(*(place(payment) for payment in page.payments)):
            counts = counts.plus(outcome)
        if page.next_key is None:
            checkpoint = dataclasses.replace(
                checkpoint, position=checkpoint.position + 1, start_key=None
            )
        else:
            checkpoint = dataclasses.replace(checkpoint, start_key=page.next_key)
        checkpoint = dataclasses.replace(checkpoint, counts=checkpoint.counts.plus(counts))
        if checkpoint_path is not None:
            save_reshard_checkpoint(checkpoint_path, checkpoint)
        if on_page is not None:
            on_page(len(page.payments), checkpoint.counts)
        logger.debug("reshard: %s: %s", partition, counts.summary())
    await record_status_end(store, checkpoint)
    return checkpoint
