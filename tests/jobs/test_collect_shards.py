"""The collection job over GSI2's shards: one Query a page at the defaults, and a resumed run that
neither skips nor repeats a payment when the layouts change under it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from datasource import DynamoConfig, PaymentStore, count_calls
from domain import keys
from domain.ach_returns import retry_eligibility
from domain.enums import PaymentStatus
from domain.errors import InvalidCursor
from domain.keys import StatusLayout
from domain.payment import Payment
from jobs.checkpoint import CollectionCounts
from jobs.collect import eligible_line
from jobs.reshard import fresh_checkpoint, reshard
from tests.backends import CURSOR_SECRET, Backend
from tests.datasource.stored_items import put_all
from tests.jobs.collect_runs import (
    MAX_ATTEMPTS,
    SOON,
    collect_process,
    killed_after,
    listed_at_least,
    reported_ids,
    retry_payment,
    run_job,
    run_to_its_end,
)
from tests.payment_samples import ref_of

S = PaymentStatus


async def assert_each_decided_once(
    store: PaymentStore, directory: Path, payments: list[Payment], to_fail: set[str]
) -> None:
    """Every payment of `to_fail` failed by exactly one write, every other reported on exactly
    one line and left as it was."""
    found = await store.batch_get([ref_of(payment) for payment in payments])
    for payment, stored in zip(payments, found, strict=True):
        assert stored is not None
        if payment.payment_id in to_fail:
            assert (stored.status, stored.version) == (S.FAILED, payment.version + 1)
        else:
            assert (stored.status, stored.version) == (S.RETRY, payment.version)
    report = Counter(reported_ids(directory))
    assert set(report) == {p.payment_id for p in payments} - to_fail
    assert set(report.values()) == {1}


async def test_at_the_default_shards_a_page_costs_one_query_and_each_shard_one_more(
    moto_store: PaymentStore, tmp_path: Path
) -> None:
    assert moto_store.layout.shards == keys.DEFAULT_GSI2_SHARDS
    # Few to fail: each is a transaction, which moto makes by copying the table.
    payments = [retry_payment(eligible=index % 20 != 0) for index in range(300)]
    to_fail = {p.payment_id for index, p in enumerate(payments) if index % 20 == 0}
    # Straight into the table as items, each in its shard of the 64.
    await put_all(moto_store, payments)
    pages = 0

    def count_page(listed: int, counts: CollectionCounts) -> None:
        nonlocal pages
        pages += 1

    with count_calls() as calls:
        final = await run_job(moto_store, tmp_path, on_page=count_page)

    queries = calls.operations["Query"]
    assert queries <= pages + keys.DEFAULT_GSI2_SHARDS, (queries, pages)
    assert final.finished
    assert final.counts == CollectionCounts(scanned=300, failed=15, eligible=285)
    await assert_each_decided_once(moto_store, tmp_path, payments, to_fail)


async def test_a_checkpoint_of_the_job_that_merged_the_shards_is_resumed_where_it_stood(
    moto_store: PaymentStore, tmp_path: Path
) -> None:
    # The job before groups listed the 10 newest RETRY payments in one merged order (all
    # eligible), reported them and saved its cursor; the 5 spent ones are older.
    payments = [retry_payment(eligible=index >= 5) for index in range(30)]
    to_fail = {p.payment_id for p in payments[:5]}
    await put_all(moto_store, payments)
    first = await moto_store.payments_by_status(status=S.RETRY, first=10)
    lines = b"".join(
        eligible_line(p, retry_eligibility(p, max_attempts=MAX_ATTEMPTS, now=SOON))
        for p in (edge.node for edge in first.edges)
    )
    (tmp_path / "eligible.jsonl").write_bytes(lines)
    old = {
        "format": "loc-payments-collect/1",
        "table_name": moto_store.table_name,
        "report": str(tmp_path / "eligible.jsonl"),
        "dry_run": False,
        "cursor": first.end_cursor,
        "report_bytes": len(lines),
        "counts": {"scanned": 10, "failed": 0, "eligible": 10, "conflicts": 0, "skipped": 0},
        "finished": False,
        "run_id": "0123456789abcdef0123456789abcdef",
    }
    (tmp_path / "checkpoint.json").write_text(json.dumps(old))

    final = await run_job(moto_store, tmp_path)

    assert final.counts == CollectionCounts(scanned=30, failed=5, eligible=25)
    assert final.run_id == old["run_id"]
    await assert_each_decided_once(moto_store, tmp_path, payments, to_fail)
    assert json.loads((tmp_path / "checkpoint.json").read_text())["format"] == (
        "loc-payments-collect/2"
    )


async def test_a_checkpoint_of_the_merged_job_signed_with_another_secret_is_refused(
    moto_store: PaymentStore, tmp_path: Path
) -> None:
    payments = [retry_payment(eligible=True) for _ in range(3)]
    await put_all(moto_store, payments)
    other = PaymentStore(
        moto_store.client,
        table_name=moto_store.table_name,
        cursor_secret=b"another secret",
        layout=moto_store.layout,
    )
    cursor = (await other.payments_by_status(status=S.RETRY, first=1)).end_cursor
    assert cursor is not None
    (tmp_path / "checkpoint.json").write_text(
        json.dumps(
            {
                "format": "loc-payments-collect/1",
                "table_name": moto_store.table_name,
                "report": str(tmp_path / "eligible.jsonl"),
                "dry_run": False,
                "cursor": cursor,
                "report_bytes": 0,
                "counts": {"scanned": 1, "failed": 0, "eligible": 1, "conflicts": 0, "skipped": 0},
                "finished": False,
            }
        )
    )
    (tmp_path / "eligible.jsonl").write_bytes(b"")

    with pytest.raises(InvalidCursor):
        await run_job(moto_store, tmp_path)


def spent_or_not(count: int) -> tuple[list[Payment], set[str]]:
    """`count` RETRY payments of several users, one in four spent (to fail), first presented
    yesterday (a job in a process of its own reads the real clock)."""
    yesterday = datetime.now(UTC) - timedelta(days=1)
    payments = [
        dataclasses.replace(
            retry_payment(eligible=index % 4 != 0),
            user_id=f"user-{index % 7}",
            first_presented_at=yesterday,
        )
        for index in range(count)
    ]
    return payments, {p.payment_id for index, p in enumerate(payments) if index % 4 == 0}


async def test_a_run_killed_before_a_reshard_ends_resumes_in_the_new_layout(
    ddblocal_backend: Backend, ddblocal_config: DynamoConfig, tmp_path: Path
) -> None:
    """Payments in the seed's one shard: the run reads the layouts' one group (the seed's
    partition and the 64 shards, merged), is killed, the reshard then moves every payment and
    ends; the resumed run reads 64 groups from where the one stood."""
    table = ddblocal_config.table_name
    seed = PaymentStore(ddblocal_backend.client, table_name=table, cursor_secret=CURSOR_SECRET)
    payments, to_fail = spent_or_not(160)
    await put_all(seed, payments)

    run = await collect_process(ddblocal_config, tmp_path)
    await killed_after(run, tmp_path, scanned=50)
    record = await seed.layout_record()
    assert record is not None and record.status == {1, 64}, "a table of seed data, recorded"
    assert json.loads((tmp_path / "checkpoint.json").read_text())["groups"]["modulus"] == 1
    resharding = PaymentStore(
        ddblocal_backend.client,
        table_name=table,
        cursor_secret=CURSOR_SECRET,
        layout=StatusLayout(64, also_read=(1,)),
    )
    moved = await reshard(
        resharding, fresh_checkpoint(table, resharding.layout), checkpoint_path=None
    )
    assert moved.counts.moved > 0
    record = await seed.layout_record()
    assert record is not None and record.status == {64}
    errors = await run_to_its_end(await collect_process(ddblocal_config, tmp_path))

    assert f"scanned {len(payments)}, failed {len(to_fail)}" in errors
    saved = json.loads((tmp_path / "checkpoint.json").read_text())
    assert (saved["finished"], saved["groups"]["modulus"]) == (True, 64)
    await assert_each_decided_once(seed, tmp_path, payments, to_fail)


async def test_a_run_killed_at_the_defaults_resumes_during_a_reshard(
    ddblocal_backend: Backend, ddblocal_config: DynamoConfig, tmp_path: Path
) -> None:
    """At the defaults the run reads 64 groups, one shard each; killed, it is resumed with 96
    shards while the reshard from 64 to 96 runs: 32 groups, each merged from both layouts, and
    96 once the reshard ends, if it ends first."""
    table = ddblocal_config.table_name
    defaults = PaymentStore(
        ddblocal_backend.client,
        table_name=table,
        cursor_secret=CURSOR_SECRET,
        layout=StatusLayout(keys.DEFAULT_GSI2_SHARDS),
    )
    payments, to_fail = spent_or_not(160)
    await put_all(defaults, payments)

    run = await collect_process(ddblocal_config, tmp_path)
    await killed_after(run, tmp_path, scanned=50)
    killed = json.loads((tmp_path / "checkpoint.json").read_text())
    assert killed["groups"]["modulus"] == 64
    # The fleet writes 96 shards (its instances record the layout), then the reshard runs.
    record = await defaults.layout_record()
    assert record is not None and record.status == {64}
    widened = dataclasses.replace(record, status=frozenset({64, 96}))
    assert await defaults.replace_layout_record(record, widened)
    resharding = PaymentStore(
        ddblocal_backend.client,
        table_name=table,
        cursor_secret=CURSOR_SECRET,
        layout=StatusLayout(96, also_read=(64,)),
    )
    resumed = await collect_process(
        ddblocal_config, tmp_path, page_size=5, gsi2_shards="96", layout_refresh_seconds="1"
    )
    ended = asyncio.create_task(run_to_its_end(resumed))
    # Once the resumed run has finished a page in the 32 groups.
    await listed_at_least(resumed, tmp_path, scanned=killed["counts"]["scanned"] + 1)
    moved = await reshard(
        resharding,
        fresh_checkpoint(table, resharding.layout),
        checkpoint_path=None,
        page_size=10,
        concurrency=2,
    )
    errors = await ended

    assert moved.finished
    assert f"scanned {len(payments)}, failed {len(to_fail)}" in errors
    saved = json.loads((tmp_path / "checkpoint.json").read_text())
    assert saved["finished"] and saved["groups"]["modulus"] in (32, 96)
    await assert_each_decided_once(defaults, tmp_path, payments, to_fail)
