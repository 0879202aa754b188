"""The schema as a federation subgraph, through the API at `/subgraph`: `_service`, `_entities`
by the rules of `node`, batched (counted by `extensions.dynamodb`), and costed per
representation; `/graphql` holds none of federation's names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from domain.payment import PaymentRef
from resolvers.node_ids import payment_node_id
from tests.api.conftest import ALICE, BOB, Api, error_codes

SUBGRAPH_SNAPSHOT = Path(__file__).parents[2] / "schema.subgraph.graphql"
ENTITIES = """query($representations: [_Any!]!) {
  _entities(representations: $representations) {
    __typename
    ... on Payment { paymentId amountCents }
    ... on Loan { userId loanId }
  }
}"""


@pytest.fixture
def api(api: Api) -> Api:
    """Every test here asks the subgraph's endpoint, as a gateway does."""
    return api.at("/subgraph")


def payment_rep(payment: dict[str, Any]) -> dict[str, Any]:
    return {"__typename": "Payment", "id": payment["id"]}


def loan_rep(user: str, loan: str) -> dict[str, Any]:
    return {"__typename": "Loan", "userId": user, "loanId": loan}


def absent_payment(user: str, loan: str, number: int = 0) -> dict[str, Any]:
    """The representation of a payment that does not exist."""
    ref = PaymentRef(user, loan, f"0190f5a4-0000-7000-8000-{number:012x}")
    return {"__typename": "Payment", "id": payment_node_id(ref)}


def report(body: dict[str, Any]) -> tuple[int, dict[str, int]]:
    dynamodb = body["extensions"]["dynamodb"]
    return dynamodb["requests"], dynamodb["operations"]


async def test_the_service_field_answers_the_pinned_subgraph_sdl(api: Api) -> None:
    # As introspection does, it answers without a token (production refuses both).
    data = await api.data("{ _service { sdl } }", as_=None)
    assert data["_service"]["sdl"] + "\n" == SUBGRAPH_SNAPSHOT.read_text()


async def test_fifty_payment_representations_make_one_batch_get(api: Api) -> None:
    created = [await api.create(user=f"user-{n % 3}", loan=f"loan-{n % 7}") for n in range(50)]

    representations = [payment_rep(p) for p in created]

    body = await api.post(ENTITIES, {"representations": representations}, debug=True)

    assert "errors" not in body
    assert body["data"]["_entities"] == [
        {"__typename": "Payment", "paymentId": p["paymentId"], "amountCents": 5000} for p in created
    ]
    assert report(body) == (1, {"BatchGetItem": 1})


async def test_past_a_hundred_payments_the_batch_is_read_in_chunks_of_a_hundred(api: Api) -> None:
    created = [await api.create(loan=f"loan-{n % 5}") for n in range(30)]
    # The same payments asked again and again are still read once each (DynamoDB refuses a
    # batch with a key twice), so 150 distinct representations need 150 payments: these 30 and
    # 120 that do not exist, which read as null.
    absent = [absent_payment("alice", "loan-x", n) for n in range(120)]
    representations = [payment_rep(p) for p in created] + absent

    body = await api.post(ENTITIES, {"representations": representations}, debug=True)

    assert "errors" not in body
    found = body["data"]["_entities"]
    assert [entity["paymentId"] for entity in found[:30]] == [p["paymentId"] for p in created]
    assert found[30:] == [None] * 120
    assert report(body) == (2, {"BatchGetItem": 2})


async def test_loan_representations_read_nothing(api: Api) -> None:
    representations = [loan_rep("alice", f"loan-{n}") for n in range(40)]

    body = await api.post(ENTITIES, {"representations": representations}, debug=True)

    assert body["data"]["_entities"] == [
        {"__typename": "Loan", "userId": "alice", "loanId": f"loan-{n}"} for n in range(40)
    ]
    assert report(body) == (0, {})


async def test_a_loan_entity_lists_its_payments(api: Api) -> None:
    payment = await api.create(user="alice", loan="loan-1")
    query = """query($representations: [_Any!]!) { _entities(representations: $representations) {
      ... on Loan { id payments(first: 5) { edges { node { paymentId } } } } } }"""

    data = await api.data(query, {"representations": [loan_rep("alice", "loan-1")]}, as_=ALICE)

    [loan] = data["_entities"]
    assert loan["id"] == payment["loan"]["id"]
    assert loan["payments"]["edges"] == [{"node": {"paymentId": payment["paymentId"]}}]


