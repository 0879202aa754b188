"""Webhook delivery on real processes (SPEC §18): `python -m cli serve` instances on one
DynamoDB Local table, and a loopback receiver that verifies every signature with the Standard
Webhooks library. Every event of a payment's life arrives, signed, after a first attempt answered
500, across a receiver down for a while and a service SIGKILLed with deliveries pending; two
instances deliver each event and never one event twice at once; an endpoint gets only its types;
a slow receiver does not hold back another."""

from __future__ import annotations

import asyncio
import collections
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from tests.api.conftest import RESULT_FIELDS, SERVICE
from tests.backends import Backend, fresh_table
from tests.server.webhook_receiver import Receiver
from tests.servers import serving

pytestmark = pytest.mark.ddblocal

# Seconds, short so that the tests wait little; the defaults are the docs'.
SETTINGS = {
    "webhook_retry_schedule": "0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5",
    # Four feed shards, not the default 32: polled every 0.2 s by each instance, 32 would be 160
    # Queries a second an instance on the worker's one DynamoDB Local, which answers one at a
    # time, and in the parallel run starved the two-instance test past its 30 s. The merge over
    # any number of shards is tests/datasource/test_sharded_lists.py's.
    "events_shards": "4",
    "webhook_poll_interval": "0.2",
    "webhook_timeout": "2",
    "webhook_lease_seconds": "4",
    "events_settle_seconds": "0.5",
}
WAIT = 30.0  # seconds everything expected may take, at most

CREATE_ENDPOINT = """
mutation($input: CreateWebhookEndpointInput!) {
  createWebhookEndpoint(input: $input) {
    __typename
    ... on WebhookEndpointPayload { secret endpoint { endpointId } }
  }
}
"""
DELIVERIES = """
{ webhookEndpoints { endpointId url deliveries(first: 100) {
    edges { node { eventId eventType attempt statusCode error succeeded } } } } }
"""


@pytest.fixture
async def table(ddblocal_backend: Backend) -> AsyncIterator[str]:
    name = await fresh_table(ddblocal_backend)
    yield name
    await ddblocal_backend.client.delete_table(TableName=name)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    yield receiver
    await receiver.stop()


async def graphql(url: str, query: str, variables: dict[str, Any] | None = None) -> Any:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        response = await http.post(
            "/graphql",
            json={"query": query, "variables": variables or {}},
            headers={"Authorization": f"Bearer {SERVICE}"},
        )
    body = response.json()
    assert "errors" not in body, body
    return body["data"]


async def register(url: str, receiver: Receiver, path: str, **extra: Any) -> str:
    created = (
        await graphql(url, CREATE_ENDPOINT, {"input": {"url": receiver.url(path), **extra}})
    )["createWebhookEndpoint"]
    assert created["__typename"] == "WebhookEndpointPayload", created
    receiver.paths[path].secret = created["secret"]
    endpoint_id: str = created["endpoint"]["endpointId"]
    return endpoint_id


async def mutate(url: str, mutation: str, input: dict[str, Any]) -> dict[str, Any]:
    type_name = mutation[0].upper() + mutation[1:] + "Input"
    query = f"mutation($input: {type_name}!) {{ {mutation}(input: $input) {{ {RESULT_FIELDS} }} }}"
    result = (await graphql(url, query, {"input": input}))[mutation]
    assert result["__typename"] == "PaymentPayload", result
    payment: dict[str, Any] = result["payment"]
    return payment


async def payment_life(url: str, user: str, loan: str = "loan-1") -> dict[str, Any]:
    """Created, submitted and completed: three events, versions 1 to 3."""
    payment = await mutate(
        url,
        "createPayment",
        {
            "userId": user,
            "loanId": loan,
            "amountCents": 4200,
            "method": "ACH",
            "intendedInstallmentId": "inst-1",
        },
    )
    ids = {key: payment[key] for key in ("userId", "loanId", "paymentId")} | {"reason": "test"}
    await mutate(url, "submitPayment", {**ids, "confirmationId": f"c-{payment['paymentId']}"})
    await mutate(url, "completePayment", ids)
    return payment


async def until(
    check: Callable[[], bool] | Callable[[], Awaitable[bool]], what: str | Callable[[], str]
) -> None:
    deadline = time.monotonic() + WAIT
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        told = what() if callable(what) else what
        assert time.monotonic() < deadline, f"not within {WAIT} s: {told}"
        await asyncio.sleep(0.1)


