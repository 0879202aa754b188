"""Webhook endpoints through the API (SPEC §18): registered, listed, rotated, deleted and an event
resent by services; bad input answered as a typed error that writes nothing; in prod only public
https receivers."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from datasource import DynamoConfig
from process.settings import DEV_JWT_SECRET
from tests.api.conftest import (
    ALICE,
    PROD_SETTINGS,
    Api,
    Clock,
    api_client,
    error_codes,
    prod_token,
    stored_items,
)
from tests.stub_dns import StubDns

ENDPOINT_FIELDS = "endpointId url eventTypes description status createdAt secretRotatedAt"
ERRORS = "__typename ... on UserError { code message } ... on InvalidInputError { field }"
WITH_SECRET = f"... on WebhookEndpointPayload {{ secret endpoint {{ {ENDPOINT_FIELDS} }} }}"
PAYLOADS = {
    "createWebhookEndpoint": WITH_SECRET,
    "rotateWebhookSecret": WITH_SECRET,
    "deleteWebhookEndpoint": "... on DeleteWebhookEndpointPayload { endpointId }",
    "resendWebhookEvent": "... on ResendWebhookEventPayload { eventId endpoint { endpointId } }",
    "enableWebhookEndpoint": (
        f"... on EnableWebhookEndpointPayload {{ endpoint {{ {ENDPOINT_FIELDS} }} }}"
    ),
}
LIST = f"{{ webhookEndpoints {{ {ENDPOINT_FIELDS} }} }}"


async def _call(api: Api, mutation: str, input_type: str, input: dict[str, Any], **kw: Any) -> Any:
    data = await api.data(
        f"mutation($input: {input_type}!) {{ {mutation}(input: $input) "
        f"{{ {ERRORS} {PAYLOADS[mutation]} }} }}",
        {"input": input},
        **kw,
    )
    return data[mutation]


async def create(api: Api, url: str, **extra: Any) -> Any:
    return await _call(
        api, "createWebhookEndpoint", "CreateWebhookEndpointInput", {"url": url, **extra}
    )


def _webhook_items(config: DynamoConfig) -> list[dict[str, Any]]:
    return [item for item in stored_items(config) if item["PK"]["S"].startswith("WEBHOOK")]


async def test_an_endpoint_is_registered_with_a_secret_shown_once(
    api: Api, moto_config: DynamoConfig
) -> None:
    created = await create(
        api, "https://ledger.example.com/hooks", eventTypes=["payment.completed"], description="x"
    )
    assert created["__typename"] == "WebhookEndpointPayload"
    assert created["secret"].startswith("whsec_")
    endpoint = created["endpoint"]
    assert endpoint["eventTypes"] == ["payment.completed"]
    assert endpoint["status"] == "ENABLED"

    listed = (await api.data(LIST))["webhookEndpoints"]
    assert listed == [endpoint]
    # The secret is in the answer to its creation and nowhere else the API shows.
    assert created["secret"] not in str(listed)
    fields = await api.data('{ __type(name: "WebhookEndpoint") { fields { name } } }')
    assert "secret" not in {field["name"] for field in fields["__type"]["fields"]}


async def test_rotation_answers_a_new_secret_and_keeps_the_old_one_for_its_grace(
    api: Api, moto_config: DynamoConfig
) -> None:
    created = await create(api, "https://ledger.example.com/hooks")
    endpoint_id = created["endpoint"]["endpointId"]
    rotated = await _call(
        api, "rotateWebhookSecret", "WebhookEndpointInput", {"endpointId": endpoint_id}
    )
    assert rotated["__typename"] == "WebhookEndpointPayload"
    assert rotated["secret"] != created["secret"]
    assert rotated["endpoint"]["secretRotatedAt"] is not None
    [item] = [i for i in _webhook_items(moto_config) if i["SK"]["S"].startswith("ENDPOINT#")]
    assert item["loc_secret"]["S"] == rotated["secret"]
    assert item["loc_previous_secret"]["S"] == created["secret"]


async def test_delete_forgets_the_endpoint_and_unknown_ones_are_not_found(api: Api) -> None:
    created = await create(api, "https://ledger.example.com/hooks")
    endpoint_id = created["endpoint"]["endpointId"]
    deleted = await _call(
        api, "deleteWebhookEndpoint", "WebhookEndpointInput", {"endpointId": endpoint_id}
    )
    assert deleted == {"__typename": "DeleteWebhookEndpointPayload", "endpointId": endpoint_id}
    assert (await api.data(LIST))["webhookEndpoints"] == []
    for mutation in ("deleteWebhookEndpoint", "rotateWebhookSecret"):
        again = await _call(api, mutation, "WebhookEndpointInput", {"endpointId": endpoint_id})
        assert again["__typename"] == "NotFoundError", again
        assert again["code"] == "NOT_FOUND"


async def test_resend_schedules_a_stored_event_and_refuses_one_that_is_not(
    api: Api, moto_config: DynamoConfig
) -> None:
    created = await create(api, "https://ledger.example.com/hooks")
    endpoint_id = created["endpoint"]["endpointId"]
    payment = await api.create()
    history = await api.data(
        """query($l: ID!, $p: ID!) { payment(userId: "alice", loanId: $l, paymentId: $p) {
             history { edges { node { eventId } } } } }""",
        {"l": payment["loanId"], "p": payment["paymentId"]},
    )
    [event] = [edge["node"]["eventId"] for edge in history["payment"]["history"]["edges"]]

    resent = await _call(
        api,
        "resendWebhookEvent",
        "ResendWebhookEventInput",
        {"endpointId": endpoint_id, "eventId": event},
    )
    assert resent["__typename"] == "ResendWebhookEventPayload"
    retries = [i for i in _webhook_items(moto_config) if i["SK"]["S"].startswith("RETRY#")]
    assert [(r["loc_event_id"]["S"], r["loc_attempt"]["N"]) for r in retries] == [(event, "1")]

    for input, code, field in (
        ({"endpointId": endpoint_id, "eventId": "evt_nope"}, "INVALID_INPUT", "eventId"),
        ({"endpointId": str(uuid.uuid4()), "eventId": event}, "NOT_FOUND", None),
        ({"endpointId": "missing#1", "eventId": event}, "INVALID_INPUT", "endpointId"),
    ):
        refused = await _call(api, "resendWebhookEvent", "ResendWebhookEventInput", input)
        assert (refused["code"], refused.get("field")) == (code, field), refused


@pytest.mark.parametrize(
    ("input", "field"),
    [
        ({"url": "not a url"}, "url"),
        ({"url": "ftp://ledger.example.com/"}, "url"),
        ({"url": "https://ledger.example.com/", "eventTypes": ["payment.done"]}, "eventTypes[0]"),
        ({"url": "https://ledger.example.com/", "eventTypes": []}, "eventTypes"),
        ({"url": "https://ledger.example.com/", "description": "x" * 501}, "description"),
    ],
)
async def test_bad_input_is_a_typed_error_naming_the_field_and_writes_nothing(
    api: Api, moto_config: DynamoConfig, input: dict[str, Any], field: str
) -> None:
    refused = await _call(api, "createWebhookEndpoint", "CreateWebhookEndpointInput", input)
    assert (refused["__typename"], refused["code"], refused["field"]) == (
        "InvalidInputError",
        "INVALID_INPUT",
        field,
    )
    assert _webhook_items(moto_config) == []


async def test_customers_may_not_touch_webhooks(api: Api, moto_config: DynamoConfig) -> None:
    endpoint_id = (await create(api, "https://ledger.example.com/hooks"))["endpoint"]["endpointId"]
    before = stored_items(moto_config)
    named = f'input: {{endpointId: "{endpoint_id}"}}'
    for operation in (
        'mutation { createWebhookEndpoint(input: {url: "https://x.example.com/"}) { __typename } }',
        f"mutation {{ deleteWebhookEndpoint({named}) {{ __typename }} }}",
        f"mutation {{ rotateWebhookSecret({named}) {{ __typename }} }}",
        f"mutation {{ enableWebhookEndpoint({named}) {{ __typename }} }}",
        f'mutation {{ resendWebhookEvent(input: {{endpointId: "{endpoint_id}", eventId: "evt_x"}})'
        " { __typename } }",
        LIST,
        "{ webhookEndpoints { deliveries { edges { cursor } } } }",
    ):
        assert error_codes(await api.post(operation, as_=ALICE)) == ["FORBIDDEN"], operation
    assert stored_items(moto_config) == before


@pytest.mark.parametrize(
    "url",
    [
        "http://ledger.example.com/hooks",
        "https://127.0.0.1:8443/hooks",
        "https://localhost/hooks",
        "https://10.1.2.3/hooks",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::1]/hooks",
    ],
)
async def test_prod_refuses_receivers_that_are_not_public_https(
    moto_config: DynamoConfig, url: str
) -> None:
    async with api_client(moto_config, **PROD_SETTINGS) as prod:
        refused = await _call(
            prod,
            "createWebhookEndpoint",
            "CreateWebhookEndpointInput",
            {"url": url},
            as_=prod_token("ledger", service=True),
        )
    assert (refused["code"], refused["field"]) == ("INVALID_INPUT", "url"), refused
    assert _webhook_items(moto_config) == []


async def _create_as_prod_service(api: Api, url: str) -> Any:
    return await _call(
        api,
        "createWebhookEndpoint",
        "CreateWebhookEndpointInput",
        {"url": url},
        as_=prod_token("ledger", service=True),
    )


@pytest.mark.parametrize(
    "url",
    [
        "https://2130706433/hooks",
        "https://0x7f000001/hooks",
        "https://017700000001/hooks",
        "https://127.1/hooks",
        "https://127.0.0.1./hooks",
        "https://0xa9fea9fe/latest/meta-data/",
        "https://[64:ff9b::a00:102]/hooks",
        "https://[2002:7f00:1::]/hooks",
        "https://[::7f00:1]/hooks",
    ],
)
async def test_prod_refuses_every_spelling_of_an_internal_address(
    moto_config: DynamoConfig, url: str
) -> None:
    # The DNS knows nothing: an address in any spelling is judged without asking it.
    dns = StubDns()
    async with api_client(moto_config, webhook_dns=dns, **PROD_SETTINGS) as prod:
        refused = await _create_as_prod_service(prod, url)
    assert (refused["__typename"], refused["code"], refused["field"]) == (
        "InvalidInputError",
        "INVALID_INPUT",
        "url",
    ), refused
    assert dns.asked == []
    assert _webhook_items(moto_config) == []


async def test_prod_resolves_a_name_at_registration_and_refuses_an_internal_one(
    moto_config: DynamoConfig,
) -> None:
    dns = StubDns(
        {
            "ledger.example.com": ["93.184.215.14"],
            "internal.example.com": ["93.184.215.14", "10.1.2.3"],
            "nat64.example.com": ["64:ff9b::a9fe:a9fe"],
        }
    )
    async with api_client(moto_config, webhook_dns=dns, **PROD_SETTINGS) as prod:
        created = await _create_as_prod_service(prod, "https://LEDGER.example.com/hooks")
        internal = await _create_as_prod_service(prod, "https://internal.example.com/hooks")
        nat64 = await _create_as_prod_service(prod, "https://nat64.example.com/hooks")
        unknown = await _create_as_prod_service(prod, "https://nowhere.example.com/hooks")
    assert created["__typename"] == "WebhookEndpointPayload", created
    for refused, reason in ((internal, "private"), (nat64, "metadata"), (unknown, "resolve")):
        assert (refused["code"], refused["field"]) == ("INVALID_INPUT", "url"), refused
        assert reason in refused["message"], refused
        assert "10.1.2.3" not in refused["message"]
    assert dns.asked == [
        "ledger.example.com",
        "internal.example.com",
        "nat64.example.com",
        "nowhere.example.com",
    ]
    assert (
        len([i for i in _webhook_items(moto_config) if i["SK"]["S"].startswith("ENDPOINT#")]) == 1
    )


async def test_a_name_that_does_not_answer_in_time_is_invalid_input_not_a_hang(
    moto_config: DynamoConfig,
) -> None:
    settings = {**PROD_SETTINGS, "webhook_timeout": 0.3}
    async with api_client(moto_config, webhook_dns=StubDns(hangs=True), **settings) as prod:
        started = time.perf_counter()
        refused = await _create_as_prod_service(prod, "https://slow.example.com/hooks")
    assert time.perf_counter() - started < 5
    assert (refused["code"], refused["field"]) == ("INVALID_INPUT", "url"), refused
    assert _webhook_items(moto_config) == []


# `test` runs on AWS too: a caller could read an internal answer through `deliveries`.
TEST_ENV: dict[str, Any] = {
    "env": "test",
    "auth_jwt_secret": DEV_JWT_SECRET,
    "cursor_secret": "a-test-cursor-secret-of-enough-bytes",
}


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8123/hooks", "https://127.0.0.1:8123/hooks", "https://10.0.0.8/hooks"]
)
async def test_the_test_environment_refuses_internal_receivers(
    moto_config: DynamoConfig, url: str
) -> None:
    async with api_client(moto_config, **TEST_ENV) as api:
        refused = await create(api, url)
    assert (refused["code"], refused["field"]) == ("INVALID_INPUT", "url"), refused
    assert _webhook_items(moto_config) == []


async def test_the_projects_own_tests_may_loosen_the_guard_of_test(
    moto_config: DynamoConfig,
) -> None:
    async with api_client(moto_config, webhook_allow_private_targets=True, **TEST_ENV) as api:
        created = await create(api, "http://127.0.0.1:8123/hooks")
    assert created["__typename"] == "WebhookEndpointPayload", created


@pytest.fixture
async def clocked_api(moto_config: DynamoConfig, clock: Clock) -> AsyncIterator[Api]:
    async with api_client(moto_config, clock=clock) as client:
        yield client


async def _enable(api: Api, endpoint_id: str, **extra: Any) -> Any:
    return await _call(
        api,
        "enableWebhookEndpoint",
        "EnableWebhookEndpointInput",
        {"endpointId": endpoint_id, **extra},
    )


async def test_enabling_resumes_where_it_stopped_within_the_retention_or_from_now(
    clocked_api: Api, clock: Clock, moto_config: DynamoConfig
) -> None:
    created = await create(clocked_api, "https://ledger.example.com/hooks")
    endpoint_id = created["endpoint"]["endpointId"]
    enabled = await _enable(clocked_api, endpoint_id)
    assert enabled["__typename"] == "EnableWebhookEndpointPayload", enabled
    assert enabled["endpoint"]["status"] == "ENABLED"

    # It stopped at its creation; 31 days on, that is beyond the feed's 30 days.
    clock.now += timedelta(days=31)
    refused = await _enable(clocked_api, endpoint_id, **{"from": "WHERE_IT_STOPPED"})
    assert (refused["__typename"], refused["code"], refused["field"]) == (
        "InvalidInputError",
        "INVALID_INPUT",
        "from",
    )
    assert "retention of 30 days" in refused["message"]

    [before] = [i for i in _webhook_items(moto_config) if i["SK"]["S"].startswith("ENDPOINT#")]
    now = await _enable(clocked_api, endpoint_id, **{"from": "NOW"})
    assert now["endpoint"]["status"] == "ENABLED"
    [after] = [i for i in _webhook_items(moto_config) if i["SK"]["S"].startswith("ENDPOINT#")]
    assert after["loc_feed_from"]["S"] > before["loc_feed_from"]["S"]
    assert after["loc_feed_from"]["S"][:10] == clock.now.isoformat()[:10]
    assert await _enable(clocked_api, endpoint_id) == now, "from where it stopped: now"

    missing = await _enable(clocked_api, str(uuid.uuid4()))
    assert missing["code"] == "NOT_FOUND"


async def test_only_endpoints_that_list_it_take_the_operational_event_type(api: Api) -> None:
    created = await create(
        api, "https://ops.example.com/hooks", eventTypes=["webhook_endpoint.disabled"]
    )
    assert created["endpoint"]["eventTypes"] == ["webhook_endpoint.disabled"]
    refused = await api.post(
        'query { events(types: ["webhook_endpoint.disabled"]) { edges { cursor } } }', {}
    )
    assert error_codes(refused) == ["INVALID_INPUT"], "the feed lists payment events only"
