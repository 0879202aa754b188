"""The service's retries of DynamoDB calls (`datasource.retries`, `datasource.transactions`):
what is retried, how long it waits, that it never starts a retry its operation's budget cannot
finish, and that a throttled transaction is sent again."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError, ParamValidationError, ReadTimeoutError

from datasource import DynamoConfig, PaymentStore, count_calls, open_store
from datasource.deadline import storage_budget
from datasource.retries import RetryPolicy, Throttles
from domain.errors import StorageUnavailable
from harness.proxy import Proxy, proxy_to
from tests.backends import CURSOR_SECRET
from tests.payment_samples import ref_of, sample_payment, stored_new

POLICY = RetryPolicy(attempts=6, base=0.02, cap=0.1)
STORE_ATTEMPTS = DynamoConfig(table_name="any", region="any").max_attempts  # the default
GET_ITEM = SimpleNamespace(name="GetItem")
QUERY = SimpleNamespace(name="Query")


def answer(status: int, code: str = "") -> tuple[Any, dict[str, Any]]:
    parsed = {"Error": {"Code": code, "Message": "no"}} if code else {}
    return SimpleNamespace(status_code=status), parsed


def decide(
    policy: RetryPolicy = POLICY,
    *,
    response: Any = None,
    error: BaseException | None = None,
    attempts: int = 1,
    operation: Any = GET_ITEM,
    context: dict[str, Any] | None = None,
    throttles: Throttles | None = None,
) -> float | None:
    return policy.needs_retry(
        response=response,
        operation=operation,
        attempts=attempts,
        caught_exception=error,
        request_dict={"context": context or {}},
        throttles=throttles,
    )


@pytest.mark.parametrize(
    "response",
    [
        answer(400, "ProvisionedThroughputExceededException"),
        answer(400, "ThrottlingException"),
        answer(400, "RequestLimitExceeded"),
        answer(400, "TransactionInProgressException"),
        answer(500, "InternalServerError"),
        answer(503, "ServiceUnavailable"),
        answer(502),
    ],
)
async def test_throttles_and_transient_errors_are_retried_after_a_short_jittered_wait(
    response: Any,
) -> None:
    waits = [decide(response=response, attempts=attempt) for attempt in (1, 2, 3, 4, 5)]
    for attempt, wait in enumerate(waits, start=1):
        assert wait is not None
        assert 0 <= wait <= min(POLICY.cap, POLICY.base * 2 ** (attempt - 1))


@pytest.mark.parametrize(
    "response",
    [
        answer(400, "ConditionalCheckFailedException"),
        answer(400, "TransactionCanceledException"),  # read by `datasource.transactions`
        answer(400, "ValidationException"),
        answer(400, "ResourceNotFoundException"),
        answer(200),
    ],
)
async def test_answers_that_another_attempt_would_not_change_are_not_retried(
    response: Any,
) -> None:
    assert decide(response=response) is None


async def test_an_attempt_without_an_answer_is_retried_and_a_bug_of_ours_is_not() -> None:
    lost = EndpointConnectionError(endpoint_url="http://127.0.0.1:1")
    timed_out = ReadTimeoutError(endpoint_url="http://127.0.0.1:1")
    assert decide(error=lost) is not None and decide(error=timed_out) is not None
    assert decide(error=ParamValidationError(report="bad")) is None


async def test_no_attempt_beyond_the_policys_count() -> None:
    throttled = answer(400, "ThrottlingException")
    assert decide(response=throttled, attempts=POLICY.attempts - 1) is not None
    assert decide(response=throttled, attempts=POLICY.attempts) is None


async def test_a_retry_that_cannot_finish_within_the_budget_is_not_started() -> None:
    throttled = answer(400, "ProvisionedThroughputExceededException")
    loop = asyncio.get_running_loop()

    def after(took: float) -> float | None:
        """The decision on an attempt that took `took` seconds."""
        started = {"loc_payments_attempt_started": loop.time() - took}
        return decide(response=throttled, context=started)

    with storage_budget(0.05):
        # Another attempt as long as the one just made (50 ms) does not fit in what is left.
        assert after(0.05) is None
        # One that took no time, with the first wait (at most 20 ms): it fits.
        assert after(0.0) is not None
    with storage_budget(10.0):
        assert after(0.05) is not None


async def test_each_throttle_is_counted_by_api_and_index_for_the_client_and_the_request() -> None:
    throttles = Throttles()
    with count_calls() as count:
        decide(response=answer(400, "ThrottlingException"), throttles=throttles)
        decide(
            response=answer(400, "ProvisionedThroughputExceededException"),
            operation=QUERY,
            context={"loc_payments_index": "GSI2"},
            throttles=throttles,
        )
        decide(response=answer(500, "InternalServerError"), throttles=throttles)
    assert throttles.counts == {("GetItem", "table"): 1, ("Query", "GSI2"): 1}
    assert count.throttles == throttles.counts


@pytest.fixture
async def behind_proxy(ddblocal_config: DynamoConfig) -> AsyncIterator[tuple[PaymentStore, Proxy]]:
    """The service's store on DynamoDB Local, through the throttling proxy."""
    assert ddblocal_config.endpoint_url is not None
    async with proxy_to(ddblocal_config.endpoint_url) as proxy:
        config = dataclasses.replace(ddblocal_config, endpoint_url=proxy.url)
        async with open_store(config, cursor_secret=CURSOR_SECRET) as store:
            yield store, proxy


