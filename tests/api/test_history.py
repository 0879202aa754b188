"""Payment history (issue 13, SPEC §9): every write stores its event, and `history` reads them.

Through the API: each of the eight mutations stores one event with the payment, in the same
transaction, and the event agrees with the payment it describes (version, statuses, time, reason,
return code, confirmation id, actor, request id) in the raw table; `history` lists them oldest
first over pages whose cursors belong to the payment; a customer reads its own history without
the actor's id; a payment written before history existed reads as an empty, incomplete history.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from datasource import DynamoConfig, event_from_item, to_item
from domain import keys
from domain.validation import format_timestamp
from tests.api.conftest import (
    ALICE,
    RESULT_FIELDS,
    SERVICE,
    Api,
    error_codes,
    stored_items,
)
from tests.datasource.stored_items import put_all_raw
from tests.payment_samples import sample_payment

EVENT_FIELDS = """
    version fromStatus toStatus at reason returnCode confirmationId actorKind actorId requestId
"""
HISTORY = f"""
query($u: ID, $l: ID!, $p: ID!, $first: Int, $after: String) {{
  payment(userId: $u, loanId: $l, paymentId: $p) {{
    version status updatedAt
    history(first: $first, after: $after) {{
      complete
      edges {{ cursor node {{ {EVENT_FIELDS} }} }}
      pageInfo {{ hasNextPage endCursor }}
    }}
  }}
}}
"""
# The service's token's subject (tests.api.conftest.SERVICE).
SERVICE_ID = "collections-job"


async def write(
    api: Api, mutation: str, input: dict[str, Any], *, request_id: str, as_: str = SERVICE
) -> dict[str, Any]:
    """One mutation, sent with its own request id; the payment it answered."""
    type_name = mutation[0].upper() + mutation[1:] + "Input"
    response = await api.http.post(
        "/graphql",
        json={
            "query": f"mutation($input: {type_name}!) {{ {mutation}(input: $input) "
            f"{{ {RESULT_FIELDS} }} }}",
            "variables": {"input": input},
        },
        headers={"Authorization": f"Bearer {as_}", "X-Request-Id": request_id},
    )
    body = response.json()
    assert "errors" not in body, body
    result: dict[str, Any] = body["data"][mutation]
    assert result["__typename"] == "PaymentPayload", result
    payment: dict[str, Any] = result["payment"]
    return payment


def event_items(config: DynamoConfig, payment: dict[str, Any]) -> list[dict[str, Any]]:
    prefix = f"HISTORY#LOAN#{payment['loanId']}#PAYMENT#{payment['paymentId']}#V#"
    return [
        item
        for item in stored_items(config)
        if item["PK"]["S"] == f"USER#{payment['userId']}" and item["SK"]["S"].startswith(prefix)
    ]


async def history_of(
    api: Api, payment: dict[str, Any], *, as_: str = SERVICE, first: int | None = None
) -> dict[str, Any]:
    variables = {"u": payment["userId"], "l": payment["loanId"], "p": payment["paymentId"]}
    data = await api.data(HISTORY, {**variables, "first": first}, as_=as_)
    found: dict[str, Any] = data["payment"]
    return found


def ids_of(payment: dict[str, Any]) -> dict[str, Any]:
    return {key: payment[key] for key in ("userId", "loanId", "paymentId")}


# Paths that between them use all eight mutations: (mutation, extra input) after the creation.
ACH_PATH = [
    ("submitPayment", {"confirmationId": "conf-ach-1"}),
    ("schedulePaymentRetry", {"returnCode": "R01"}),
    ("submitPayment", {"confirmationId": "conf-ach-2"}),
    ("completePayment", {}),
    ("returnPayment", {"returnCode": "R02"}),
]
PINLESS_PATH = [
    ("completePayment", {"confirmationId": "conf-card-1"}),
    ("chargeBackPayment", {}),
]
# An event carries these when its write gave the payment a new value.
SET_BY_A_WRITE = (("loc_return_code", "returnCode"), ("loc_confirmation_id", "confirmationId"))
SHORT_PATHS: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
    ("ACH", [("skipPayment", {})]),
    ("PINLESS", [("failPayment", {})]),
]


@pytest.mark.parametrize(
    ("method", "path"), [("ACH", ACH_PATH), ("PINLESS", PINLESS_PATH), *SHORT_PATHS]
)
async def test_every_write_stores_its_event_with_the_payment(
    api: Api, moto_config: DynamoConfig, method: str, path: list[tuple[str, dict[str, Any]]]
) -> None:
    loan = f"loan-{uuid.uuid4().hex[:8]}"
    created = await write(
        api,
        "createPayment",
        {
            "userId": "alice",
            "loanId": loan,
            "amountCents": 4200,
            "method": method,
            "intendedInstallmentId": "inst-1",
        },
        request_id="req-create",
    )
    states = [created]
    for step, (mutation, extra) in enumerate(path):
        moved = await write(
            api,
            mutation,
            {**ids_of(created), "reason": f"step {step}", **extra},
            request_id=f"req-{step}",
        )
        states.append(moved)

    items = event_items(moto_config, created)
    assert len(items) == len(states)
    for number, (before, after, item) in enumerate(
        zip([None, *states], states, items, strict=False), start=1
    ):
        assert item["SK"]["S"].endswith(f"#V#{number:06d}")
        assert item["loc_version"] == {"N": str(after["version"])} == {"N": str(number)}
        assert item["loc_to_status"] == {"S": after["status"]}
        if before is None:
            assert "loc_from_status" not in item
        else:
            assert item["loc_from_status"] == {"S": before["status"]}
        assert item["loc_event_date"] == {"S": after["updatedAt"]}
        assert item["loc_update_reason"] == {"S": after["updateReason"]}
        assert item["loc_actor_kind"] == {"S": "SERVICE"}
        assert item["loc_actor_id"] == {"S": SERVICE_ID}
        request_id = "req-create" if before is None else f"req-{number - 2}"
        assert item["loc_request_id"] == {"S": request_id}
        for name, field in SET_BY_A_WRITE:
            new = after[field] is not None and (before is None or before[field] != after[field])
            assert item.get(name) == ({"S": after[field]} if new else None), (name, item)
        # An event is outside every payment access pattern: in the events feed's GSI4 alone,
        # with the payment as the write left it.
        assert {name for name in item if name.startswith("GSI")} == {"GSI4PK", "GSI4SK"}
        # Its payment's shard of the feed (32 by default), as GSI2's of the payment.
        shard = keys.status_shard(after["paymentId"], keys.DEFAULT_FEED_SHARDS)
        assert item["GSI4PK"] == {"S": f"EVENTS#{shard}"}
        assert item["GSI4SK"]["S"].startswith(after["updatedAt"] + "#USER#")
        held = item["loc_payment"]["M"]
        assert held["loc_status"] == {"S": after["status"]}
        # What the event holds already is not held twice, and is put back when read.
        assert not {"loc_version", "loc_update_reason", "loc_last_updated"} & set(held)
        carried = event_from_item(item, with_payment=True).payment
        assert carried is not None
        assert (carried.version, carried.status.value) == (number, after["status"])
        assert format_timestamp(carried.updated_at) == after["updatedAt"]
        assert carried.update_reason == after["updateReason"]

    read = await history_of(api, created)
    history = read["history"]
    assert history["complete"] is True
    assert [edge["node"]["version"] for edge in history["edges"]] == list(range(1, len(states) + 1))
    assert [edge["node"]["toStatus"] for edge in history["edges"]] == [s["status"] for s in states]
    assert history["edges"][-1]["node"]["at"] == read["updatedAt"]
    assert history["edges"][0]["node"]["fromStatus"] is None
    assert {edge["node"]["actorId"] for edge in history["edges"]} == {SERVICE_ID}


async def test_a_refused_move_stores_no_event(api: Api, moto_config: DynamoConfig) -> None:
    created = await api.create(loan="loan-refused")
    refused = await api.move("completePayment", created)  # PENDING ACH cannot complete
    assert refused["__typename"] == "InvalidTransitionError"

    assert len(event_items(moto_config, created)) == 1


async def test_a_customer_sees_its_history_without_who_acted(api: Api) -> None:
    created = await api.create(user="alice", loan="loan-own", as_=ALICE)
    await api.move("submitPayment", created, confirmationId="conf-own-1")

    history = (await history_of(api, created, as_=ALICE))["history"]
    kinds = [edge["node"]["actorKind"] for edge in history["edges"]]
    assert kinds == ["CUSTOMER", "SERVICE"]
    assert [edge["node"]["actorId"] for edge in history["edges"]] == [None, None]
    # A service sees both.
    service_view = (await history_of(api, created))["history"]
    assert [edge["node"]["actorId"] for edge in service_view["edges"]] == ["alice", SERVICE_ID]


async def test_history_pages_oldest_first_with_cursors_of_its_own(api: Api) -> None:
    created = await api.create(loan="loan-pages")
    for mutation, extra in ACH_PATH[:4]:
        moved = await api.move(mutation, created, **extra)
        assert moved["__typename"] == "PaymentPayload", moved
    other = await api.create(loan="loan-pages")

    versions: list[int] = []
    after: str | None = None
    while True:
        variables = {**_vars(created), "first": 2, "after": after}
        page = (await api.data(HISTORY, variables))["payment"]["history"]
        versions += [edge["node"]["version"] for edge in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
        # A cursor of this payment's history is refused by another payment's, and by a list.
        body = await api.post(HISTORY, {**_vars(other), "first": 2, "after": after})
        assert error_codes(body) == ["INVALID_INPUT"], body
        listed = await api.post(
            'query($a: String) { loan(userId: "alice", loanId: "loan-pages") '
            "{ payments(after: $a) { edges { cursor } } } }",
            {"a": after},
        )
        assert error_codes(listed) == ["INVALID_INPUT"], listed
    assert versions == [1, 2, 3, 4, 5]


def _vars(payment: dict[str, Any]) -> dict[str, Any]:
    return {"u": payment["userId"], "l": payment["loanId"], "p": payment["paymentId"]}


async def test_a_payment_from_before_history_says_its_history_is_incomplete(
    api: Api, moto_config: DynamoConfig
) -> None:
    # Written as the service wrote payments before history: no event, no loc_history_from.
    legacy = sample_payment(user_id="alice", loan_id="loan-legacy")
    assert legacy.history_from is None
    await put_all_raw(moto_config, [to_item(legacy)])
    payment = {"userId": "alice", "loanId": "loan-legacy", "paymentId": legacy.payment_id}

    before = (await history_of(api, payment))["history"]
    assert before == {"complete": False, "edges": [], "pageInfo": before["pageInfo"]}
    assert before["pageInfo"]["hasNextPage"] is False

    skipped = await api.move("skipPayment", payment)
    assert skipped["__typename"] == "PaymentPayload", skipped
    after = (await history_of(api, payment))["history"]
    assert after["complete"] is False
    assert [edge["node"]["version"] for edge in after["edges"]] == [legacy.version + 1]
    assert after["edges"][0]["node"]["fromStatus"] == legacy.status.name


async def test_histories_are_read_one_query_per_payment_at_once(api: Api) -> None:
    payments = [await api.create(loan="loan-batched") for _ in range(3)]
    query = """
    query($l: ID!) { loan(userId: "alice", loanId: $l) { payments(first: 10) { edges { node {
        paymentId history(first: 5) { edges { node { version } } }
        again: history(first: 5) { edges { node { version } } }
    } } } } }
    """
    body = await api.post(query, {"l": "loan-batched"}, debug=True)
    assert "errors" not in body, body
    edges = body["data"]["loan"]["payments"]["edges"]
    assert len(edges) == len(payments)
    assert all(edge["node"]["history"] == edge["node"]["again"] for edge in edges)
    # One list Query, then one Query per payment's history (the alias shares its key).
    assert body["extensions"]["dynamodb"]["operations"] == {"Query": 1 + len(payments)}


async def test_history_counts_in_the_query_cost(api: Api) -> None:
    query = """
    query { loan(userId: "alice", loanId: "loan-cost") { payments(first: 100) { edges { node {
        history(first: 100) { edges { node { version reason at } } }
    } } } } }
    """
    body = await api.post(query)
    assert error_codes(body) == ["QUERY_TOO_COSTLY"], body
