"""The cost bounds the work (SPEC §21, turn 6), one test per finding of the review that walked
around it: an answer never holds more objects than the engine's cost of its operation (a list
with no size argument, introspection), and a page never reads more items than that cost counts
(a page of the sharded `paymentsByStatus`, a filtered `events` page), a page cut short by its
read limit coming back with the cursor that resumes it exactly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from graphql import get_introspection_query, parse

from datasource import DynamoConfig, PaymentStore
from domain import keys
from domain.enums import PaymentStatus
from domain.webhooks import event_id
from engine import operation_cost, uncapped_lists
from schema import build_schema, payments_limits
from tests.api.conftest import Api, Clock, api_client
from tests.backends import CURSOR_SECRET, Backend
from tests.datasource.sharded_tables import lives, seed

SCHEMA = build_schema()
APPLICATIONS = """query($user: ID!, $loan: ID!, $payment: ID!) {
  payment(userId: $user, loanId: $loan, paymentId: $payment) {
    applications { installmentId amountCents }
  }
}"""
ENDPOINTS = "{ webhookEndpoints { endpointId } }"
CREATE_ENDPOINT = """mutation($url: String!) {
  createWebhookEndpoint(input: {url: $url}) {
    __typename ... on InvalidInputError { code field }
  }
}"""
BY_STATUS = """{
  paymentsByStatus(status: PENDING, first: 1) { edges { node { paymentId } } }
}"""
FILTERED = """query($after: String, $types: [String!]) {
  events(first: 5, after: $after, types: $types) {
    edges { node { eventId type } }
    pageInfo { hasNextPage endCursor }
  }
}"""


def engine_cost(query: str, variables: dict[str, Any] | None = None) -> int:
    """The engine's count for the served schema (`requestedQueryCost` before any floor)."""
    return operation_cost(SCHEMA.served, parse(query), None, variables or {}, payments_limits())


def objects(value: Any) -> int:
    """The JSON objects in an answer's `data`, itself included."""
    if isinstance(value, dict):
        return 1 + sum(objects(inner) for inner in value.values())
    if isinstance(value, list):
        return sum(objects(inner) for inner in value)
    return 0


async def read(api: Api, query: str, variables: dict[str, Any] | None = None) -> Any:
    """The answer's data, and the items its reads went through (`X-Debug-DynamoDB`)."""
    body = await api.post(query, variables, debug=True)
    assert "errors" not in body, body["errors"]
    return body["data"], body["extensions"]["dynamodb"]["itemsRead"]


async def completed_with(api: Api, installments: int) -> tuple[dict[str, Any], dict[str, Any]]:
    payment = await api.create(amount=100 * installments)
    await api.move("submitPayment", payment, confirmationId=f"conf-{payment['paymentId']}")
    applications = [{"installmentId": f"inst-{n}", "amountCents": 100} for n in range(installments)]
    return payment, await api.move("completePayment", payment, applications=applications)


@pytest.mark.parametrize("subgraph", [False, True], ids=["/graphql", "/subgraph"])
def test_every_list_of_objects_served_has_a_size_a_cap_or_keys(subgraph: bool) -> None:
    served = build_schema(subgraph=subgraph).served
    assert uncapped_lists(served, payments_limits()) == []


async def test_a_payment_s_applications_cost_each_application(api: Api) -> None:
    payment, completed = await completed_with(api, 12)
    assert completed["__typename"] == "PaymentPayload", completed
    variables = {
        "user": payment["userId"],
        "loan": payment["loanId"],
        "payment": payment["paymentId"],
    }
    data, _ = await read(api, APPLICATIONS, variables)
    assert len(data["payment"]["applications"]) == 12
    assert objects(data) <= engine_cost(APPLICATIONS, variables)


async def test_a_payment_is_applied_to_at_most_twelve_installments(api: Api) -> None:
    _, refused = await completed_with(api, 13)
    assert (refused["code"], refused["field"]) == ("INVALID_INPUT", "applications"), refused


async def created_endpoints(api: Api, count: int) -> list[dict[str, Any]]:
    answers = []
    for n in range(count):
        data = await api.data(CREATE_ENDPOINT, {"url": f"https://hooks{n}.example.com/events"})
        answers.append(data["createWebhookEndpoint"])
    return answers


