"""Webhook endpoints belong to the service client that registered them (SPEC §18, turn 6): each
client lists, reads the deliveries of, rotates, deletes, enables and resends on its own only,
another's being NOT_FOUND exactly as one that does not exist; operators (their own scope) see and
manage all, each action on another client's endpoint written to the audit log; endpoints stored
before owners existed are the operators' until one gives them an owner."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from datasource import DynamoConfig
from domain import keys
from tests.api.conftest import ALICE, Api, api_client, error_codes, stored_items, token
from tests.api.raw_table import raw_client

# The budgets' client of each: `azp`, Cognito's `client_id`, else the subject.
LEDGER = token("ledger-task", service=True, azp="ledger")
NOTIFY = token("notify-task", service=True, client_id="notifications")
RECONCILER = token("reconciler", service=True)
OPERATOR = token("ops-person", azp="ops-console", scope="payments:webhooks-admin")

FIELDS = "endpointId url description status"
ERRORS = "__typename ... on UserError { code message } ... on InvalidInputError { field }"
LIST = f"{{ webhookEndpoints {{ {FIELDS} }} }}"
OWNED = f"{{ webhookEndpoints {{ {FIELDS} owner }} }}"
MUTATIONS = {
    "rotateWebhookSecret": ("WebhookEndpointInput", "... on WebhookEndpointPayload { secret }"),
    "deleteWebhookEndpoint": (
        "WebhookEndpointInput",
        "... on DeleteWebhookEndpointPayload { endpointId }",
    ),
    "enableWebhookEndpoint": (
        "EnableWebhookEndpointInput",
        "... on EnableWebhookEndpointPayload { endpoint { endpointId } }",
    ),
    "resendWebhookEvent": (
        "ResendWebhookEventInput",
        "... on ResendWebhookEventPayload { eventId }",
    ),
    "assignWebhookEndpointOwner": (
        "AssignWebhookEndpointOwnerInput",
        "... on AssignWebhookEndpointOwnerPayload { endpoint { endpointId owner } }",
    ),
}


async def call(api: Api, mutation: str, input: dict[str, Any], *, as_: str) -> Any:
    input_type, payload = MUTATIONS[mutation]
    data = await api.data(
        f"mutation($input: {input_type}!) {{ {mutation}(input: $input) {{ {ERRORS} {payload} }} }}",
        {"input": input},
        as_=as_,
    )
    return data[mutation]


async def register(api: Api, name: str, *, as_: str, **extra: Any) -> str:
    created = await api.data(
        """mutation($input: CreateWebhookEndpointInput!) { createWebhookEndpoint(input: $input) {
             __typename ... on WebhookEndpointPayload { endpoint { endpointId } } } }""",
        {"input": {"url": f"https://{name}.example.com/hooks", "description": name, **extra}},
        as_=as_,
    )
    assert created["createWebhookEndpoint"]["__typename"] == "WebhookEndpointPayload", created
    endpoint_id: str = created["createWebhookEndpoint"]["endpoint"]["endpointId"]
    return endpoint_id


async def listed(api: Api, *, as_: str) -> list[str]:
    return [e["endpointId"] for e in (await api.data(LIST, as_=as_))["webhookEndpoints"]]


async def an_event(api: Api) -> str:
    payment = await api.create()
    history = await api.data(
        """query($l: ID!, $p: ID!) { payment(userId: "alice", loanId: $l, paymentId: $p) {
             history { edges { node { eventId } } } } }""",
        {"l": payment["loanId"], "p": payment["paymentId"]},
    )
    event_id: str = history["payment"]["history"]["edges"][0]["node"]["eventId"]
    return event_id


def endpoint_items(config: DynamoConfig) -> list[dict[str, Any]]:
    return [i for i in stored_items(config) if i["SK"]["S"].startswith(keys.ENDPOINT_PREFIX)]


def audited(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.__dict__ for r in caplog.records if r.name == "loc_payments.audit"]


async def test_a_client_lists_only_the_endpoints_it_registered(api: Api) -> None:
    ledger = await register(api, "ledger", as_=LEDGER)
    notify = await register(api, "notify", as_=NOTIFY)
    reconciler = await register(api, "reconciler", as_=RECONCILER)

    assert await listed(api, as_=LEDGER) == [ledger]
    assert await listed(api, as_=NOTIFY) == [notify]
    assert await listed(api, as_=RECONCILER) == [reconciler]
    # Another task of the same client (another subject, the same `azp`) sees the client's.
    assert await listed(api, as_=token("ledger-other", service=True, azp="ledger")) == [ledger]
    # The owner is the client the budgets charge (`Caller.service_client`).
    owners = (await api.data(OWNED, as_=LEDGER))["webhookEndpoints"]
    assert [e["owner"] for e in owners] == ["ledger"]


async def test_another_clients_endpoint_is_not_found_as_a_missing_one_is(
    api: Api, moto_config: DynamoConfig
) -> None:
    ledger = await register(api, "ledger", as_=LEDGER)
    event = await an_event(api)
    before = stored_items(moto_config)
    for mutation, extra in (
        ("rotateWebhookSecret", {}),
        ("enableWebhookEndpoint", {}),
        ("enableWebhookEndpoint", {"from": "NOW"}),
        ("resendWebhookEvent", {"eventId": event}),
        ("deleteWebhookEndpoint", {}),
    ):
        others = await call(api, mutation, {"endpointId": ledger, **extra}, as_=NOTIFY)
        missing = await call(api, mutation, {"endpointId": str(uuid.uuid4()), **extra}, as_=NOTIFY)
        assert others == missing, mutation
        assert others["code"] == "NOT_FOUND", others
    assert stored_items(moto_config) == before, "nothing of the ledger's was touched"
    assert await listed(api, as_=LEDGER) == [ledger]


async def test_an_operator_sees_and_manages_every_endpoint_and_is_audited_on_others(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="loc_payments.audit")
    ledger = await register(api, "ledger", as_=LEDGER)
    notify = await register(api, "notify", as_=NOTIFY)
    own = await register(api, "ops", as_=OPERATOR)
    event = await an_event(api)
    caplog.clear()

    assert await listed(api, as_=OPERATOR) == [ledger, notify, own]
    owners = (await api.data(OWNED, as_=OPERATOR))["webhookEndpoints"]
    assert [e["owner"] for e in owners] == ["ledger", "notifications", "ops-console"]

    rotated = await call(api, "rotateWebhookSecret", {"endpointId": ledger}, as_=OPERATOR)
    assert rotated["__typename"] == "WebhookEndpointPayload", rotated
    enabled = await call(api, "enableWebhookEndpoint", {"endpointId": ledger}, as_=OPERATOR)
    assert enabled["__typename"] == "EnableWebhookEndpointPayload", enabled
    resent = await call(
        api, "resendWebhookEvent", {"endpointId": notify, "eventId": event}, as_=OPERATOR
    )
    assert resent["__typename"] == "ResendWebhookEventPayload", resent
    deleted = await call(api, "deleteWebhookEndpoint", {"endpointId": notify}, as_=OPERATOR)
    assert deleted["__typename"] == "DeleteWebhookEndpointPayload", deleted
    # Its own endpoint, and a client's own, are no one else's: nothing to audit.
    await call(api, "rotateWebhookSecret", {"endpointId": own}, as_=OPERATOR)
    await call(api, "rotateWebhookSecret", {"endpointId": ledger}, as_=LEDGER)

    lines = audited(caplog)
    assert [(line["event"], line["endpoint_id"], line["owner"]) for line in lines] == [
        ("webhook_endpoint.secret_rotated", ledger, "ledger"),
        ("webhook_endpoint.enabled", ledger, "ledger"),
        ("webhook_endpoint.event_resent", notify, "notifications"),
        ("webhook_endpoint.deleted", notify, "notifications"),
    ]
    for line in lines:
        assert (line["actor_id"], line["actor_client"]) == ("ops-person", "ops-console")
        assert len(line["request_id"]) == 32
    assert lines[2]["event_id"] == event
    assert await listed(api, as_=NOTIFY) == []


async def test_the_operators_scope_is_the_one_configured(moto_config: DynamoConfig) -> None:
    async with api_client(moto_config, auth_webhooks_admin_scope="hooks:operate") as api:
        ledger = await register(api, "ledger", as_=LEDGER)
        assert await listed(api, as_=token("ops-person", scope="hooks:operate")) == [ledger]
        # The default scope is then no one's: a token holding only it is no service either.
        assert error_codes(await api.post(LIST, as_=OPERATOR)) == ["FORBIDDEN"]


async def test_only_an_operator_assigns_an_owner_and_bad_owners_are_invalid_input(
    api: Api, moto_config: DynamoConfig
) -> None:
    ledger = await register(api, "ledger", as_=LEDGER)
    before = stored_items(moto_config)
    assign = 'mutation { assignWebhookEndpointOwner(input: {endpointId: "%s", owner: "x"}) '
    assign = (assign % ledger) + "{ __typename } }"
    for caller in (LEDGER, NOTIFY, ALICE):
        assert (await api.post(assign, as_=caller))["errors"][0]["extensions"]["code"] == (
            "FORBIDDEN"
        )
    for owner in ("", " ", "a" * 129, "tab\there", "has#hash"):
        refused = await call(
            api, "assignWebhookEndpointOwner", {"endpointId": ledger, "owner": owner}, as_=OPERATOR
        )
        assert (refused["code"], refused["field"]) == ("INVALID_INPUT", "owner"), (owner, refused)
    missing = await call(
        api,
        "assignWebhookEndpointOwner",
        {"endpointId": str(uuid.uuid4()), "owner": "ledger"},
        as_=OPERATOR,
    )
    assert missing["code"] == "NOT_FOUND"
    assert stored_items(moto_config) == before


def store_the_old_way(config: DynamoConfig, name: str, at: datetime) -> str:
    """An endpoint item as the service stored it before endpoints had owners: the attributes
    `WebhookStore.create` wrote then (`git show d2ea67c:datasource/webhooks.py`), no `loc_owner`."""
    endpoint_id = str(uuid.uuid4())
    moment = at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    raw_client(config).put_item(
        TableName=config.table_name,
        Item={
            "PK": {"S": keys.WEBHOOKS_PARTITION},
            "SK": {"S": keys.endpoint_sort_key(endpoint_id)},
            "loc_endpoint_id": {"S": endpoint_id},
            "loc_url": {"S": f"https://{name}.example.com/hooks?token=kept-in-the-url"},
            "loc_status": {"S": "ENABLED"},
            "loc_created_date": {"S": moment},
            "loc_secret": {"S": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
            "loc_feed_from": {"S": keys.feed_bound(moment)},
            "loc_lease_until": {"N": "0"},
            "loc_event_types": {"L": [{"S": "payment.completed"}]},
            "loc_description": {"S": name},
        },
    )
    return endpoint_id


async def test_endpoints_stored_before_owners_are_the_operators_until_given_an_owner(
    api: Api, moto_config: DynamoConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="loc_payments.audit")
    at = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    old_ledger = store_the_old_way(moto_config, "ledger", at)
    old_other = store_the_old_way(moto_config, "other", at)
    ledger = await register(api, "ledger-new", as_=LEDGER)

    # No client's: invisible to every service, NOT_FOUND to their mutations.
    assert await listed(api, as_=LEDGER) == [ledger]
    assert await listed(api, as_=NOTIFY) == []
    refused = await call(api, "rotateWebhookSecret", {"endpointId": old_ledger}, as_=LEDGER)
    assert refused["code"] == "NOT_FOUND"
    # An operator sees them, owner null.
    seen = (await api.data(OWNED, as_=OPERATOR))["webhookEndpoints"]
    owners = {e["endpointId"]: e["owner"] for e in seen}
    assert owners == {old_ledger: None, old_other: None, ledger: "ledger"}

    caplog.clear()
    assigned = await call(
        api,
        "assignWebhookEndpointOwner",
        {"endpointId": old_ledger, "owner": "ledger"},
        as_=OPERATOR,
    )
    assert assigned == {
        "__typename": "AssignWebhookEndpointOwnerPayload",
        "endpoint": {"endpointId": old_ledger, "owner": "ledger"},
    }
    [line] = audited(caplog)
    assert (line["event"], line["endpoint_id"], line["owner"], line["new_owner"]) == (
        "webhook_endpoint.owner_assigned",
        old_ledger,
        None,
        "ledger",
    )
    [item] = [i for i in endpoint_items(moto_config) if i["loc_endpoint_id"]["S"] == old_ledger]
    assert item["loc_owner"] == {"S": "ledger"}

    # Now the ledger's: listed and managed by it, and still no other client's.
    assert sorted(await listed(api, as_=LEDGER)) == sorted([old_ledger, ledger])
    rotated = await call(api, "rotateWebhookSecret", {"endpointId": old_ledger}, as_=LEDGER)
    assert rotated["__typename"] == "WebhookEndpointPayload", rotated
    assert await listed(api, as_=NOTIFY) == []
    assert old_other in await listed(api, as_=OPERATOR)
