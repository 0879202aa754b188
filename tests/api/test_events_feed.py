"""The events feed (SPEC §18): every user's events, oldest first, for services, each edge's cursor
resuming exactly after it; filtered by type and time; listed once settled."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from datasource import TTL_ATTRIBUTE, DynamoConfig
from tests.api.conftest import ALICE, Api, Clock, api_client, error_codes, stored_items

FEED = """
query($after: String, $first: Int, $types: [String!], $createdAfter: DateTime) {
  events(after: $after, first: $first, types: $types, createdAfter: $createdAfter) {
    edges { cursor node { eventId type version fromStatus toStatus at
                          payment { paymentId userId } } }
    pageInfo { hasNextPage endCursor }
  }
}
"""
SETTLE_SECONDS = 2.0


@pytest.fixture
async def feed_api(moto_config: DynamoConfig, clock: Clock) -> AsyncIterator[Api]:
    async with api_client(moto_config, clock=clock, events_settle_seconds=SETTLE_SECONDS) as client:
        yield client


async def _life(api: Api, user: str, loan: str) -> None:
    """A payment created, submitted and completed: three events."""
    payment = await api.create(user=user, loan=loan)
    await api.move("submitPayment", payment, confirmationId=f"conf-{user}-{loan}")
    await api.move("completePayment", payment)


async def _all(api: Api, **variables: Any) -> list[dict[str, Any]]:
    edges: list[dict[str, Any]] = []
    after = None
    while True:
        data = await api.data(FEED, {"first": 2, "after": after, **variables})
        page = data["events"]
        edges += page["edges"]
        if not page["pageInfo"]["hasNextPage"]:
            return edges
        after = page["pageInfo"]["endCursor"]


async def test_the_feed_pages_every_users_stored_events_oldest_first(
    feed_api: Api, clock: Clock, moto_config: DynamoConfig
) -> None:
    await _life(feed_api, "alice", "loan-1")
    await _life(feed_api, "bob", "loan-9")
    clock.now += timedelta(seconds=SETTLE_SECONDS + 1)

    edges = await _all(feed_api)

    stored = sorted(
        (item["loc_event_date"]["S"], item["loc_user_id"]["S"], int(item["loc_version"]["N"]))
        for item in stored_items(moto_config)
        if item["SK"]["S"].startswith("HISTORY#")
    )
    listed = [
        (e["node"]["at"], e["node"]["payment"]["userId"], e["node"]["version"]) for e in edges
    ]
    assert listed == stored, "every stored event, once, in time order"
    assert [e["node"]["type"] for e in edges] == [
        "payment.created",
        "payment.achsent",
        "payment.completed",
    ] * 2
    assert len({e["node"]["eventId"] for e in edges}) == 6


async def test_a_cursor_resumes_exactly_after_its_edge_when_more_events_came(
    feed_api: Api, clock: Clock
) -> None:
    await _life(feed_api, "alice", "loan-1")
    clock.now += timedelta(seconds=SETTLE_SECONDS + 1)
    first = (await feed_api.data(FEED, {"first": 10}))["events"]
    assert len(first["edges"]) == 3
    assert first["pageInfo"]["hasNextPage"] is False

    await _life(feed_api, "carol", "loan-2")
    clock.now += timedelta(seconds=SETTLE_SECONDS + 1)
    resumed = await feed_api.data(FEED, {"first": 10, "after": first["pageInfo"]["endCursor"]})

    users = [edge["node"]["payment"]["userId"] for edge in resumed["events"]["edges"]]
    assert users == ["carol"] * 3


async def test_an_event_is_listed_only_once_settled(feed_api: Api, clock: Clock) -> None:
    await feed_api.create()
    assert (await feed_api.data(FEED, {}))["events"]["edges"] == []
    clock.now += timedelta(seconds=SETTLE_SECONDS + 1)
    assert len((await feed_api.data(FEED, {}))["events"]["edges"]) == 1


async def test_types_and_created_after_filter_the_feed(feed_api: Api, clock: Clock) -> None:
    await _life(feed_api, "alice", "loan-1")
    middle = clock.now
    clock.now += timedelta(seconds=1)
    await _life(feed_api, "bob", "loan-2")
    clock.now += timedelta(seconds=SETTLE_SECONDS + 1)

    completed = await _all(feed_api, types=["payment.completed"])
    assert [e["node"]["payment"]["userId"] for e in completed] == ["alice", "bob"]
    assert {e["node"]["toStatus"] for e in completed} == {"COMPLETED"}

    created_or_sent = await _all(feed_api, types=["payment.created", "payment.achsent"])
    assert [e["node"]["type"] for e in created_or_sent] == [
        "payment.created",
        "payment.achsent",
    ] * 2

    later = await _all(feed_api, createdAfter=middle.isoformat().replace("+00:00", "Z"))
    assert [e["node"]["payment"]["userId"] for e in later] == ["bob"] * 3


async def test_the_feed_is_for_services_and_refuses_an_unknown_type(feed_api: Api) -> None:
    assert error_codes(await feed_api.post(FEED, {}, as_=ALICE)) == ["FORBIDDEN"]
    refused = await feed_api.post(FEED, {"types": ["payment.done"]})
    assert error_codes(refused) == ["INVALID_INPUT"]
    assert refused["errors"][0]["extensions"]["field"] == "types[0]"
    assert "payment.done" not in refused["errors"][0]["message"], "input is never echoed"
    assert error_codes(await feed_api.post(FEED, {"after": "junk"})) == ["INVALID_INPUT"]


async def test_a_created_after_or_a_cursor_older_than_the_retention_is_refused_as_such(
    feed_api: Api, clock: Clock
) -> None:
    start = clock.now
    await _life(feed_api, "alice", "loan-1")
    clock.now += timedelta(seconds=SETTLE_SECONDS + 1)
    first = (await feed_api.data(FEED, {"first": 1}))["events"]
    cursor = first["pageInfo"]["endCursor"]

    clock.now += timedelta(days=31)
    for variables, field in (
        ({"createdAfter": start.isoformat().replace("+00:00", "Z")}, "createdAfter"),
        ({"after": cursor}, "after"),
    ):
        refused = await feed_api.post(FEED, variables)
        assert error_codes(refused) == ["INVALID_INPUT"], refused
        error = refused["errors"][0]
        assert error["extensions"]["field"] == field
        assert "retention of 30 days" in error["message"], error["message"]
    # From the start, the feed lists what its retention keeps: none of these events.
    assert (await feed_api.data(FEED, {}))["events"]["edges"] == []
    await _life(feed_api, "bob", "loan-2")
    clock.now += timedelta(seconds=SETTLE_SECONDS + 1)
    users = [
        e["node"]["payment"]["userId"] for e in (await feed_api.data(FEED, {}))["events"]["edges"]
    ]
    assert users == ["bob"] * 3


async def test_event_items_never_expire(feed_api: Api, moto_config: DynamoConfig) -> None:
    await _life(feed_api, "alice", "loan-1")
    events = [item for item in stored_items(moto_config) if item["SK"]["S"].startswith("HISTORY#")]
    assert len(events) == 3
    assert all(TTL_ATTRIBUTE not in item for item in events), "the payments' history stays"