async def test_the_webhook_endpoints_cost_each_endpoint_the_service_may_hold(api: Api) -> None:
    await created_endpoints(api, 3)
    data, items_read = await read(api, ENDPOINTS)
    assert len(data["webhookEndpoints"]) == 3
    assert objects(data) <= engine_cost(ENDPOINTS)
    assert items_read <= engine_cost(ENDPOINTS)


async def test_the_service_holds_at_most_ten_webhook_endpoints(api: Api) -> None:
    answers = await created_endpoints(api, 11)
    assert [answer["__typename"] for answer in answers[:10]] == ["WebhookEndpointPayload"] * 10
    assert answers[10] == {
        "__typename": "InvalidInputError",
        "code": "INVALID_INPUT",
        "field": "url",
    }


@pytest.mark.parametrize(
    "query",
    [
        get_introspection_query(descriptions=True),
        '{ __type(name: "Payment") { name fields { name type { name kind ofType { name } } } } }',
        "{ __schema { types { name fields { type { fields { name } } } } } }",
    ],
    ids=["full", "one type", "nested"],
)
async def test_introspection_costs_what_it_answers(api: Api, query: str) -> None:
    data, _ = await read(api, query)
    assert objects(data) <= engine_cost(query)


async def test_a_page_of_one_over_64_shards_reads_no_more_than_its_cost(
    api: Api, moto_store: PaymentStore, clock: Clock
) -> None:
    assert moto_store.layout.shards == keys.DEFAULT_GSI2_SHARDS
    payments, events = lives(400, start=clock.now - timedelta(hours=1))
    await seed(moto_store, payments, events)
    data, items_read = await read(api, BY_STATUS)
    assert len(data["paymentsByStatus"]["edges"]) == 1
    # Every shard is asked for its share of the page and a margin: far more than the page.
    assert keys.DEFAULT_GSI2_SHARDS < items_read <= engine_cost(BY_STATUS)


@pytest.fixture(params=[1, keys.DEFAULT_FEED_SHARDS], ids=["one shard", "the default shards"])
async def feed(
    request: pytest.FixtureRequest, ddblocal_config: DynamoConfig, clock: Clock
) -> AsyncIterator[tuple[Api, int]]:
    """The service on a feed of one shard, or of the default shards (the table's first start
    records its layout), on DynamoDB Local: pages over 32 shards of 300 payments' events make
    thousands of Queries, and moto's goes through its whole table in Python (docs/developing.md)."""
    shards: int = request.param
    async with api_client(ddblocal_config, clock=clock, events_shards=shards) as api:
        yield api, shards


@pytest.mark.parametrize("kept", [PaymentStatus.SKIPPED, PaymentStatus.FAILED])
async def test_a_filtered_feed_page_reads_no_more_than_its_cost_and_resumes_exactly(
    feed: tuple[Api, int],
    ddblocal_backend: Backend,
    ddblocal_config: DynamoConfig,
    clock: Clock,
    kept: PaymentStatus,
) -> None:
    client, shards = feed
    store = PaymentStore(
        ddblocal_backend.client,
        table_name=ddblocal_config.table_name,
        cursor_secret=CURSOR_SECRET,
        layout=keys.StatusLayout(keys.DEFAULT_GSI2_SHARDS),
        feed=keys.FeedLayout.of(shards),
    )
    payments, events = lives(300, start=clock.now - timedelta(hours=1))
    await seed(store, payments, events)
    wanted = [event for event in events if event.to_status is kept]
    assert len(wanted) < len(events) / 5  # none failed: every page is left empty by the filter

    listed, after, pages = [], None, 0
    while True:
        variables = {"after": after, "types": [f"payment.{kept.value.lower()}"]}
        data, items_read = await read(client, FILTERED, variables)
        assert items_read <= engine_cost(FILTERED, variables)
        page = data["events"]
        listed += [edge["node"]["eventId"] for edge in page["edges"]]
        pages += 1
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
        assert after is not None
    # Over one shard a page reads 6 items, so most come back short, each resuming where the
    # last stopped: every event kept, once, in the feed's order, whatever the layout.
    assert (
        pages > max(1, len(wanted) / 5) if shards == 1 or not wanted else pages >= len(wanted) / 5
    )
    assert listed == [event_id(event.ref, event.version) for event in wanted]