# Throttled this long. The waits between tries are the policy's (asserted above, drawn from at
# most 250 ms); botocore's own retries are off, seen here as every throttle counted by the store.
THROTTLED_FOR = 0.3


@pytest.mark.ddblocal
async def test_a_throttled_call_is_retried_through_the_store_until_it_goes(
    behind_proxy: tuple[PaymentStore, Proxy],
) -> None:
    store, proxy = behind_proxy
    payment = sample_payment()
    proxy.throttle(1.0)
    asyncio.get_running_loop().call_later(THROTTLED_FOR, proxy.throttle, 0.0)
    with count_calls() as count, storage_budget(15.0):
        started = time.monotonic()
        # A transaction cancelled for ThrottlingError, then a throttled GetItem.
        await stored_new(store, payment)
        assert await store.get(ref_of(payment)) == payment
    took = time.monotonic() - started
    assert proxy.throttled["TransactWriteItems"] >= 2
    assert count.operations["TransactWriteItems"] >= 3  # each transaction is a call of ours
    assert count.throttles[("TransactWriteItems", "table")] == proxy.throttled["TransactWriteItems"]
    assert store.throttles.total == sum(proxy.throttled.values())
    # A guard against a hang, not a latency (`make bench` measures those).
    assert took < THROTTLED_FOR + 10.0, took


@pytest.mark.ddblocal
async def test_a_storm_longer_than_the_budget_answers_unavailable_within_it_breaker_closed(
    behind_proxy: tuple[PaymentStore, Proxy],
) -> None:
    store, proxy = behind_proxy
    proxy.throttle(1.0)
    for write, api in ((True, "TransactWriteItems"), (False, "GetItem")):
        started = time.monotonic()
        with storage_budget(0.5), pytest.raises(StorageUnavailable):
            if write:
                await stored_new(store, sample_payment())
            else:
                await store.get(ref_of(sample_payment()))
        # A guard against a hang, not a latency (`make bench` measures those).
        assert time.monotonic() - started < 0.5 + 10.0
        # Retried while the budget allowed, and ended by it: more than twice, short of the
        # store's 16 attempts (whose waits take about 1.6 s on average).
        assert 2 < proxy.throttled[api] < STORE_ATTEMPTS, api
    assert store.breaker is not None and store.breaker.state == "closed"
