"""The collection job on a real table: who fails, who is reported, and resuming after a crash."""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import jobs.checkpoint
import jobs.collect
from datasource import GroupPage, PaymentStore, to_item
from domain import validation
from domain.enums import PaymentMethod, PaymentStatus
from domain.errors import InvalidInput, StorageUnavailable
from domain.history import PaymentEvent, event_of
from domain.idempotency import WriteOutcome
from domain.payment import Payment
from domain.transitions import TransitionRequest, apply_transition
from jobs.checkpoint import CollectionCounts, load_checkpoint
from tests.datasource.stored_items import all_items, put_all, raw_item
from tests.jobs.collect_runs import (
    MAX_ATTEMPTS,
    SOON,
    ids,
    reported,
    reported_ids,
    retry_payment,
    run_job,
)
from tests.payment_samples import NOW, TEST_ACTOR, ref_of

S = PaymentStatus
PINLESS = PaymentMethod.PINLESS


class Stop(Exception):
    """A crash, injected."""


async def _stored(store: PaymentStore, payments: list[Payment]) -> dict[str, Payment]:
    found = await store.batch_get([ref_of(payment) for payment in payments])
    assert None not in found
    return {payment.payment_id: payment for payment in found if payment is not None}


async def test_a_spent_payment_fails_and_the_others_are_reported(
    store: PaymentStore, tmp_path: Path
) -> None:
    spent = retry_payment(eligible=False)
    ach = retry_payment(eligible=True)
    pinless = retry_payment(eligible=True, method=PINLESS)
    await put_all(store, [spent, ach, pinless])

    final = await run_job(store, tmp_path)

    failed = await store.get(ref_of(spent))
    assert failed is not None
    assert (failed.status, failed.version, failed.update_reason, failed.updated_at) == (
        S.FAILED,
        spent.version + 1,
        f"collections: all {MAX_ATTEMPTS} presentments are used",
        SOON,
    )
    # Newest first, in the API's names; only ACH has a re-presentment deadline.
    assert reported(tmp_path) == [
        {
            "userId": "alice",
            "loanId": "loan-1",
            "paymentId": pinless.payment_id,
            "amountCents": 12_345,
            "method": "PINLESS",
            "attemptsRemaining": 1,
            "deadline": None,
        },
        {
            "userId": "alice",
            "loanId": "loan-1",
            "paymentId": ach.payment_id,
            "amountCents": 12_345,
            "method": "ACH",
            "attemptsRemaining": 1,
            "deadline": "2026-08-29T15:30:00.123Z",
        },
    ]
    assert final.counts == CollectionCounts(scanned=3, failed=1, eligible=2)
    assert final.finished


async def test_the_clock_closes_the_180_day_window(
    store: PaymentStore, tmp_path_factory: pytest.TempPathFactory
) -> None:
    payment = retry_payment(eligible=True)
    await put_all(store, [payment])
    deadline = NOW + timedelta(days=180)

    on_the_day = await run_job(store, tmp_path_factory.mktemp("run"), clock=lambda: deadline)
    after_it = await run_job(
        store, tmp_path_factory.mktemp("run"), clock=lambda: deadline + timedelta(seconds=1)
    )

    assert (on_the_day.counts.eligible, after_it.counts.failed) == (1, 1)
    failed = await store.get(ref_of(payment))
    assert failed is not None
    assert failed.status is S.FAILED
    assert failed.update_reason == (
        "collections: the 180-day re-presentment window closed at 2026-08-29T15:30:00.123000+00:00"
    )


async def test_a_dry_run_writes_nothing_and_reports_all_the_same(
    store: PaymentStore, tmp_path: Path
) -> None:
    spent, eligible = retry_payment(eligible=False), retry_payment(eligible=True)
    await put_all(store, [spent, eligible])

    final = await run_job(store, tmp_path, dry_run=True)

    assert final.counts == CollectionCounts(scanned=2, failed=1, eligible=1)
    assert reported_ids(tmp_path) == [eligible.payment_id]
    assert await raw_item(store, spent) == to_item(spent)


