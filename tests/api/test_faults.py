"""Reads under faults: a full answer or a typed, retryable error; never a partial list."""

from __future__ import annotations

import time

import pytest

from datasource import DynamoConfig
from tests.api.conftest import api_client, error_codes
from tests.api.faults import FaultyDynamoDB, faulty_settings

READS = [
    'query { loan(userId: "alice", loanId: "loan-1") { payments { edges { cursor } } } }',
    "query { paymentsByStatus(status: RETRY) { edges { cursor } } }",
    'query { payment(userId: "alice", loanId: "l",'
    ' paymentId: "0190f5a4-0000-7000-8000-000000000000") { id } }',
    'query { paymentByConfirmation(userId: "alice", confirmationId: "c") { id } }',
]


@pytest.mark.parametrize("mode", ["throttle", "slow"])
@pytest.mark.parametrize("query", READS, ids=["loan", "by-status", "payment", "by-confirmation"])
async def test_reads_end_in_a_typed_error_after_the_sdk_retries(
    faulty: FaultyDynamoDB, mode: str, query: str
) -> None:
    faulty.mode, faulty.delay = mode, 1.0
    config = DynamoConfig(table_name="payments", region="us-west-2", endpoint_url=faulty.url)

    async with api_client(config, **faulty_settings(faulty)) as api:
        faulty.requests.clear()  # the start's read of the layout record: not the test's
        started = time.monotonic()
        body = await api.post(query)
        elapsed = time.monotonic() - started

    assert error_codes(body) == ["UNAVAILABLE"]
    # No partial answer stands in for the real one: the field is null, the error says why.
    assert body["data"] is None or set(body["data"].values()) == {None}
    # The service tried again (max_attempts 3: three tries) before giving up.
    assert len(faulty.requests) == 3
    # Bounded by the configured timeouts and retries, not by the slow server.
    assert elapsed < 3 * (0.3 + 0.3) + 3.0


async def test_a_mutation_against_throttled_storage_is_unavailable(
    faulty: FaultyDynamoDB,
) -> None:
    config = DynamoConfig(table_name="payments", region="us-west-2", endpoint_url=faulty.url)
    async with api_client(config, **faulty_settings(faulty)) as api:
        faulty.requests.clear()  # the start's read of the layout record: not the test's
        result = await api.mutate(
            "createPayment", {"userId": "alice", "loanId": "l", "amountCents": 1, "method": "ACH"}
        )
    assert (result["__typename"], result["code"]) == ("UnavailableError", "UNAVAILABLE")


async def test_a_query_answers_unavailable_when_its_budget_is_spent(
    faulty: FaultyDynamoDB,
) -> None:
    # A stalled DynamoDB: without a budget, four tries of a 20 s read timeout each. The budget's
    # 0.5 s ends the query within the first; what bounds the time below is that try's timeout,
    # a margin no loaded machine uses up (no latency is asserted: `make bench` measures those).
    # The stall starts once the app has started (its start's reads would wait it out).
    config = DynamoConfig(table_name="payments", region="us-west-2", endpoint_url=faulty.url)
    slow_sdk = faulty_settings(faulty) | {
        "dynamodb_read_timeout": 20.0,
        "dynamodb_max_attempts": 4,
        "dynamodb_budget": 0.5,
    }

    async with api_client(config, **slow_sdk) as api:
        faulty.requests.clear()  # the start's read of the layout record: not the test's
        faulty.mode, faulty.delay = "slow", 60.0
        started = time.monotonic()
        body = await api.post(READS[0])
        elapsed = time.monotonic() - started
        faulty.released.set()  # the stall ends: the app's own reads need not time out to stop

    assert error_codes(body) == ["UNAVAILABLE"]
    assert "time budget" in body["errors"][0]["message"]
    assert 0.5 <= elapsed < 20.0  # the budget ended it, not the try's timeout
    assert len(faulty.requests) == 1  # the one try the budget allowed


async def test_retries_of_a_throttled_mutation_stop_at_the_budget(
    faulty: FaultyDynamoDB,
) -> None:
    config = DynamoConfig(table_name="payments", region="us-west-2", endpoint_url=faulty.url)
    many_retries = faulty_settings(faulty) | {"dynamodb_max_attempts": 30, "dynamodb_budget": 0.4}

    async with api_client(config, **many_retries) as api:
        faulty.requests.clear()  # the start's read of the layout record: not the test's
        started = time.monotonic()
        result = await api.mutate(
            "createPayment", {"userId": "alice", "loanId": "l", "amountCents": 1, "method": "ACH"}
        )
        elapsed = time.monotonic() - started

    assert (result["__typename"], result["code"]) == ("UnavailableError", "UNAVAILABLE")
    # Thirty tries' backoff (up to 20 s each) would take minutes: the budget ended them.
    assert elapsed < 20.0
    # botocore's backoff grows; the budget cut its retries short of the thirty allowed.
    assert 1 <= len(faulty.requests) < 30