async def leased(backend: Backend, table: str, endpoint_id: str) -> bool:
    """Whether an instance holds the endpoint's lease now, as its item in the table says."""
    items = (await backend.client.scan(TableName=table, ConsistentRead=True))["Items"]
    now_ms = time.time() * 1000
    return any(
        "loc_lease_owner" in item
        and int(item["loc_lease_until"]["N"]) > now_ms
        and endpoint_id in json.dumps(item)
        for item in items
    )


def by_version(delivered: dict[str, dict[str, Any]], payment_id: str) -> list[dict[str, Any]]:
    events = [e for e in delivered.values() if e["data"]["payment"]["paymentId"] == payment_id]
    return sorted(events, key=lambda event: event["data"]["version"])


async def test_every_event_of_a_payments_life_arrives_signed_after_a_first_failure(
    ddblocal_backend: Backend, table: str, receiver: Receiver
) -> None:
    await receiver.start()
    settings = {**SETTINGS, "metrics": "app"}
    async with serving(ddblocal_backend.endpoint_url, table, 1, **settings) as [service]:
        await register(service.url, receiver, "ledger")
        receiver.paths["ledger"].fail_first = True
        payment = await payment_life(service.url, "alice")
        path = receiver.paths["ledger"]
        await until(lambda: len(path.delivered) == 3, "three events delivered")

        events = by_version(path.delivered, payment["paymentId"])
        assert [(e["type"], e["data"]["version"]) for e in events] == [
            ("payment.created", 1),
            ("payment.achsent", 2),
            ("payment.completed", 3),
        ]
        assert [e["data"]["payment"]["status"] for e in events] == [
            "PENDING",
            "ACHSENT",
            "COMPLETED",
        ], "each event carries the payment as its write left it"
        assert [(e["data"]["fromStatus"], e["data"]["toStatus"]) for e in events] == [
            (None, "PENDING"),
            ("PENDING", "ACHSENT"),
            ("ACHSENT", "COMPLETED"),
        ]
        assert path.unverified == 0
        assert all(count == 2 for count in path.attempts.values()), path.attempts
        assert set(path.attempts) == {event["id"] for event in events}

        async def recorded() -> bool:
            [endpoint] = (await graphql(service.url, DELIVERIES))["webhookEndpoints"]
            return len(endpoint["deliveries"]["edges"]) == 6

        await until(recorded, "six attempts recorded")
        [endpoint] = (await graphql(service.url, DELIVERIES))["webhookEndpoints"]
        attempts = sorted(
            (edge["node"]["eventId"], edge["node"]["attempt"], edge["node"]["statusCode"])
            for edge in endpoint["deliveries"]["edges"]
        )
        assert attempts == sorted(
            (event["id"], attempt, code)
            for event in events
            for attempt, code in ((1, 500), (2, 204))
        )


async def test_a_receiver_down_and_a_service_sigkilled_mid_delivery_lose_no_event(
    ddblocal_backend: Backend, table: str, receiver: Receiver
) -> None:
    async with serving(ddblocal_backend.endpoint_url, table, 1, **SETTINGS) as [service]:
        await register(service.url, receiver, "ledger")
        path = receiver.paths["ledger"]
        # Down: every attempt is refused, and retried.
        payments = [await payment_life(service.url, user) for user in ("alice", "bob")]

        async def failed_attempts() -> bool:
            [endpoint] = (await graphql(service.url, DELIVERIES))["webhookEndpoints"]
            return len(endpoint["deliveries"]["edges"]) >= 6

        await until(failed_attempts, "attempts refused while the receiver is down")
        # Up, but hanging: the service is killed while an attempt waits for its answer.
        path.delay = 60.0
        await receiver.start()
        await until(lambda: bool(path.started), "an attempt in flight")
        service.kill()
        in_flight = path.started[-1]
        path.delay = 0.0
        service.start()
        async with httpx.AsyncClient() as http:
            await service.wait_ready(http, "/healthz")

        await until(lambda: len(path.delivered) == 6, "all six events delivered")
        for payment in payments:
            assert [
                e["data"]["version"] for e in by_version(path.delivered, payment["paymentId"])
            ] == [1, 2, 3]
        assert in_flight in path.delivered
        assert path.attempts[in_flight] >= 2, "the attempt the kill cut short was made again"
        assert path.unverified == 0


