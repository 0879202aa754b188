"""The collection job (`loc-payments collect`): every user's RETRY payments, decided one by one.

A payment that may no longer be presented (`domain.ach_returns.retry_eligibility`) moves to
FAILED through the one workflow of every write (`resolvers.workflow.move_payment`); one that may
is reported to the submitter as a JSON line (`eligible_line`). It reads GSI2's RETRY payments
group after group (`datasource.status_groups`: one partition, one Query a page, with the layouts
as they are between reshards), a page at a time, reads each page again from the table (the index
may lag), decides it, flushes the page's lines, then saves the checkpoint (each group's stand,
the counts, the report's length): a resumed run neither skips nor repeats a payment, during a
reshard too (`jobs.group_progress`), and the counts of finished pages are exact.

How to run it, and why a resumed run is safe: docs/operating.md ("The collection
job").
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import IO

from datasource import COLLECT_JOB, MAX_PAGE_SIZE, PaymentStore, acting_as
from domain.ach_returns import RetryEligibility, retry_eligibility
from domain.audit import Actor, ActorKind
from domain.enums import PaymentStatus
from domain.errors import Conflict, NotFound, StorageUnavailable
from domain.idempotency import CallerKind, move_claim
from domain.payment import Payment
from domain.transitions import TransitionRequest
from domain.validation import format_timestamp
from jobs.checkpoint import (
    Checkpoint,
    CollectionCounts,
    load_checkpoint,
    report_length,
    save_checkpoint,
)
from jobs.group_progress import GroupProgress
from process.bootstrap import payment_store
from process.settings import Settings
from process.tracing import job_trace, open_tracing
from resolvers.workflow import move_payment

__all__ = [
    "DEFAULT_CONCURRENCY",
    "CollectionRun",
    "collect_retries",
    "collect_with_settings",
    "eligible_line",
    "start_or_resume",
    "summary",
]

DEFAULT_CONCURRENCY = 8
# A move DynamoDB did not answer is sent again (same key) this many times in all, the pauses
# between growing by RETRY_PAUSE seconds; then the run stops, resumable from its checkpoint.
MOVE_TRIES = 3
RETRY_PAUSE = 0.5
FAILED_REASON_PREFIX = "collections: "
# Who the audit trail names for the job's writes.
JOB = Actor(ActorKind.JOB, "loc-payments-collect")

logger = logging.getLogger("loc_payments.collect")


def utc_now() -> datetime:
    return datetime.now(UTC)


class Outcome(Enum):
    FAILED = "failed"
    ELIGIBLE = "eligible"
    CONFLICT = "conflicts"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class CollectionRun:
    """What one run does; a checkpoint file makes it resumable."""

    max_attempts: int
    clock: Callable[[], datetime] = utc_now
    dry_run: bool = False
    page_size: int = MAX_PAGE_SIZE
    concurrency: int = DEFAULT_CONCURRENCY
    checkpoint_path: Path | None = None


def eligible_line(payment: Payment, eligibility: RetryEligibility) -> bytes:
    """One payment for the submitter, in the GraphQL API's names and values."""
    deadline = eligibility.deadline
    return (
        json.dumps(
            {
                "userId": payment.user_id,
                "loanId": payment.loan_id,
                "paymentId": payment.payment_id,
                "amountCents": payment.amount_cents,
                "method": payment.method.name,
                "attemptsRemaining": eligibility.attempts_remaining,
                "deadline": format_timestamp(deadline) if deadline is not None else None,
            },
            separators=(",", ":"),
        ).encode()
        + b"\n"
    )


def start_or_resume(run: CollectionRun, fresh: Checkpoint) -> Checkpoint | None:
    """The saved checkpoint of this run if there is one (refused if it is another run's)."""
    if run.checkpoint_path is None:
        return None
    saved = load_checkpoint(run.checkpoint_path)
    if saved is not None:
        saved.check_matches(fresh)
    return saved


async def collect_with_settings(
    settings: Settings,
    run: CollectionRun,
    *,
    endpoint_url: str | None,
    report: IO[bytes],
    start: Checkpoint,
    on_page: Callable[[int, CollectionCounts], None] | None = None,
) -> Checkpoint:
    """`collect_retries` on the table the settings name (created in `local` when missing); with
    tracing on, the run is one trace, and the events it writes link to it."""
    # Recorded as the job's, not the service's (`datasource.permissions`).
    with acting_as(COLLECT_JOB):
        async with (
            open_tracing(settings) as tracer,
            payment_store(settings, endpoint_url=endpoint_url, tracer=tracer) as (store, _created),
        ):
            with job_trace(tracer, "collect") as span:
                final = await collect_retries(
                    store, run, report=report, start=start, on_page=on_page
                )
                span.set_attributes(
                    {f"loc.collect.{name}": count for name, count in asdict(final.counts).items()}
                )
                return final


