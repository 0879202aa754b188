"""Consumed capacity (SPEC §11), as a caller sees it in `extensions.dynamodb` and an operator in
the metrics; measured on DynamoDB Local, which reports capacity as DynamoDB does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from datasource import DynamoConfig
from tests.api.conftest import Api, Clock, api_client
from tests.api.metrics import metric

pytestmark = pytest.mark.ddblocal

CREATE = """mutation($input: CreatePaymentInput!) { createPayment(input: $input) {
  ... on PaymentPayload { payment { paymentId } } } }"""
SUBMIT = """mutation($input: SubmitPaymentInput!) { submitPayment(input: $input) {
  __typename } }"""
SKIP = """mutation($input: SkipPaymentInput!) { skipPayment(input: $input) { __typename } }"""
RETRIES = "query Retries { paymentsByStatus(status: PENDING) { edges { cursor } } }"
NEW_PAYMENT = {"userId": "alice", "loanId": "loan-1", "amountCents": 5000, "method": "ACH"}


@pytest.fixture
async def api(ddblocal_config: DynamoConfig, clock: Clock) -> AsyncIterator[Api]:
    async with api_client(ddblocal_config, clock=clock) as client:
        yield client


def report(body: dict[str, Any]) -> dict[str, Any]:
    assert "errors" not in body, body["errors"]
    dynamodb: dict[str, Any] = body["extensions"]["dynamodb"]
    return dynamodb


def lookup(payment: dict[str, Any]) -> str:
    return (
        f'query {{ payment(userId: "{payment["userId"]}", loanId: "{payment["loanId"]}", '
        f'paymentId: "{payment["paymentId"]}") {{ status }} }}'
    )


def moved(payment: dict[str, Any], **extra: Any) -> dict[str, Any]:
    named = ("userId", "loanId", "paymentId")
    return {"input": {key: payment[key] for key in named} | {"reason": "test"} | extra}


async def test_one_payment_by_id_reads_its_item_and_writes_nothing(
    api: Api, ddblocal_config: DynamoConfig
) -> None:
    payment = await api.create()

    dynamodb = report(await api.post(lookup(payment), debug=True))

    table = ddblocal_config.table_name
    assert dynamodb["requests"] == 1
    assert dynamodb["readCapacityUnits"] > 0
    assert dynamodb["writeCapacityUnits"] == 0.0
    assert dynamodb["capacity"] == {
        table: {"read": dynamodb["readCapacityUnits"], "write": 0.0},
    }


async def test_a_creation_writes_the_payment_its_indexes_and_its_event(
    api: Api, ddblocal_config: DynamoConfig
) -> None:
    dynamodb = report(await api.post(CREATE, {"input": NEW_PAYMENT}, debug=True))

    table = ddblocal_config.table_name
    assert dynamodb["operations"] == {"TransactWriteItems": 1}
    # Two items (the payment on the table, GSI1 and GSI2; its event on the table and the
    # events feed's GSI4), each unit twice in a transaction.
    assert dynamodb["readCapacityUnits"] == 0.0
    assert dynamodb["writeCapacityUnits"] == 10.0
    assert dynamodb["capacity"] == {
        table: {"read": 0.0, "write": 4.0},
        f"{table}/GSI1": {"read": 0.0, "write": 2.0},
        f"{table}/GSI2": {"read": 0.0, "write": 2.0},
        f"{table}/GSI4": {"read": 0.0, "write": 2.0},
    }


async def test_a_presentment_reads_strongly_and_writes_the_confirmation_index(
    api: Api, ddblocal_config: DynamoConfig
) -> None:
    payment = await api.create()
    lookup_units = report(await api.post(lookup(payment), debug=True))["readCapacityUnits"]

    body = await api.post(SUBMIT, moved(payment, confirmationId="c-1"), debug=True)

    dynamodb = report(body)
    assert body["data"]["submitPayment"]["__typename"] == "PaymentPayload"
    assert dynamodb["operations"] == {"GetItem": 1, "TransactWriteItems": 1}
    # The read that decides the move is strong: never cheaper than a query's own read.
    assert dynamodb["readCapacityUnits"] >= lookup_units > 0
    assert dynamodb["writeCapacityUnits"] > 10.0  # indexes' keys move; GSI3 gets the id
    table = ddblocal_config.table_name
    # GSI4: the move's event, in the events feed.
    assert set(dynamodb["capacity"]) == {table, *(f"{table}/GSI{n}" for n in (1, 2, 3, 4))}
    assert dynamodb["capacity"][f"{table}/GSI3"]["write"] > 0
    assert dynamodb["writeCapacityUnits"] == sum(
        units["write"] for units in dynamodb["capacity"].values()
    )


async def test_a_refused_move_costs_its_read_alone(api: Api) -> None:
    payment = await api.create()
    assert (await api.move("skipPayment", payment))["__typename"] == "PaymentPayload"

    body = await api.post(SKIP, moved(payment), debug=True)

    dynamodb = report(body)
    assert body["data"]["skipPayment"]["__typename"] == "InvalidTransitionError"
    assert dynamodb["operations"] == {"GetItem": 1}
    assert dynamodb["readCapacityUnits"] > 0
    assert dynamodb["writeCapacityUnits"] == 0.0


async def test_a_list_by_status_reads_gsi2_alone(api: Api, ddblocal_config: DynamoConfig) -> None:
    await api.create()

    dynamodb = report(await api.post(RETRIES, debug=True))

    table = ddblocal_config.table_name
    assert dynamodb["readCapacityUnits"] > 0
    assert dynamodb["capacity"] == {
        f"{table}/GSI2": {"read": dynamodb["readCapacityUnits"], "write": 0.0}
    }


async def test_capacity_units_are_counted_by_operation_api_and_kind(api: Api) -> None:
    await api.post(CREATE, {"input": NEW_PAYMENT})
    await api.post(RETRIES)

    text = (await api.http.get("/metrics")).text

    name = "loc_payments_dynamodb_capacity_units_total"
    series = [line for line in text.splitlines() if line.startswith(f"{name}{{")]
    creation = 'api="TransactWriteItems",kind="write",operation="createPayment"'
    assert f"{name}{{{creation}}} 10.0" in series
    # A kind that consumed nothing has no series: the creation read nothing.
    assert not any('operation="createPayment"' in line and 'kind="read"' in line for line in series)
    assert metric(text, name, operation="Retries", api="Query", kind="read") > 0


async def test_readiness_still_answers(api: Api) -> None:
    # DescribeTable refuses `ReturnConsumedCapacity`: it must not be asked for there.
    response = await api.http.get("/readyz")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
