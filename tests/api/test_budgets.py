"""Per-client budgets over HTTP (SPEC §21): `extensions.cost` against the engine's cost for lists,
lookups and mutations; a request over budget refused with 429, `Retry-After` and THROTTLED for
either media type, nothing run; refunds; who pays (customer, service client, override, the
gateway's forwarded customer); anonymous requests are not charged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from graphql import parse

from datasource import DynamoConfig
from engine import operation_cost
from schema import build_schema, payments_limits
from tests.api.conftest import ALICE, BOB, SERVICE, Api, api_client, payment_items, token

PAGE = """query($loan: ID!, $first: Int) {
  loan(userId: "alice", loanId: $loan) {
    payments(first: $first) { edges { node { id amountCents } } }
  }
}"""
LOOKUP = """query($payment: ID!) {
  payment(userId: "alice", loanId: "loan-1", paymentId: $payment) { id amountCents loan { loanId } }
}"""
CREATE = """mutation($input: CreatePaymentInput!) { createPayment(input: $input) { __typename } }"""
SCHEMA = build_schema()


def engine_cost(query: str, variables: dict[str, Any]) -> int:
    """What the engine counts for a query (`engine.limits`), the number the budget charges."""
    return operation_cost(SCHEMA.served, parse(query), None, variables, payments_limits())


def service_token(client: str, user: str = "job") -> str:
    """A service token issued to an OAuth client (`azp`), as an identity provider issues one."""
    return token(user, service=True, azp=client)


async def post(
    api: Api,
    query: str,
    variables: dict[str, Any] | None = None,
    *,
    as_: str | None = SERVICE,
    accept: str = "application/json",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], dict[str, Any]]:
    sent = {"accept": accept, **(headers or {})}
    if as_ is not None:
        sent["authorization"] = f"Bearer {as_}"
    response = await api.http.post(
        api.endpoint, json={"query": query, "variables": variables or {}}, headers=sent
    )
    return response.status_code, dict(response.headers), response.json()


def cost_of(body: dict[str, Any]) -> dict[str, Any]:
    cost: dict[str, Any] = body["extensions"]["cost"]
    return cost


def create_input(**extra: Any) -> dict[str, Any]:
    return {
        "userId": "alice",
        "loanId": "loan-1",
        "amountCents": 5000,
        "method": "ACH",
        "intendedInstallmentId": "inst-1",
        "accountLastFour": "6789",
        **extra,
    }


@pytest.fixture
async def api(moto_config: DynamoConfig) -> AsyncIterator[Api]:
    """The engine's count, charged as it is: a first parse costs no more than any operation
    (what it costs on its own: `test_a_new_document_costs_at_least_its_first_parse`)."""
    async with api_client(moto_config, budget_new_document_cost=1) as api:
        yield api


@pytest.fixture
async def small(moto_config: DynamoConfig) -> AsyncIterator[Api]:
    """Budgets of 100 at a rate so slow (1 a minute) that nothing refills during a test."""
    async with api_client(
        moto_config,
        budget_new_document_cost=1,
        max_query_cost=100,
        budget_customer_rate=1 / 60,
        budget_customer_burst=100,
        budget_service_rate=1 / 60,
        budget_service_burst=100,
        budget_overrides="big-client=1/400",
    ) as api:
        yield api


async def test_a_page_costs_what_the_engine_counts_and_refunds_the_items_not_returned(
    api: Api,
) -> None:
    payments = [await api.create() for _ in range(3)]
    variables = {"loan": "loan-1", "first": 10}
    status, _, body = await post(api, PAGE, variables)
    assert status == 200
    assert len(body["data"]["loan"]["payments"]["edges"]) == len(payments)
    cost = cost_of(body)
    assert cost["requestedQueryCost"] == engine_cost(PAGE, variables)
    # What a page of exactly the items returned would cost.
    assert cost["actualQueryCost"] == engine_cost(PAGE, {**variables, "first": 3})
    assert cost["actualQueryCost"] < cost["requestedQueryCost"]
    settings = api.app.state.budgets.policy.service
    assert cost["throttleStatus"]["maximumAvailable"] == settings.burst
    assert cost["throttleStatus"]["restoreRate"] == settings.rate


async def test_a_lookup_costs_its_selection_and_one_not_found_costs_one(api: Api) -> None:
    payment = await api.create()
    found = {"payment": payment["paymentId"]}
    _, _, body = await post(api, LOOKUP, found)
    assert body["data"]["payment"]["id"] == payment["id"]
    assert cost_of(body)["requestedQueryCost"] == engine_cost(LOOKUP, found) == 5
    assert cost_of(body)["actualQueryCost"] == 5
    missing = {"payment": "0190f5a4-0000-7000-8000-000000000000"}
    _, _, body = await post(api, LOOKUP, missing)
    assert body["data"]["payment"] is None
    assert cost_of(body) | {"throttleStatus": None} == {
        "requestedQueryCost": 5,
        "actualQueryCost": 1,
        "throttleStatus": None,
    }


async def test_a_mutation_costs_at_least_the_minimum(api: Api) -> None:
    variables = {"input": create_input()}
    _, _, body = await post(api, CREATE, variables)
    assert body["data"]["createPayment"]["__typename"] == "PaymentPayload"
    assert engine_cost(CREATE, variables) == 2
    minimum = api.app.state.budgets.policy.mutation_cost
    assert cost_of(body)["requestedQueryCost"] == cost_of(body)["actualQueryCost"] == minimum
    selecting = CREATE.replace(
        "__typename", "... on PaymentPayload { payment { id " + PAYMENT_SELECTION + " } }"
    )
    _, _, body = await post(api, selecting, {"input": create_input(loanId="loan-2")})
    requested = engine_cost(selecting, variables)
    assert requested > minimum
    assert cost_of(body)["requestedQueryCost"] == requested
    assert cost_of(body)["actualQueryCost"] == requested


PAYMENT_SELECTION = "paymentId userId loanId amountCents status method process createdAt"


async def exhaust(api: Api, as_: str) -> None:
    """Use a budget of at most 100 up: mutations at the least cost of 10 (nothing refunded)
    until one is refused."""
    for _ in range(11):
        status, _, body = await post(api, CREATE, {"input": create_input()}, as_=as_)
        if status == 429:
            return
        assert cost_of(body)["actualQueryCost"] == 10
    raise AssertionError("a budget of 100 admitted 11 operations of 10")


@pytest.mark.parametrize("accept", ["application/json", "application/graphql-response+json"])
async def test_over_budget_is_429_with_retry_after_and_nothing_runs(
    small: Api, moto_config: DynamoConfig, accept: str
) -> None:
    variables = {"loan": "loan-1", "first": 20}
    # Prepared by another caller's request: refused for its cost, not before it is read.
    await post(small, PAGE, variables, as_=BOB)
    await exhaust(small, ALICE)
    stored = len(payment_items(moto_config))
    status, _, body = await post(small, CREATE, {"input": create_input()}, as_=ALICE)
    assert status == 429, body
    assert len(payment_items(moto_config)) == stored  # nothing written
    requested = engine_cost(PAGE, variables)
    status, headers, body = await post(small, PAGE, variables, as_=ALICE, accept=accept)
    assert status == 429, body
    assert headers["content-type"] == accept
    assert "data" not in body
    assert [error["extensions"]["code"] for error in body["errors"]] == ["THROTTLED"]
    retry_after = int(headers["retry-after"])
    assert body["errors"][0]["extensions"]["retryAfter"] == retry_after
    available = cost_of(body)["throttleStatus"]["currentlyAvailable"]
    # At 1 a minute: the seconds until the budget holds the operation's cost, rounded up.
    assert (requested - available - 1) * 60 <= retry_after <= (requested - available) * 60 + 1
    assert cost_of(body)["requestedQueryCost"] == requested
    assert cost_of(body)["actualQueryCost"] == 0


async def test_refunds_come_back_with_the_callers_next_call(small: Api) -> None:
    variables = {"loan": "loan-1", "first": 20}
    _, _, body = await post(small, PAGE, variables, as_=ALICE)  # 82 asked, 2 used
    assert cost_of(body)["actualQueryCost"] == 2
    assert cost_of(body)["throttleStatus"]["currentlyAvailable"] == 98
    # Without the refund the budget would hold 18: 82 would be refused.
    status, _, body = await post(small, PAGE, variables, as_=ALICE)
    assert status == 200, body
    assert cost_of(body)["throttleStatus"]["currentlyAvailable"] == 96


async def test_each_customer_and_each_service_client_has_its_own_budget(small: Api) -> None:
    variables = {"loan": "loan-1", "first": 24}
    assert engine_cost(PAGE, variables) == 98
    await exhaust(small, ALICE)
    status, _, _ = await post(small, PAGE, variables, as_=ALICE)
    assert status == 429
    status, _, _ = await post(small, PAGE, variables, as_=BOB)
    assert status == 200  # bob's budget is his own
    # Two tokens of one OAuth client (`azp`), for different users: one budget.
    await exhaust(small, service_token("client-a", "job-1"))
    status, _, _ = await post(small, PAGE, variables, as_=service_token("client-a", "job-2"))
    assert status == 429
    status, _, body = await post(small, PAGE, variables, as_=service_token("client-b", "job-1"))
    assert status == 200
    # A named client's override.
    status, _, body = await post(small, PAGE, variables, as_=service_token("big-client"))
    assert status == 200
    assert cost_of(body)["throttleStatus"]["maximumAvailable"] == 400
    assert cost_of(body)["throttleStatus"]["restoreRate"] == 1


async def test_the_gateway_is_not_charged_its_forwarded_customer_is(small: Api) -> None:
    gateway = token("gateway", scope="payments:gateway")
    subgraph = small.at("/subgraph")
    variables = {"loan": "loan-1", "first": 24}

    async def through_gateway(customer: str) -> tuple[int, dict[str, Any]]:
        status, _, body = await post(
            subgraph,
            PAGE,
            variables,
            as_=gateway,
            headers={"x-forwarded-authorization": f"Bearer {customer}"},
        )
        return status, body

    # What a page costs in the end depends on what it found (the table is the worker's).
    status, body = await through_gateway(ALICE)
    assert status == 200, body
    first = cost_of(body)["actualQueryCost"]
    assert cost_of(body)["throttleStatus"]["currentlyAvailable"] == 100 - first
    # Alice's own budget, over /graphql too.
    _, _, body = await post(small, PAGE, variables, as_=ALICE)
    second = cost_of(body)["actualQueryCost"]
    assert cost_of(body)["throttleStatus"]["currentlyAvailable"] == 100 - first - second
    await exhaust(small, ALICE)
    status, body = await through_gateway(ALICE)
    assert status == 429
    assert body["errors"][0]["extensions"]["code"] == "THROTTLED"
    status, body = await through_gateway(BOB)  # the gateway itself holds no budget
    assert status == 200, body


async def test_unauthenticated_requests_are_not_charged(small: Api) -> None:
    for _ in range(30):
        status, _, body = await post(small, PAGE, {"loan": "loan-1", "first": 24}, as_=None)
        assert status == 200
        assert [error["extensions"]["code"] for error in body["errors"]] == ["UNAUTHENTICATED"]
        assert "cost" not in body.get("extensions", {})


async def test_budgets_off_charge_nothing(moto_config: DynamoConfig) -> None:
    async with api_client(moto_config, budgets=False) as api:
        _, _, body = await post(api, LOOKUP, {"payment": "0190f5a4-0000-7000-8000-000000000000"})
    assert "extensions" not in body


async def test_gql_meets_429_with_throttled(small: Api) -> None:
    """What Python's GraphQL client `gql` sees once over budget: the THROTTLED error it raises
    from the 429's body, and `Retry-After` among the answer's headers."""
    from gql import Client, gql
    from gql.transport.exceptions import TransportQueryError
    from gql.transport.httpx import HTTPXAsyncTransport

    await exhaust(small, ALICE)
    transport = HTTPXAsyncTransport(
        url="http://payments.test/graphql",
        headers={"authorization": f"Bearer {ALICE}"},
        transport=httpx.ASGITransport(app=small.app),
    )
    async with Client(transport=transport) as session:
        with pytest.raises(TransportQueryError) as refused:
            request = gql(PAGE)
            request.variable_values = {"loan": "loan-1", "first": 20}
            await session.execute(request)
    assert refused.value.errors is not None
    assert refused.value.errors[0]["extensions"]["code"] == "THROTTLED"
    response = transport.response_headers
    assert response is not None and int(response["retry-after"]) > 0


async def test_a_new_document_costs_at_least_its_first_parse(moto_config: DynamoConfig) -> None:
    async with api_client(moto_config) as api:  # the default least cost of a first parse, 100
        payment = await api.create()
        found = {"payment": payment["paymentId"]}
        first = [cost_of((await post(api, LOOKUP, found))[2]) for _ in range(2)]
    # Parsed, validated and planned anew: charged 100, and no refund below it.
    assert (first[0]["requestedQueryCost"], first[0]["actualQueryCost"]) == (100, 100)
    # Prepared already: its selection's cost.
    assert (first[1]["requestedQueryCost"], first[1]["actualQueryCost"]) == (5, 5)


async def test_a_caller_who_cannot_pay_a_first_parse_is_refused_before_its_text_is_read(
    moto_config: DynamoConfig,
) -> None:
    async with api_client(
        moto_config, budget_service_rate=1 / 60, budget_service_burst=150, max_query_cost=100
    ) as api:
        payment = await api.create(as_=service_token("another-client"))
        found = {"payment": payment["paymentId"]}
        admitted = [await post(api, LOOKUP, found) for _ in range(2)]  # 100, then 5: 45 left
        # New text, even text that does not parse, is refused for the budget, unread.
        unparsed = await post(api, "{ payment(", {})
        another = await post(api, LOOKUP.replace("amountCents", "status"), found)
        # Text prepared already still runs for what it selects.
        cached = await post(api, LOOKUP, found)

    assert [status for status, _, _ in admitted] == [200, 200]
    assert cost_of(admitted[1][2])["throttleStatus"]["currentlyAvailable"] == 45
    for status, headers, body in (unparsed, another):
        assert status == 429, body
        assert [e["extensions"]["code"] for e in body["errors"]] == ["THROTTLED"], body
        assert cost_of(body)["requestedQueryCost"] == 100
        assert int(headers["retry-after"]) > 0
    assert cached[0] == 200 and cost_of(cached[2])["actualQueryCost"] == 5
