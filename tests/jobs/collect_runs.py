"""Running the collection job in tests as the command does, and reading what it left."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from datasource import PaymentStore
from domain.enums import PaymentMethod, PaymentStatus
from domain.payment import Payment
from jobs.checkpoint import Checkpoint, CollectionCounts, open_report
from jobs.collect import CollectionRun, collect_retries, start_or_resume
from tests.payment_samples import NOW, payment_in

MAX_ATTEMPTS = 3
# A day after the samples' first presentment: well inside the 180-day window.
SOON = NOW + timedelta(days=1)


def retry_payment(*, eligible: bool, method: PaymentMethod = PaymentMethod.ACH) -> Payment:
    """A RETRY payment with one presentment left, or none."""
    return payment_in(PaymentStatus.RETRY, method, attempts=2 if eligible else MAX_ATTEMPTS)


async def run_job(
    store: PaymentStore,
    directory: Path,
    *,
    clock: Callable[[], datetime] = lambda: SOON,
    dry_run: bool = False,
    page_size: int = 100,
    concurrency: int = 8,
    on_page: Callable[[int, CollectionCounts], None] | None = None,
) -> Checkpoint:
    """One run (or the resumption of one) with a checkpoint and a report file in `directory`."""
    run = CollectionRun(
        max_attempts=MAX_ATTEMPTS,
        clock=clock,
        dry_run=dry_run,
        page_size=page_size,
        concurrency=concurrency,
        checkpoint_path=directory / "checkpoint.json",
    )
    report_path = directory / "eligible.jsonl"
    fresh = Checkpoint(table_name=store.table_name, report=str(report_path), dry_run=dry_run)
    saved = start_or_resume(run, fresh)
    with open_report(report_path, saved) as report:
        return await collect_retries(
            store, run, report=report, start=saved or fresh, on_page=on_page
        )


def reported(directory: Path) -> list[dict[str, Any]]:
    lines = (directory / "eligible.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def reported_ids(directory: Path) -> list[str]:
    return [line["paymentId"] for line in reported(directory)]


def ids(payments: Sequence[Payment]) -> set[str]:
    return {payment.payment_id for payment in payments}