async def test_another_users_entities_read_like_missing_ones(api: Api) -> None:
    alices = await api.create(user="alice", loan="loan-a")
    bobs = await api.create(user="bob", loan="loan-b")
    missing = absent_payment("bob", "loan-b")
    query = """query($representations: [_Any!]!) { _entities(representations: $representations) {
      ... on Payment { paymentId } ... on Loan { loanId payments { edges { node { id } } } } } }"""
    representations = [
        payment_rep(alices),
        payment_rep(bobs),
        missing,
        loan_rep("bob", "loan-b"),
        loan_rep("alice", "loan-a"),
    ]

    as_alice = await api.post(query, {"representations": representations}, as_=ALICE)
    as_bob = await api.post(query, {"representations": representations}, as_=BOB)

    assert as_alice == {
        "data": {
            "_entities": [
                {"paymentId": alices["paymentId"]},
                None,
                None,
                None,
                {"loanId": "loan-a", "payments": {"edges": [{"node": {"id": alices["id"]}}]}},
            ]
        }
    }
    assert as_bob["data"]["_entities"][1:4] == [
        {"paymentId": bobs["paymentId"]},
        None,
        {"loanId": "loan-b", "payments": {"edges": [{"node": {"id": bobs["id"]}}]}},
    ]
    assert "errors" not in as_bob


async def test_a_malformed_representation_is_invalid_input_at_its_place(api: Api) -> None:
    payment = await api.create(user="alice", loan="loan-1")
    malformed: list[tuple[Any, str]] = [
        ("Payment", "representations[0]"),
        ({"id": payment["id"]}, "representations[1].__typename"),
        ({"__typename": "Refund", "id": payment["id"]}, "representations[2].__typename"),
        ({"__typename": "Installment", "installmentId": "inst-1"}, "representations[3].__typename"),
        ({"__typename": "Payment"}, "representations[4].id"),
        ({"__typename": "Payment", "id": "not-a-node-id"}, "representations[5].id"),
        ({"__typename": "Payment", "id": payment["loan"]["id"]}, "representations[6].id"),
        ({"__typename": "Payment", "id": 7}, "representations[7].id"),
        ({"__typename": "Loan", "loanId": "loan-1"}, "representations[8].userId"),
        ({"__typename": "Loan", "userId": "alice", "loanId": "a#b"}, "representations[9].loanId"),
        ({"__typename": "Loan", "userId": "", "loanId": "loan-1"}, "representations[10].userId"),
    ]
    representations = [rep for rep, _ in malformed] + [payment_rep(payment)]

    body = await api.post(ENTITIES, {"representations": representations}, as_=ALICE)

    found = body["data"]["_entities"]
    assert found[:-1] == [None] * len(malformed)
    assert found[-1]["paymentId"] == payment["paymentId"]
    assert error_codes(body) == ["INVALID_INPUT"] * len(malformed)
    assert [(e["path"], e["extensions"]["field"]) for e in body["errors"]] == [
        (["_entities", index], field) for index, (_, field) in enumerate(malformed)
    ]


async def test_entities_need_a_caller(api: Api) -> None:
    body = await api.post(ENTITIES, {"representations": [loan_rep("alice", "l")]}, as_=None)
    assert body["data"] is None
    assert error_codes(body) == ["UNAUTHENTICATED"]


async def test_entities_cost_what_they_select_once_per_representation(api: Api) -> None:
    query = """query($representations: [_Any!]!) { _entities(representations: $representations) {
      ... on Loan { payments(first: 100) { edges { node { paymentId } } } } } }"""
    few = [loan_rep("alice", f"loan-{n}") for n in range(3)]
    many = [loan_rep("alice", f"loan-{n}") for n in range(40)]

    cheap = await api.post(query, {"representations": few}, as_=ALICE)
    costly = await api.post(query, {"representations": many}, as_=ALICE)

    assert "errors" not in cheap
    assert error_codes(costly) == ["QUERY_TOO_COSTLY"]
    # 1 for `_entities`, then per loan: payments, 100 edges of node and paymentId.
    assert costly["errors"][0]["extensions"]["cost"] == 1 + 40 * (1 + 100 * 3)


async def test_nodes_cost_what_they_select_once_per_id(api: Api) -> None:
    query = """query($ids: [ID!]!) { nodes(ids: $ids) {
      ... on Loan { payments(first: 100) { edges { node { paymentId } } } } } }"""
    loan_ids = [(await api.create(loan=f"loan-{n}"))["loan"]["id"] for n in range(40)]

    costly = await api.post(query, {"ids": loan_ids}, as_=ALICE)

    assert costly["errors"][0]["extensions"]["cost"] == 1 + 40 * (1 + 100 * 3)


async def test_an_application_names_its_installment_for_the_loans_service(api: Api) -> None:
    payment = await api.create(user="alice", loan="loan-1", method="PINLESS")
    await api.move("completePayment", payment, confirmationId="conf-1")
    query = """query($id: ID!) { node(id: $id) { ... on Payment {
      applications { installmentId installment { __typename installmentId } } } } }"""

    data = await api.data(query, {"id": payment["id"]}, as_=ALICE)

    assert data["node"]["applications"] == [
        {
            "installmentId": "inst-1",
            "installment": {"__typename": "Installment", "installmentId": "inst-1"},
        }
    ]
