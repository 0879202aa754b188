"""A move whose answer never reached the client, sent again with its key, is applied once.

On DynamoDB Local, through the API, with a proxy in front of DynamoDB: the move's transaction
reaches DynamoDB and is applied, and its connection is cut before the answer (`lose_answers_to`),
or it is cut at once and the request held until the service has answered UNAVAILABLE and only
then applied (`hold`). Either way the client saw
UNAVAILABLE and sends the same request again, as it should. Each case ends with one event per
write, one version step and the attempts the move should have made.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from datasource import DynamoConfig
from harness.proxy import Proxy, proxy_to
from tests.api.conftest import Api, api_client, stored_items
from tests.eventually import eventually

ANSWER = (
    "__typename ... on PaymentPayload { replayed payment { status version attempts } } "
    "... on UserError { code message }"
)
# The proxy cuts the connection of a lost answer (`harness.proxy`): no timeout is waited out,
# so the SDK's are generous, for a loaded machine. Two attempts: the first, and one retry.
FAST_FAILING: dict[str, Any] = {
    "dynamodb_read_timeout": 10.0,
    "dynamodb_connect_timeout": 10.0,
    "dynamodb_max_attempts": 2,
    "dynamodb_budget": 30.0,
    # Lost answers are not an outage: the breaker stays out of these tests.
    "dynamodb_breaker_failures": 1000,
}


@asynccontextmanager
async def behind_a_proxy(config: DynamoConfig) -> AsyncIterator[tuple[Api, Proxy]]:
    assert config.endpoint_url is not None
    async with (
        proxy_to(config.endpoint_url) as proxy,
        api_client(dataclasses.replace(config, endpoint_url=proxy.url), **FAST_FAILING) as api,
    ):
        yield api, proxy


async def send(api: Api, mutation: str, input: dict[str, Any]) -> dict[str, Any]:
    type_name = mutation[0].upper() + mutation[1:] + "Input"
    data = await api.data(
        f"mutation($input: {type_name}!) {{ {mutation}(input: $input) {{ {ANSWER} }} }}",
        {"input": input},
    )
    result: dict[str, Any] = data[mutation]
    return result


@dataclasses.dataclass(frozen=True)
class Case:
    method: str
    before: list[tuple[str, dict[str, Any]]]  # moves that bring the payment to its status
    mutation: str
    input: dict[str, Any]
    status: str
    attempts: int


CASES = {
    "pinless decline again (RETRY -> RETRY)": Case(
        "PINLESS", [("schedulePaymentRetry", {})], "schedulePaymentRetry", {}, "RETRY", 2
    ),
    "pinless decline (PENDING -> RETRY)": Case(
        "PINLESS", [], "schedulePaymentRetry", {}, "RETRY", 1
    ),
    "ach presentment (PENDING -> ACHSENT)": Case(
        "ACH", [], "submitPayment", {"confirmationId": "ach-lost-1"}, "ACHSENT", 1
    ),
    "ach completion with applications": Case(
        "ACH",
        [("submitPayment", {"confirmationId": "ach-lost-2"})],
        "completePayment",
        {
            "applications": [
                {"installmentId": "i-1", "amountCents": 3000},
                {"installmentId": "i-2", "amountCents": 2000},
            ]
        },
        "COMPLETED",
        1,
    ),
    "pinless completion with applications (a presentment)": Case(
        "PINLESS",
        [("schedulePaymentRetry", {})],
        "completePayment",
        {
            "confirmationId": "card-lost-1",
            "applications": [{"installmentId": "i-1", "amountCents": 5000}],
        },
        "COMPLETED",
        2,
    ),
    "ach return": Case(
        "ACH",
        [("submitPayment", {"confirmationId": "ach-lost-3"})],
        "returnPayment",
        {"returnCode": "R03"},
        "RETURNED",
        1,
    ),
    "ach re-presentment (RETRY -> ACHSENT)": Case(
        "ACH",
        [
            ("submitPayment", {"confirmationId": "ach-lost-4"}),
            ("schedulePaymentRetry", {"returnCode": "R01"}),
        ],
        "submitPayment",
        {"confirmationId": "ach-lost-5"},
        "ACHSENT",
        2,
    ),
}


async def prepared(api: Api, case: Case) -> tuple[dict[str, Any], dict[str, Any]]:
    """The payment, brought to the status the case moves from, and the case's whole input."""
    payment = await api.create(method=case.method)
    named = {key: payment[key] for key in ("userId", "loanId", "paymentId")}
    for mutation, extra in case.before:
        result = await send(api, mutation, {**named, "reason": "setup", **extra})
        assert result["__typename"] == "PaymentPayload", result
    key = f"{case.mutation}-{payment['paymentId']}"
    return payment, {**named, "reason": "the move", "idempotencyKey": key, **case.input}


