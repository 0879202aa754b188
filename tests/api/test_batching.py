"""Batching is measured, not assumed: the counts come from `extensions.dynamodb`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from datasource import DynamoConfig
from tests.api.conftest import Api, api_client, error_codes, token


async def test_fifty_payments_by_node_id_make_one_batch_get(api: Api) -> None:
    created = [await api.create(loan=f"loan-{n % 7}") for n in range(50)]
    query = "query($ids: [ID!]!) { nodes(ids: $ids) { ... on Payment { paymentId } } }"

    body = await api.post(query, {"ids": [p["id"] for p in created]}, debug=True)

    assert "errors" not in body
    assert body["data"]["nodes"] == [{"paymentId": p["paymentId"]} for p in created]
    report = body["extensions"]["dynamodb"]
    assert (report["requests"], report["operations"]) == (1, {"BatchGetItem": 1})


async def test_nested_loan_payments_cost_one_query_per_loan(api: Api) -> None:
    for loan in ("loan-a", "loan-b", "loan-c"):
        for _ in range(3):
            await api.create(user="alice", loan=loan)
    nested = """
      payments(first: 5) { edges { node { paymentId
        loan { payments(first: 5) { edges { node { paymentId status } } } }
      } } }"""
    query = (
        "query { "
        + " ".join(
            f'{alias}: loan(userId: "alice", loanId: "{loan}") {{ {nested} }}'
            for alias, loan in (("a", "loan-a"), ("b", "loan-b"), ("c", "loan-c"))
        )
        + " }"
    )

    body = await api.post(query, debug=True)

    assert "errors" not in body
    for alias in "abc":
        edges = body["data"][alias]["payments"]["edges"]
        assert len(edges) == 3
        assert len(edges[0]["node"]["loan"]["payments"]["edges"]) == 3
    report = body["extensions"]["dynamodb"]
    assert (report["requests"], report["operations"]) == (3, {"Query": 3})


async def test_a_payment_listed_earlier_costs_nothing_to_look_up(api: Api) -> None:
    payment = await api.create(user="alice", loan="loan-1")
    query = f"""query {{
      loan(userId: "alice", loanId: "loan-1") {{ payments {{ edges {{ node {{ paymentId }} }} }} }}
      payment(userId: "alice", loanId: "loan-1", paymentId: "{payment["paymentId"]}") {{ status }}
    }}"""
    body = await api.post(query, debug=True)
    assert body["data"]["payment"] == {"status": "PENDING"}
    # The lookup and the list run side by side; the lookup joins the list's batch or the cache.
    assert body["extensions"]["dynamodb"]["requests"] <= 2


async def test_a_listed_payment_looked_up_after_the_list_costs_no_read(api: Api) -> None:
    for _ in range(3):
        await api.create(user="alice", loan="loan-1")
    # Each history event's `payment` is a lookup of a payment the list has just read.
    query = """query { loan(userId: "alice", loanId: "loan-1") { payments { edges { node {
      paymentId history { edges { node { payment { paymentId status } } } } } } } } }"""

    body = await api.post(query, debug=True)

    assert "errors" not in body
    edges = body["data"]["loan"]["payments"]["edges"]
    assert len(edges) == 3
    for edge in edges:
        [event] = edge["node"]["history"]["edges"]
        assert event["node"]["payment"] == {
            "paymentId": edge["node"]["paymentId"],
            "status": "PENDING",
        }
    # The list, and one history page per payment; no GetItem or BatchGetItem.
    assert body["extensions"]["dynamodb"]["operations"] == {"Query": 4}


async def test_accounting_only_when_asked(api: Api) -> None:
    body = await api.post("query { paymentsByStatus(status: PENDING) { edges { cursor } } }")
    assert "extensions" not in body or "dynamodb" not in body["extensions"]
    assert error_codes(body) == []


PAYMENT = """query($user: ID!, $loan: ID!, $id: ID!) {
  payment(userId: $user, loanId: $loan, paymentId: $id) { userId paymentId amountCents }
}"""


def count_lookup_calls(api: Api, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The lookups (GetItem, BatchGetItem) the service's client sends to DynamoDB."""
    client = api.app.state.store.client
    sent: list[str] = []
    for method in ("get_item", "batch_get_item"):
        real = getattr(client, method)

        async def recording(*, _real: Any = real, _name: str = method, **parameters: Any) -> Any:
            sent.append(_name)
            return await _real(**parameters)

        monkeypatch.setattr(client, method, recording)
    return sent


async def test_customers_looking_up_at_once_share_calls_and_each_sees_only_their_own(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = [await api.create(user=f"user-{n}", amount=100 + n) for n in range(12)]
    sent = count_lookup_calls(api, monkeypatch)

    bodies = await asyncio.gather(
        *(
            api.post(
                PAYMENT,
                {"user": p["userId"], "loan": p["loanId"], "id": p["paymentId"]},
                as_=token(p["userId"]),
                debug=True,
            )
            for p in created
        )
    )

    for payment, body in zip(created, bodies, strict=True):
        assert "errors" not in body, body
        assert body["data"]["payment"] == {
            "userId": payment["userId"],
            "paymentId": payment["paymentId"],
            "amountCents": payment["amountCents"],
        }
        # Each request made one call, whether its own or shared.
        assert body["extensions"]["dynamodb"]["requests"] == 1
    assert 1 <= len(sent) < len(created)  # the service sent fewer calls than requests came
    assert "batch_get_item" in sent


async def test_with_coalescing_off_each_request_makes_its_own_call(
    moto_config: DynamoConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with api_client(moto_config, dynamodb_coalesce_lookups=False) as api:
        created = [await api.create(user=f"user-{n}") for n in range(4)]
        sent = count_lookup_calls(api, monkeypatch)
        bodies = await asyncio.gather(
            *(
                api.post(PAYMENT, {"user": p["userId"], "loan": p["loanId"], "id": p["paymentId"]})
                for p in created
            )
        )
    assert [body["data"]["payment"]["paymentId"] for body in bodies] == [
        p["paymentId"] for p in created
    ]
    assert sent == ["get_item"] * 4