async def test_the_audit_trail_records_each_failure(
    moto_store: PaymentStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spent = retry_payment(eligible=False)
    await put_all(moto_store, [spent])

    with caplog.at_level(logging.INFO, logger="loc_payments.audit"):
        await run_job(moto_store, tmp_path)

    (record,) = [record for record in caplog.records if record.name == "loc_payments.audit"]
    event = vars(record)
    assert (event["payment_id"], event["from_status"], event["to_status"], event["version"]) == (
        spent.payment_id,
        "RETRY",
        "FAILED",
        spent.version + 1,
    )
    assert (event["actor_id"], event["actor_kind"]) == ("loc-payments-collect", "job")


async def test_a_payment_another_writer_moves_first_is_a_conflict_left_alone(
    moto_store: PaymentStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spent = retry_payment(eligible=False)
    await put_all(moto_store, [spent])
    write = moto_store.transition

    async def skipped_meanwhile(
        current: Payment, updated: Payment, *, event: PaymentEvent, **options: Any
    ) -> WriteOutcome:
        skip = TransitionRequest(target=S.SKIPPED, reason="customer paid another way")
        skipped = apply_transition(current, skip, max_attempts=3, now=SOON)
        await write(current, skipped, event=event_of(current, skipped, TEST_ACTOR))
        return await write(current, updated, event=event, **options)

    monkeypatch.setattr(moto_store, "transition", skipped_meanwhile)
    final = await run_job(moto_store, tmp_path)

    assert final.counts == CollectionCounts(scanned=1, conflicts=1)
    stored = await moto_store.get(ref_of(spent))
    assert stored is not None
    assert stored.status is S.SKIPPED


async def test_a_failure_whose_answer_was_lost_is_sent_again_and_applied_once(
    store: PaymentStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spent = retry_payment(eligible=False)
    await put_all(store, [spent])
    write = store.transition
    keys: list[str] = []

    async def answer_lost_once(
        current: Payment, updated: Payment, *, event: PaymentEvent, **options: Any
    ) -> WriteOutcome:
        outcome = await write(current, updated, event=event, **options)
        keys.append(options["idempotency"].key)
        if len(keys) == 1:
            raise StorageUnavailable()  # written, and the answer never came
        return outcome

    monkeypatch.setattr(store, "transition", answer_lost_once)
    monkeypatch.setattr(jobs.collect, "RETRY_PAUSE", 0.01)
    final = await run_job(store, tmp_path)

    assert final.counts == CollectionCounts(scanned=1, failed=1)
    # The same key both times: the run's, for the version it read.
    assert keys == [jobs.collect._move_key(final.run_id, spent)] * 2
    assert len(set(keys)) == 1 and keys[0].startswith("collect-")
    stored = await store.get(ref_of(spent))
    assert stored is not None
    assert (stored.status, stored.version) == (S.FAILED, spent.version + 1)
    events = [i for i in await all_items(store) if i["SK"]["S"].startswith("HISTORY#")]
    assert [int(e["loc_version"]["N"]) for e in events] == [spent.version + 1]


async def test_a_payment_that_left_retry_after_the_index_listed_it_is_skipped(
    moto_store: PaymentStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The index may lag the table: the job decides on the table's item, read again.
    eligible = retry_payment(eligible=True)
    await put_all(moto_store, [eligible])
    list_page = moto_store.payments_by_status_group

    async def presented_meanwhile(**arguments: Any) -> GroupPage:
        page = await list_page(**arguments)
        for _, payment in page.payments:
            await put_all(moto_store, [dataclasses.replace(payment, status=S.ACHSENT)])
        return page

    monkeypatch.setattr(moto_store, "payments_by_status_group", presented_meanwhile)
    final = await run_job(moto_store, tmp_path)

    assert final.counts == CollectionCounts(scanned=1, skipped=1)
    assert reported_ids(tmp_path) == []


@pytest.mark.parametrize("pattern", ["all fail", "all eligible", "alternating"])
async def test_a_resumed_run_continues_after_its_position_even_once_its_payment_left_the_index(
    store: PaymentStore, tmp_path: Path, pattern: str
) -> None:
    eligibility = {
        "all fail": [False] * 7,
        "all eligible": [True] * 7,
        "alternating": [index % 2 == 0 for index in range(7)],
    }[pattern]
    payments = [retry_payment(eligible=eligible) for eligible in eligibility]
    await put_all(store, payments)

    def crash_after_the_first_page(listed: int, counts: CollectionCounts) -> None:
        raise Stop()

    with pytest.raises(Stop):
        await run_job(store, tmp_path, page_size=3, on_page=crash_after_the_first_page)
    first = load_checkpoint(tmp_path / "checkpoint.json")
    assert first is not None
    # The one group stands at the third newest payment; when it failed it left the index.
    assert first.counts.scanned == 3
    final = await run_job(store, tmp_path, page_size=3)

    stored = await _stored(store, payments)
    failed = {
        p.payment_id for p, eligible in zip(payments, eligibility, strict=True) if not eligible
    }
    assert {id for id, payment in stored.items() if payment.status is S.FAILED} == failed
    assert sorted(reported_ids(tmp_path)) == sorted(ids(payments) - failed)
    assert final.counts == CollectionCounts(scanned=7, failed=len(failed), eligible=7 - len(failed))


async def test_a_crash_between_the_report_and_the_checkpoint_reports_each_payment_once(
    store: PaymentStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payments = [retry_payment(eligible=True) for _ in range(5)]
    await put_all(store, payments)
    save = jobs.checkpoint.save_checkpoint
    saves = 0

    def crash_on_the_second_save(*arguments: Any) -> None:
        nonlocal saves
        saves += 1
        if saves == 2:
            raise Stop()
        save(*arguments)

    monkeypatch.setattr("jobs.collect.save_checkpoint", crash_on_the_second_save)
    with pytest.raises(Stop):
        await run_job(store, tmp_path, page_size=2)
    # The second page's lines reached the file; its checkpoint did not.
    assert len(reported_ids(tmp_path)) == 4
    monkeypatch.undo()
    final = await run_job(store, tmp_path, page_size=2)

    assert sorted(reported_ids(tmp_path)) == sorted(ids(payments))
    assert final.counts == CollectionCounts(scanned=5, eligible=5)


# On DynamoDB Local alone: its paging is DynamoDB's, and it lists a thousand items five times
# faster than moto.
@pytest.mark.ddblocal
async def test_a_thousand_retries_with_a_crash_halfway_are_each_failed_or_reported_once(
    ddblocal_store: PaymentStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ddblocal_store
    methods = [PaymentMethod.ACH, PINLESS]
    payments = [
        retry_payment(eligible=index % 3 != 0, method=methods[index % 2]) for index in range(1000)
    ]
    to_fail = {payment.payment_id for index, payment in enumerate(payments) if index % 3 == 0}
    await put_all(store, payments)
    write = store.transition
    pages = writes = 0

    def count_page(listed: int, counts: CollectionCounts) -> None:
        nonlocal pages
        pages += 1

    async def crash_in_the_sixth_page(
        current: Payment, updated: Payment, *, event: PaymentEvent, **options: Any
    ) -> WriteOutcome:
        nonlocal writes
        if pages == 5:
            writes += 1
            if writes == 10:  # of about 33 (which groups a page reads depends on the ids)
                raise Stop()
        return await write(current, updated, event=event, **options)

    monkeypatch.setattr(store, "transition", crash_in_the_sixth_page)
    with pytest.raises(Stop):
        await run_job(store, tmp_path, on_page=count_page)
    halfway = load_checkpoint(tmp_path / "checkpoint.json")
    assert halfway is not None
    assert (halfway.counts.scanned, halfway.finished) == (500, False)
    monkeypatch.undo()
    final = await run_job(store, tmp_path)

    stored = await _stored(store, payments)
    for payment in payments:
        found = stored[payment.payment_id]
        if payment.payment_id in to_fail:
            # Failed exactly once: one write on top of the version we stored.
            assert (found.status, found.version) == (S.FAILED, payment.version + 1)
            assert found.update_reason.startswith("collections: ")
        else:
            assert (found.status, found.version) == (S.RETRY, payment.version)
    report = Counter(reported_ids(tmp_path))
    assert set(report) == ids(payments) - to_fail
    assert set(report.values()) == {1}
    counts = final.counts
    assert (counts.eligible, final.finished) == (666, True)
    # The counts miss only the failures of the page that crashed. Most left the index before the
    # resumed run listed it; a write still in flight at the crash can land just after the listing
    # and be read back as no longer in RETRY (skipped), or, later still, be a conflict.
    never_listed = 1000 - counts.scanned
    assert len(to_fail) == counts.failed + counts.skipped + counts.conflicts + never_listed


def test_a_moves_key_never_reads_as_a_card_number() -> None:
    # A run id is a UUID's 32 hex digits: a run of them can be a Luhn-valid card number, which
    # every idempotency key is refused for (a collection run failed on one).
    run_id = "4111111111111111abcdefabcdefabcd"
    payment = SimpleNamespace(payment_id="0190f5a4-0000-7000-8000-000000000000", version=7)
    with pytest.raises(InvalidInput):
        validation.idempotency_key("idempotencyKey", f"collect-{run_id}-{payment.payment_id}-v7")

    key = jobs.collect._move_key(run_id, payment)  # type: ignore[arg-type]

    assert validation.idempotency_key("idempotencyKey", key) == key
