"""An endpoint disabled by its delivery, on the app's own dispatcher (in-process, on moto): the
operational event `webhook_endpoint.disabled` goes only to its owner's endpoints that list that
type (SPEC §18, turn 6), and an attempt refused for the address its host resolves to records the
kind of address, never the address, in its error, the disabled reason and the event."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from datasource import DynamoConfig
from domain import keys
from process.settings import DEV_JWT_SECRET
from tests.api.conftest import Api, Clock, api_client, stored_items, token
from tests.server.webhook_receiver import Receiver
from tests.stub_dns import StubDns

LEDGER = token("ledger-task", service=True, azp="ledger")
NOTIFY = token("notify-task", service=True, azp="notifications")
# Short waits, so that an endpoint failing every attempt is disabled within a second.
DELIVERING: dict[str, Any] = {
    "webhooks": True,
    "webhook_retry_schedule": "0.2,0.2",
    "webhook_poll_interval": 0.1,
    "webhook_timeout": 2,
    "webhook_lease_seconds": 4,
    "events_settle_seconds": 0.3,
}
WAIT = 20.0
ENDPOINTS = """{ webhookEndpoints { endpointId url status disabledReason
    deliveries(first: 20) { edges { node { eventId error statusCode } } } } }"""


class WallClock(Clock):
    """The real time: the dispatcher waits for its schedule by it."""

    def __call__(self) -> datetime:
        return datetime.now(UTC)


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"not within {WAIT} s: {what}"
        await asyncio.sleep(0.1)


async def register(api: Api, url: str, *, as_: str, **extra: Any) -> tuple[str, str]:
    created = (
        await api.data(
            """mutation($input: CreateWebhookEndpointInput!) {
                 createWebhookEndpoint(input: $input) { __typename
                   ... on WebhookEndpointPayload { secret endpoint { endpointId } }
                   ... on UserError { message } } }""",
            {"input": {"url": url, **extra}},
            as_=as_,
        )
    )["createWebhookEndpoint"]
    assert created["__typename"] == "WebhookEndpointPayload", created
    return created["endpoint"]["endpointId"], created["secret"]


async def endpoint(api: Api, endpoint_id: str, *, as_: str) -> dict[str, Any]:
    listed = (await api.data(ENDPOINTS, as_=as_))["webhookEndpoints"]
    [found] = [e for e in listed if e["endpointId"] == endpoint_id]
    result: dict[str, Any] = found
    return result


async def disabled(api: Api, endpoint_id: str, *, as_: str) -> None:
    async def check() -> bool:
        return bool((await endpoint(api, endpoint_id, as_=as_))["status"] == "DISABLED")

    await until(check, "the failing endpoint disabled")


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    await receiver.start()
    yield receiver
    await receiver.stop()


async def lease_let_go(config: DynamoConfig, endpoint_id: str) -> None:
    """Until the dispatcher lets the disabled endpoint's lease go: the last thing it does after
    scheduling the operational event for every endpoint that gets it."""

    async def check() -> bool:
        [item] = [i for i in _endpoint_items(config) if i["SK"]["S"].endswith(endpoint_id)]
        return bool(item["loc_lease_until"]["N"] == "0")

    await until(check, "the disabled endpoint's lease let go")


def scheduled(config: DynamoConfig, endpoint_id: str) -> list[str]:
    """The operational events stored for `endpoint_id`: due, or attempted."""
    return [
        item["loc_event_id"]["S"]
        for item in stored_items(config)
        if item["PK"]["S"] == keys.webhook_partition(endpoint_id)
        and item["loc_event_id"]["S"].startswith("evt_op_")
    ]


async def test_a_disabling_is_told_to_every_endpoint_that_asks_while_its_window_stops(
    moto_config: DynamoConfig, receiver: Receiver
) -> None:
    # Telling takes a write or two per endpoint; the dispatcher lists the endpoints meanwhile,
    # sees this one DISABLED and stops its window. That stop once cancelled the telling half
    # way: the later endpoints never told, the lease never let go.
    async with api_client(moto_config, clock=WallClock(), **DELIVERING) as api:
        broken_id, secret = await register(api, receiver.url("broken"), as_=LEDGER)
        receiver.paths["broken"].secret = secret
        receiver.paths["broken"].fail_all = True
        listeners = []
        for index in range(4):
            endpoint_id, secret = await register(
                api,
                receiver.url(f"ops-{index}"),
                as_=LEDGER,
                eventTypes=["webhook_endpoint.disabled"],
            )
            receiver.paths[f"ops-{index}"].secret = secret
            listeners.append(endpoint_id)
        await api.create()
        await disabled(api, broken_id, as_=LEDGER)
        await lease_let_go(moto_config, broken_id)
    assert all(scheduled(moto_config, endpoint_id) for endpoint_id in listeners)


async def test_the_disabled_event_goes_only_to_the_owners_endpoints(
    moto_config: DynamoConfig, receiver: Receiver
) -> None:
    async with api_client(moto_config, clock=WallClock(), **DELIVERING) as api:
        broken_id, secret = await register(api, receiver.url("broken"), as_=LEDGER)
        receiver.paths["broken"].secret = secret
        receiver.paths["broken"].fail_all = True
        told: dict[str, str] = {}
        for path, caller in (("ledger-ops", LEDGER), ("notify-ops", NOTIFY)):
            told[path], secret = await register(
                api, receiver.url(path), as_=caller, eventTypes=["webhook_endpoint.disabled"]
            )
            receiver.paths[path].secret = secret
        await api.create()

        await disabled(api, broken_id, as_=LEDGER)

        await lease_let_go(moto_config, broken_id)
        ours = receiver.paths["ledger-ops"]

        async def arrived() -> bool:
            return len(ours.delivered) == 1

        await until(arrived, "the operational event at the ledger's own endpoint")
        [event] = ours.delivered.values()
        assert (event["type"], event["data"]["endpointId"]) == (
            "webhook_endpoint.disabled",
            broken_id,
        )
    assert scheduled(moto_config, told["notify-ops"]) == [], "another client's endpoint told"
    assert receiver.paths["notify-ops"].attempts == {}


def _endpoint_items(config: DynamoConfig) -> list[dict[str, Any]]:
    return [i for i in stored_items(config) if i["SK"]["S"].startswith(keys.ENDPOINT_PREFIX)]


async def test_a_name_resolving_to_a_private_address_at_delivery_is_refused_by_its_kind(
    moto_config: DynamoConfig,
) -> None:
    dns = StubDns({"hooks.example.com": ["93.184.215.14"]})
    settings = {
        **DELIVERING,
        "env": "test",
        "auth_jwt_secret": DEV_JWT_SECRET,
        "cursor_secret": "a-test-cursor-secret-of-enough-bytes",
    }
    async with api_client(moto_config, clock=WallClock(), webhook_dns=dns, **settings) as api:
        endpoint_id, _ = await register(api, "https://hooks.example.com/payments", as_=LEDGER)
        # Public at registration, private at delivery: a DNS rebinding.
        dns.names["hooks.example.com"] = ["10.1.2.3"]
        await api.create()
        await disabled(api, endpoint_id, as_=LEDGER)
        found = await endpoint(api, endpoint_id, as_=LEDGER)

    errors = [edge["node"]["error"] for edge in found["deliveries"]["edges"]]
    assert errors and all("a private address" in error for error in errors), errors
    assert "a private address" in found["disabledReason"], found["disabledReason"]
    # The operational event's `reason` is the disabled reason.
    for told in (*errors, found["disabledReason"]):
        assert "10.1.2.3" not in told, told