async def test_two_instances_deliver_every_event_and_never_one_twice_at_once(
    ddblocal_backend: Backend, table: str, receiver: Receiver
) -> None:
    await receiver.start()
    async with serving(ddblocal_backend.endpoint_url, table, 2, **SETTINGS) as services:
        urls = [service.url for service in services]
        names = ["ledger", "notices", "recon"]
        for name in names:
            await register(urls[0], receiver, name)
            receiver.paths[name].fail_first = True
            receiver.paths[name].delay = 0.05
        for index, user in enumerate(["u1", "u2", "u3", "u4"]):
            await payment_life(urls[index % 2], user)

        await until(
            lambda: all(len(receiver.paths[name].delivered) == 12 for name in names),
            lambda: (
                "every event at every endpoint: "
                + str({name: len(receiver.paths[name].delivered) for name in names})
            ),
        )
        for name in names:
            path = receiver.paths[name]
            assert path.overlaps == [], f"{name}: one event in flight twice at once"
            assert path.unverified == 0
            assert all(count == 2 for count in path.attempts.values()), path.attempts


async def test_an_endpoint_gets_only_the_event_types_it_asked_for(
    ddblocal_backend: Backend, table: str, receiver: Receiver
) -> None:
    await receiver.start()
    async with serving(ddblocal_backend.endpoint_url, table, 1, **SETTINGS) as [service]:
        await register(service.url, receiver, "completed", eventTypes=["payment.completed"])
        await register(service.url, receiver, "all")
        for user in ("alice", "bob"):
            await payment_life(service.url, user)
        await until(lambda: len(receiver.paths["all"].delivered) == 6, "every event at `all`")
        await until(lambda: len(receiver.paths["completed"].delivered) == 2, "two completions")
        # The endpoint's position moved past the others: nothing more comes before a completion
        # written after them.
        await payment_life(service.url, "carol")
        await until(lambda: len(receiver.paths["completed"].delivered) == 3, "carol's completion")
        types = [e["type"] for e in receiver.paths["completed"].delivered.values()]
        assert types == ["payment.completed"] * 3


async def test_a_slow_receiver_does_not_hold_back_another(
    ddblocal_backend: Backend, table: str, receiver: Receiver
) -> None:
    await receiver.start()
    async with serving(ddblocal_backend.endpoint_url, table, 1, **SETTINGS) as [service]:
        await register(service.url, receiver, "slow")
        await register(service.url, receiver, "fast")
        receiver.paths["slow"].delay = 30.0  # past the 2 s timeout: each attempt times out
        started = time.monotonic()
        for user in ("alice", "bob"):
            await payment_life(service.url, user)
        await until(lambda: len(receiver.paths["fast"].delivered) == 6, "every event at `fast`")
        took = time.monotonic() - started
        # Six events at the slow endpoint would take 12 s of timeouts alone, one after another.
        assert took < 10, f"the fast endpoint waited {took:.1f} s"
        assert receiver.paths["slow"].delivered == {}

        async def timed_out() -> bool:
            endpoints = (await graphql(service.url, DELIVERIES))["webhookEndpoints"]
            [slow] = [e for e in endpoints if e["url"].endswith("/slow")]
            errors = [edge["node"]["error"] or "" for edge in slow["deliveries"]["edges"]]
            return any(error.startswith("timeout") for error in errors)

        await until(timed_out, "the slow endpoint's attempts recorded as timeouts")


BURST_WRITERS = 8
BURST_PAYMENTS = 200  # created and submitted: 400 events


async def _burst(url: str, payments: int, writers: int) -> None:
    """`payments` payments created and submitted by `writers` clients as fast as they can."""
    remaining = list(range(payments))

    async def writer(http: httpx.AsyncClient) -> None:
        while remaining:
            index = remaining.pop()
            created = await _mutation(
                http,
                "createPayment",
                {
                    "userId": f"burst-{index % 50}",
                    "loanId": "loan-1",
                    "amountCents": 4200,
                    "method": "ACH",
                    "intendedInstallmentId": "inst-1",
                },
            )
            ids = {key: created[key] for key in ("userId", "loanId", "paymentId")}
            await _mutation(
                http, "submitPayment", {**ids, "reason": "burst", "confirmationId": f"c-{index}"}
            )

    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        await asyncio.gather(*(writer(http) for _ in range(writers)))


async def _mutation(http: httpx.AsyncClient, mutation: str, input: dict[str, Any]) -> Any:
    type_name = mutation[0].upper() + mutation[1:] + "Input"
    query = f"mutation($input: {type_name}!) {{ {mutation}(input: $input) {{ {RESULT_FIELDS} }} }}"
    response = await http.post(
        "/graphql",
        json={"query": query, "variables": {"input": input}},
        headers={"Authorization": f"Bearer {SERVICE}"},
    )
    result = response.json()["data"][mutation]
    assert result["__typename"] == "PaymentPayload", result
    return result["payment"]