def written_versions(config: DynamoConfig, payment: dict[str, Any]) -> tuple[list[int], int]:
    """The versions of the payment's events, and the version of the payment item."""
    prefix = f"LOAN#{payment['loanId']}#PAYMENT#{payment['paymentId']}"
    items = stored_items(config)
    events = [
        int(i["loc_version"]["N"])
        for i in items
        if i["SK"]["S"] == f"HISTORY#{prefix}" or i["SK"]["S"].startswith(f"HISTORY#{prefix}#V#")
    ]
    [item] = [i for i in items if i["SK"]["S"] == prefix]
    return events, int(item["loc_version"]["N"])


def assert_moved_once(
    config: DynamoConfig, payment: dict[str, Any], case: Case, answer: dict[str, Any]
) -> None:
    final = len(case.before) + 2
    assert answer["__typename"] == "PaymentPayload", answer
    assert answer["payment"] == {"status": case.status, "version": final, "attempts": case.attempts}
    assert written_versions(config, payment) == (list(range(1, final + 1)), final)


@pytest.mark.ddblocal
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_a_move_whose_answer_was_lost_is_applied_once(
    ddblocal_config: DynamoConfig, case: Case
) -> None:
    async with behind_a_proxy(ddblocal_config) as (api, proxy):
        payment, input = await prepared(api, case)
        proxy.lose_answers_to = {"TransactWriteItems"}

        lost = await send(api, case.mutation, input)
        assert lost["code"] == "UNAVAILABLE", lost
        proxy.lose_answers_to = set()
        # It was applied all the same: the client cannot tell, and sends it again.
        assert written_versions(ddblocal_config, payment)[1] == len(case.before) + 2

        again = await send(api, case.mutation, input)
        once_more = await send(api, case.mutation, input)

    assert again["replayed"] is once_more["replayed"] is True
    assert_moved_once(ddblocal_config, payment, case, again)
    assert once_more == again


LATE_CASES = {name: CASES[name] for name in list(CASES)[:1] + list(CASES)[2:3]}


@pytest.mark.ddblocal
@pytest.mark.parametrize("case", LATE_CASES.values(), ids=LATE_CASES.keys())
@pytest.mark.parametrize("lands", ["before the resend", "after the resend"])
async def test_a_move_that_dynamodb_applied_after_the_budget_is_applied_once(
    ddblocal_config: DynamoConfig, case: Case, lands: str
) -> None:
    """The first try reaches DynamoDB only after the service answered UNAVAILABLE: it lands
    before the client's resend is written, or after it (then its condition refuses it)."""
    async with behind_a_proxy(ddblocal_config) as (api, proxy):
        payment, input = await prepared(api, case)
        proxy.hold = {"TransactWriteItems"}
        late = await send(api, case.mutation, input)
        assert late["code"] == "UNAVAILABLE", late
        assert proxy.held >= 1
        proxy.hold = set()  # what was held stays held, until released
        before = len(case.before) + 1
        assert written_versions(ddblocal_config, payment)[1] == before

        if lands == "before the resend":
            proxy.release()
            await eventually(
                lambda: written_versions(ddblocal_config, payment)[1] > before,
                what="the held try landed",
            )
            again = await send(api, case.mutation, input)
            assert again["replayed"] is True
        else:
            again = await send(api, case.mutation, input)
            assert again["replayed"] is False  # the first write to land
            answered = proxy.answers["TransactWriteItems"]
            proxy.release()
            # The held tries (the first, and the SDK's retries of it) land now: each answered.
            await eventually(
                lambda: proxy.answers["TransactWriteItems"] >= answered + proxy.held,
                what=lambda: f"{proxy.held} held tries answered: {proxy.answers}",
            )
        once_more = await send(api, case.mutation, input)

    assert_moved_once(ddblocal_config, payment, case, again)
    assert once_more == {**again, "replayed": True}


@pytest.mark.race
async def test_twenty_resends_with_one_key_make_one_move(ddblocal_config: DynamoConfig) -> None:
    case = CASES["pinless decline again (RETRY -> RETRY)"]
    async with api_client(ddblocal_config) as api:
        payment, input = await prepared(api, case)
        answers = await asyncio.gather(*(send(api, case.mutation, input) for _ in range(20)))

    assert [a["__typename"] for a in answers] == ["PaymentPayload"] * 20, answers
    assert sorted(a["replayed"] for a in answers) == [False] + [True] * 19
    assert {str(a["payment"]) for a in answers} == {
        str({"status": "RETRY", "version": 3, "attempts": 2})
    }
    assert written_versions(ddblocal_config, payment) == ([1, 2, 3], 3)