async def collect_retries(
    store: PaymentStore,
    run: CollectionRun,
    *,
    report: IO[bytes],
    start: Checkpoint,
    on_page: Callable[[int, CollectionCounts], None] | None = None,
) -> Checkpoint:
    """Decide every RETRY payment `start` has not; the final checkpoint says the totals.

    `report` is positioned where the lines go (after what `start` kept of it).
    """
    checkpoint = start
    if checkpoint.merged_cursor is not None:
        # The job before groups stood at one cursor of the merged list: one group, there.
        position = store.status_position(
            status=PaymentStatus.RETRY, cursor=checkpoint.merged_cursor
        )
        checkpoint = dataclasses.replace(
            checkpoint, groups=GroupProgress.after(position), merged_cursor=None
        )
    while not checkpoint.finished:
        listed, groups = await _next_page(store, checkpoint.groups, run.page_size)
        outcomes = await _decide_page(store, run, listed, run_id=checkpoint.run_id)
        report.writelines(line for _, line in outcomes if line is not None)
        report.flush()
        tally = Counter(outcome.value for outcome, _ in outcomes)
        checkpoint = dataclasses.replace(
            checkpoint,
            groups=groups,
            counts=checkpoint.counts.plus(scanned=len(listed), **tally),
        )
        if run.checkpoint_path is not None:
            if checkpoint.report is not None:
                checkpoint = dataclasses.replace(checkpoint, report_bytes=report_length(report))
            save_checkpoint(run.checkpoint_path, checkpoint)
        if on_page is not None:
            on_page(len(listed), checkpoint.counts)
    return checkpoint


async def _next_page(
    store: PaymentStore, groups: GroupProgress, size: int
) -> tuple[list[Payment], GroupProgress]:
    """Up to `size` payments not decided yet, from the groups in turn, and where the groups
    stand after them. Each Query either fills the page or reads a group to its end (one Query
    a page and one a group, in one layout); the groups follow the layouts' modulus as it is
    before each read."""
    listed: list[Payment] = []
    while len(listed) < size:
        groups = groups.regrouped(await store.status_group_modulus())
        group = groups.next_group()
        if group is None:
            break
        page = await store.payments_by_status_group(
            status=PaymentStatus.RETRY,
            modulus=groups.modulus,
            group=group,
            first=size - len(listed),
            after=groups.position(group),
        )
        listed += [
            payment
            for position, payment in page.payments
            if not groups.decided(position, payment.payment_id)
        ]
        groups = groups.advanced(group, page.end, done=page.done)
    return listed, groups


async def _decide_page(
    store: PaymentStore, run: CollectionRun, listed: list[Payment], *, run_id: str
) -> list[tuple[Outcome, bytes | None]]:
    current = await store.batch_get([p.ref for p in listed])
    limit = asyncio.Semaphore(run.concurrency)

    async def decide(payment: Payment | None) -> tuple[Outcome, bytes | None]:
        if payment is None or payment.status is not PaymentStatus.RETRY:
            return Outcome.SKIPPED, None
        async with limit:
            return await _decide(store, run, payment, run_id=run_id)

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(decide(payment)) for payment in current]
    except ExceptionGroup as failures:
        # The group cancelled the rest of the page; the first failure says what went wrong.
        first = failures.exceptions[0]
        raise first from first.__cause__
    return [task.result() for task in tasks]


def _move_key(run_id: str, payment: Payment) -> str:
    """The idempotency key of a run's move of a payment at the version it read: a digest, since
    the run id written out (a UUID's 32 hex digits) can hold a Luhn-valid run of 13 to 19
    digits, which every key is refused for as a card number."""
    named = f"{run_id}/{payment.payment_id}/{payment.version}".encode()
    return "collect-" + base64.urlsafe_b64encode(hashlib.sha256(named).digest()).decode().rstrip(
        "="
    )


async def _decide(
    store: PaymentStore, run: CollectionRun, payment: Payment, *, run_id: str
) -> tuple[Outcome, bytes | None]:
    now = run.clock()
    eligibility = retry_eligibility(payment, max_attempts=run.max_attempts, now=now)
    if eligibility.eligible:
        return Outcome.ELIGIBLE, eligible_line(payment, eligibility)
    reason = f"{FAILED_REASON_PREFIX}{eligibility.reason}"
    if run.dry_run:
        logger.info("would fail %s: %s", _name(payment), reason)
        return Outcome.FAILED, None
    request = TransitionRequest.checked(PaymentStatus.FAILED, reason)
    # One key per run and version read: a try sent again after UNAVAILABLE is applied once.
    key = _move_key(run_id, payment)
    claim = move_claim(key, payment.ref, request, caller=CallerKind.of(JOB.kind), now=now)
    try:
        for attempt in range(1, MOVE_TRIES + 1):
            try:
                await move_payment(
                    store,
                    payment,
                    request,
                    actor=JOB,
                    clock=lambda: now,
                    max_attempts=run.max_attempts,
                    idempotency=claim,
                )
                break
            except StorageUnavailable:
                if attempt == MOVE_TRIES:
                    raise
                await asyncio.sleep(RETRY_PAUSE * attempt)
    except (Conflict, NotFound) as error:
        # Someone else moved it since we read it; whatever they did stands.
        logger.info("left %s to the writer that changed it: %s", _name(payment), error.message)
        return Outcome.CONFLICT, None
    return Outcome.FAILED, None


def _name(payment: Payment) -> str:
    return f"{payment.user_id}/{payment.loan_id}/{payment.payment_id}"


def summary(checkpoint: Checkpoint) -> str:
    """The last line of a run."""
    suffix = " (dry run: nothing written)" if checkpoint.dry_run else ""
    return f"collect: {checkpoint.counts.summary()}{suffix}"