async def test_one_endpoint_with_a_50_ms_receiver_drains_a_burst_of_every_event_once(
    ddblocal_backend: Backend, table: str, receiver: Receiver
) -> None:
    """Every event of a burst reaches a slow receiver, once and signed. How fast it drains is
    `make bench`'s figure (`bench.webhooks_cost`, at least 250 events a second)."""
    await receiver.start()
    settings = {**SETTINGS, "webhook_retry_schedule": "5", "events_settle_seconds": "1"}
    async with serving(ddblocal_backend.endpoint_url, table, 1, **settings) as [service]:
        await register(service.url, receiver, "ledger")
        path = receiver.paths["ledger"]
        path.delay = 0.05
        await _burst(service.url, BURST_PAYMENTS, BURST_WRITERS)
        await until(
            lambda: len(path.delivered) >= 2 * BURST_PAYMENTS,
            lambda: f"{len(path.delivered)} of {2 * BURST_PAYMENTS} events delivered",
        )
        # Each event once (the receiver keeps them by id), each signed as the endpoint's.
        assert len(path.delivered) == 2 * BURST_PAYMENTS
        assert path.unverified == 0


async def test_a_sigkill_during_a_full_window_loses_nothing_and_resends_at_most_the_window(
    ddblocal_backend: Backend, table: str, receiver: Receiver
) -> None:
    await receiver.start()
    window = 8
    # Events settle after the ten payments are written: the window fills from the first. An
    # attempt times out after 5 s, not 2: on a loaded machine the window filled more slowly than
    # its first attempts timed out (and the next ones started, as they should).
    settings = {
        **SETTINGS,
        "webhook_max_in_flight": str(window),
        "events_settle_seconds": "3",
        "webhook_timeout": "5",
        "webhook_lease_seconds": "8",
    }
    async with serving(ddblocal_backend.endpoint_url, table, 1, **settings) as [service]:
        await register(service.url, receiver, "ledger")
        path = receiver.paths["ledger"]
        # Hanging: the window fills with attempts waiting for their answers, then the kill
        # (before the attempts' timeout): what was in flight then is the window, no more.
        path.delay = 60.0
        payments = await asyncio.gather(
            *(payment_life(service.url, f"user-{index}") for index in range(10))
        )
        await until(lambda: len(path.started) >= window, "a full window in flight")
        service.kill()
        cut_short = set(path.started)
        assert len(path.started) == len(cut_short) == window, "no more than the window at once"
        path.delay = 0.0
        before = collections.Counter(path.attempts)
        service.start()
        async with httpx.AsyncClient() as http:
            await service.wait_ready(http, "/healthz")

        await until(lambda: len(path.delivered) == 30, "all thirty events delivered")
        for payment in payments:
            assert [
                e["data"]["version"] for e in by_version(path.delivered, payment["paymentId"])
            ] == [1, 2, 3]
        resent = {msg for msg, count in path.attempts.items() if count > before.get(msg, 0) > 0}
        assert resent == cut_short, "exactly the window's attempts were made again"
        assert path.unverified == 0


async def test_an_event_the_live_feed_carried_is_read_when_it_settles_not_at_the_next_poll(
    ddblocal_backend: Backend, table: str, receiver: Receiver
) -> None:
    await receiver.start()
    # One feed read a minute; the live feed brings the read of a new event forward.
    settings = {**SETTINGS, "webhook_poll_interval": "60"}
    async with serving(ddblocal_backend.endpoint_url, table, 1, **settings) as [service]:
        endpoint_id = await register(service.url, receiver, "ledger")
        path = receiver.paths["ledger"]
        # Taken (a listing every quarter lease), and so read at once: the write's event is read
        # when it settles, or at the poll a minute away.
        await until(lambda: leased(ddblocal_backend, table, endpoint_id), "the endpoint taken")
        written = time.monotonic()
        await payment_life(service.url, "alice")
        await until(lambda: len(path.delivered) == 3, "three events delivered")
        took = time.monotonic() - written
        assert took < 10, f"delivered {took:.1f} s after the write: the poll, not the settle"


ENDPOINTS = """
{ webhookEndpoints { endpointId url status disabledAt disabledReason
    deliveries(first: 100) { edges { node { eventId statusCode succeeded } } } } }
"""
ENABLE = """
mutation($input: EnableWebhookEndpointInput!) {
  enableWebhookEndpoint(input: $input) {
    __typename ... on EnableWebhookEndpointPayload { endpoint { status disabledAt } }
  }
}
"""
# Three attempts half a second apart: an endpoint answering no 2xx for a second is disabled.
SHORT_SCHEDULE = {**SETTINGS, "webhook_retry_schedule": "0.5,0.5"}


