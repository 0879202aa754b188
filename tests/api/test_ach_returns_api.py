"""The ACH return rules as a collections job meets them through the API."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from datasource import DynamoConfig, PaymentStore
from tests.api.conftest import Api, Clock, payment_items, stored_items
from tests.jobs.collect_runs import reported, run_job

ELIGIBILITY = """query($u: ID!, $l: ID!, $p: ID!) { payment(userId: $u, loanId: $l, paymentId: $p) {
  status allowedTransitions firstPresentedAt
  retryEligibility { eligible attemptsRemaining deadline reason } } }"""


async def eligibility(api: Api, payment: dict[str, Any]) -> dict[str, Any]:
    variables = {"u": payment["userId"], "l": payment["loanId"], "p": payment["paymentId"]}
    found: dict[str, Any] = (await api.data(ELIGIBILITY, variables))["payment"]
    return found


async def test_a_returned_ach_payment_is_retried_only_for_r01_and_r09(api: Api) -> None:
    payment = await api.create(method="ACH")
    await api.move("submitPayment", payment, confirmationId="conf-1")

    refused = await api.move("schedulePaymentRetry", payment, returnCode="R02")
    assert refused["__typename"] == "InvalidTransitionError"
    assert "R02 is not a retryable return" in refused["message"]

    retry = await api.move("schedulePaymentRetry", payment, returnCode="R09")
    assert retry["payment"]["returnCode"] == "R09"
    found = await eligibility(api, payment)
    assert found["retryEligibility"] == {
        "eligible": True,
        "attemptsRemaining": 2,
        "deadline": found["retryEligibility"]["deadline"],
        "reason": None,
    }


async def present_three_times_with_r01_returns(api: Api) -> dict[str, Any]:
    """An ACH payment presented three times, each presentment returned R01: RETRY, three times."""
    payment = await api.create(method="ACH")
    for attempt in (1, 2, 3):
        sent = await api.move("submitPayment", payment, confirmationId=f"conf-{attempt}")
        assert (sent["payment"]["status"], sent["payment"]["attempts"]) == ("ACHSENT", attempt)
        assert "RETRY" in sent["payment"]["allowedTransitions"]
        retry = await api.move("schedulePaymentRetry", payment, returnCode="R01")
        assert (retry["payment"]["status"], retry["payment"]["attempts"]) == ("RETRY", attempt)
    return payment


async def test_ach_retries_end_in_failed_after_the_third_presentment(
    api: Api, moto_config: DynamoConfig
) -> None:
    payment = await present_three_times_with_r01_returns(api)
    found = await eligibility(api, payment)
    assert found["status"] == "RETRY"
    assert found["allowedTransitions"] == ["FAILED", "SKIPPED"]
    assert found["retryEligibility"] == {
        "eligible": False,
        "attemptsRemaining": 0,
        "deadline": found["retryEligibility"]["deadline"],
        "reason": "all 3 presentments are used",
    }
    before = stored_items(moto_config)

    fourth = await api.move("submitPayment", payment, confirmationId="conf-4")
    assert fourth["__typename"] == "InvalidTransitionError"
    assert (fourth["currentStatus"], fourth["targetStatus"]) == ("RETRY", "ACHSENT")
    assert stored_items(moto_config) == before

    failed = await api.move("failPayment", payment, reason="retried as far as NACHA allows")
    assert (failed["payment"]["status"], failed["payment"]["attempts"]) == ("FAILED", 3)
    [item] = payment_items(moto_config)
    assert (item["loc_status"], item["loc_payment_attempts"]) == ({"S": "FAILED"}, {"N": "3"})


async def test_the_collection_job_fails_an_ach_payment_whose_presentments_are_spent(
    api: Api, clock: Clock, moto_store: PaymentStore, moto_config: DynamoConfig, tmp_path: Path
) -> None:
    payment = await present_three_times_with_r01_returns(api)

    summary = await run_job(moto_store, tmp_path, clock=lambda: clock.now)

    assert (summary.counts.failed, summary.counts.eligible) == (1, 0)
    assert reported(tmp_path) == []
    [item] = payment_items(moto_config)
    assert item["loc_payment_id"] == {"S": payment["paymentId"]}
    assert (item["loc_status"], item["loc_payment_attempts"]) == ({"S": "FAILED"}, {"N": "3"})
    assert item["loc_update_reason"] == {"S": "collections: all 3 presentments are used"}


async def test_re_presentment_stops_after_180_days(
    api: Api, clock: Clock, moto_config: DynamoConfig
) -> None:
    payment = await api.create(method="ACH")
    sent = await api.move("submitPayment", payment, confirmationId="conf-1")
    first = sent["payment"]["firstPresentedAt"]
    await api.move("schedulePaymentRetry", payment, returnCode="R01")

    clock.now += timedelta(days=181)
    found = await eligibility(api, payment)
    assert found["firstPresentedAt"] == first
    assert found["retryEligibility"]["eligible"] is False
    assert "180-day" in found["retryEligibility"]["reason"]
    assert found["allowedTransitions"] == ["FAILED", "SKIPPED"]
    before = stored_items(moto_config)

    refused = await api.move("submitPayment", payment, confirmationId="conf-2")

    assert refused["code"] == "INVALID_TRANSITION"
    assert stored_items(moto_config) == before
    failed = await api.move("failPayment", payment, reason="re-presentment window closed")
    assert failed["payment"]["status"] == "FAILED"


async def test_a_late_return_after_its_window_is_refused(
    api: Api, clock: Clock, moto_config: DynamoConfig
) -> None:
    payment = await api.create(method="ACH")
    await api.move("submitPayment", payment, confirmationId="conf-1")
    done = await api.move("completePayment", payment)
    assert done["payment"]["completedAt"] == done["payment"]["updatedAt"]
    [item] = payment_items(moto_config)
    assert item["loc_completed_date"] == {"S": done["payment"]["completedAt"]}
    assert item["loc_first_presented_date"]["S"] < item["loc_completed_date"]["S"]

    clock.now += timedelta(days=10)
    late = await api.move("returnPayment", payment, returnCode="R02")
    assert late["code"] == "INVALID_TRANSITION"
    assert "2 banking days" in late["message"]

    unauthorized = await api.move("returnPayment", payment, returnCode="R10")
    assert unauthorized["payment"]["status"] == "RETURNED"