async def _endpoint(url: str, path: str) -> dict[str, Any]:
    endpoints = (await graphql(url, ENDPOINTS))["webhookEndpoints"]
    [endpoint] = [e for e in endpoints if e["url"].endswith(f"/{path}")]
    found: dict[str, Any] = endpoint
    return found


async def test_an_endpoint_failing_for_the_whole_schedule_is_disabled_told_and_enabled_again(
    ddblocal_backend: Backend, table: str, receiver: Receiver
) -> None:
    await receiver.start()
    async with serving(ddblocal_backend.endpoint_url, table, 1, **SHORT_SCHEDULE) as [service]:
        broken_id = await register(service.url, receiver, "broken")
        await register(service.url, receiver, "ops", eventTypes=["webhook_endpoint.disabled"])
        await register(service.url, receiver, "all")
        broken = receiver.paths["broken"]
        broken.fail_all = True
        await payment_life(service.url, "alice")

        async def disabled() -> bool:
            status: str = (await _endpoint(service.url, "broken"))["status"]
            return status == "DISABLED"

        await until(disabled, "the failing endpoint disabled")
        endpoint = await _endpoint(service.url, "broken")
        assert endpoint["disabledAt"] is not None
        assert "no 2xx answer to any event since" in endpoint["disabledReason"]
        assert "HTTP 500" in endpoint["disabledReason"]
        codes = {edge["node"]["statusCode"] for edge in endpoint["deliveries"]["edges"]}
        assert codes == {500}, "its deliveries show every attempt refused"

        ops = receiver.paths["ops"]
        await until(lambda: len(ops.delivered) == 1, "the operational event at `ops`")
        [told] = ops.delivered.values()
        assert told["type"] == "webhook_endpoint.disabled"
        assert told["data"]["endpointId"] == broken_id
        await until(lambda: len(receiver.paths["all"].delivered) == 3, "alice's events at `all`")
        assert {e["type"] for e in receiver.paths["all"].delivered.values()} <= {
            "payment.created",
            "payment.achsent",
            "payment.completed",
        }, "an endpoint without a filter never gets an operational event"

        # Disabled, it receives nothing more.
        attempts = sum(broken.attempts.values())
        bob = await payment_life(service.url, "bob")
        await until(lambda: len(receiver.paths["all"].delivered) == 6, "bob's events at `all`")
        assert sum(broken.attempts.values()) == attempts

        # Mended and enabled from where it stopped: bob's events arrive.
        broken.fail_all = False
        enabled = (await graphql(service.url, ENABLE, {"input": {"endpointId": broken_id}}))[
            "enableWebhookEndpoint"
        ]
        assert enabled == {
            "__typename": "EnableWebhookEndpointPayload",
            "endpoint": {"status": "ENABLED", "disabledAt": None},
        }
        await until(
            lambda: len(by_version(broken.delivered, bob["paymentId"])) == 3,
            "bob's events at the endpoint enabled again",
        )
        assert len(ops.delivered) == 1
        # Each of bob's events tried there once, enabled: none while it was disabled.
        bobs = [
            message
            for message, event in broken.delivered.items()
            if event["data"]["payment"]["paymentId"] == bob["paymentId"]
        ]
        assert [broken.attempts[message] for message in bobs] == [1, 1, 1]


async def test_one_poison_event_never_disables_a_healthy_endpoint(
    ddblocal_backend: Backend, table: str, receiver: Receiver
) -> None:
    await receiver.start()
    async with serving(ddblocal_backend.endpoint_url, table, 1, **SHORT_SCHEDULE) as [service]:
        await register(service.url, receiver, "ledger")
        path = receiver.paths["ledger"]
        path.fail_users = {"poison"}
        await payment_life(service.url, "poison")
        started = time.monotonic()
        count = 0
        # Three times the schedule's length, healthy events beside the poison ones.
        while time.monotonic() - started < 3.0:
            await payment_life(service.url, f"healthy-{count}")
            count += 1
        await until(lambda: len(path.delivered) == 3 * count, "every healthy event")

        async def given_up() -> bool:
            endpoint = await _endpoint(service.url, "ledger")
            return (
                sum(1 for e in endpoint["deliveries"]["edges"] if not e["node"]["succeeded"]) >= 9
            )

        await until(given_up, "the poison events' three attempts each")
        assert (await _endpoint(service.url, "ledger"))["status"] != "DISABLED"
