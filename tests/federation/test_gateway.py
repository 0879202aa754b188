"""Through a real gateway (Hive Gateway on the supergraph composed with the tests' loans
subgraph): one request answers with both subgraphs' data, the client's token decides what the
payments subgraph shows, `extensions.dynamodb` adds up what the operation read, and a deferred
fragment of the payments subgraph arrives in a later part."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from domain.payment import PaymentRef
from resolvers.node_ids import payment_node_id
from tests.api.conftest import ALICE, BOB, SERVICE
from tests.api.test_incremental_delivery import merged, parts
from tests.federation.conftest import (
    CompositionFailed,
    FederatedGraph,
    Subgraph,
    compose,
)
from tests.federation.loans_subgraph import BALANCE_CENTS

LOAN_WITH_BOTH = """query($loanId: ID!) { loan(loanId: $loanId) {
  balanceCents
  payments(first: 5) { edges { node { amountCents applications { installment { dueDate } } } } }
} }"""
ANOTHER_USERS_LOAN = """query($userId: ID!, $loanId: ID!) { loan(userId: $userId, loanId: $loanId) {
  balanceCents payments(first: 5) { edges { node { amountCents } } } } }"""
INSTALLMENT_PAYMENTS = """query($id: ID!) { installment(installmentId: $id) {
  dueDate payments { amountCents status } } }"""
CREATE = """mutation($input: CreatePaymentInput!) { createPayment(input: $input) {
  ... on PaymentPayload { payment { id userId loanId paymentId } } } }"""
COMPLETE = """mutation($input: CompletePaymentInput!) { completePayment(input: $input) {
  __typename } }"""
# A loan page that paints first: each payment's status and history deferred, the edges streamed.
# The payment's key (`id`) is selected outside the fragment: the gateway fetches the fragment by it.
DEFERRED_LOAN_PAGE = """query($loanId: ID!) { loan(loanId: $loanId) {
  balanceCents
  payments(first: 5) { edges @stream(initialCount: 1) { node {
    id amountCents
    ... @defer(label: "history") { status history(first: 5) { edges { node { toStatus } } } }
  } } }
} }"""
PLAIN_LOAN_PAGE = DEFERRED_LOAN_PAGE.replace(" @stream(initialCount: 1)", "").replace(
    ' @defer(label: "history")', ""
)
RECORD = """mutation($installmentId: ID!, $paymentId: ID!) {
  recordPayment(installmentId: $installmentId, paymentId: $paymentId) }"""


async def post(
    http: httpx.AsyncClient,
    url: str,
    query: str,
    variables: dict[str, Any],
    *,
    token: str | None,
    debug: bool = True,
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if debug:
        headers["X-Debug-DynamoDB"] = "1"
    response = await http.post(url, json={"query": query, "variables": variables}, headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def completed_payment(
    http: httpx.AsyncClient,
    graph: FederatedGraph,
    *,
    user: str,
    loan: str,
    installment: str,
    service: str = SERVICE,
) -> dict[str, Any]:
    """A PINLESS payment of 50.00 completed onto `installment`, made by a service (the token
    `service`) directly on the payments subgraph."""
    created = await post(
        http,
        graph.payments,
        CREATE,
        {
            "input": {
                "userId": user,
                "loanId": loan,
                "amountCents": 5000,
                "method": "PINLESS",
                "intendedInstallmentId": installment,
            }
        },
        token=service,
        debug=False,
    )
    payment: dict[str, Any] = created["data"]["createPayment"]["payment"]
    names = {key: payment[key] for key in ("userId", "loanId", "paymentId")}
    confirmation = f"conf-{uuid.uuid4().hex[:12]}"
    completed = await post(
        http,
        graph.payments,
        COMPLETE,
        {"input": {**names, "confirmationId": confirmation, "reason": "settled"}},
        token=service,
        debug=False,
    )
    assert completed["data"]["completePayment"]["__typename"] == "PaymentPayload", completed
    return payment


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


def loan_id() -> str:
    return f"loan-{uuid.uuid4().hex[:12]}"


async def test_a_customers_loan_answers_from_both_subgraphs_in_one_read(
    federated_graph: FederatedGraph, http: httpx.AsyncClient
) -> None:
    loan = loan_id()
    for _ in range(3):
        await completed_payment(
            http, federated_graph, user="alice", loan=loan, installment="inst-2"
        )

    body = await post(http, federated_graph.gateway, LOAN_WITH_BOTH, {"loanId": loan}, token=ALICE)

    assert "errors" not in body, body
    payment = {"amountCents": 5000, "applications": [{"installment": {"dueDate": "2026-05-01"}}]}
    assert body["data"] == {
        "loan": {
            "balanceCents": BALANCE_CENTS,
            "payments": {"edges": [{"node": payment}] * 3},
        }
    }
    # The loan's page, its payments' applications and installments: one Query in all.
    dynamodb = body["extensions"]["dynamodb"]
    assert (dynamodb["requests"], dynamodb["operations"]) == (1, {"Query": 1})


async def test_a_deferred_fragment_arrives_in_a_later_part(
    federated_graph: FederatedGraph, http: httpx.AsyncClient
) -> None:
    loan = loan_id()
    for _ in range(3):
        await completed_payment(
            http, federated_graph, user="alice", loan=loan, installment="inst-1"
        )
    variables = {"loanId": loan}
    plain = await post(http, federated_graph.gateway, PLAIN_LOAN_PAGE, variables, token=ALICE)

    response = await http.post(
        federated_graph.gateway,
        json={"query": DEFERRED_LOAN_PAGE, "variables": variables},
        headers={"Authorization": f"Bearer {ALICE}", "Accept": "multipart/mixed"},
    )

    assert response.status_code == 200, response.text
    payloads = parts(response)
    first, later = payloads[0], payloads[1:]
    assert first["hasNext"] is True
    [node] = [edge["node"] for edge in first["data"]["loan"]["payments"]["edges"]]
    assert "history" not in node and "status" not in node
    deferred = [
        entry["data"]
        for payload in later
        for entry in payload.get("incremental", ())
        if entry.get("label") == "history"
    ]
    assert [part["status"] for part in deferred] == ["COMPLETED"] * 3
    assert later[-1]["hasNext"] is False
    assert "errors" not in plain, plain
    assert merged(payloads) == {"data": plain["data"]}


async def test_another_customers_loan_shows_no_payments(
    federated_graph: FederatedGraph, http: httpx.AsyncClient
) -> None:
    loan = loan_id()
    await completed_payment(http, federated_graph, user="alice", loan=loan, installment="inst-1")
    variables = {"userId": "alice", "loanId": loan}

    as_bob = await post(http, federated_graph.gateway, ANOTHER_USERS_LOAN, variables, token=BOB)
    as_alice = await post(http, federated_graph.gateway, ANOTHER_USERS_LOAN, variables, token=ALICE)

    assert as_bob["data"] == {"loan": {"balanceCents": BALANCE_CENTS, "payments": {"edges": []}}}
    assert "errors" not in as_bob
    assert as_bob["extensions"]["dynamodb"]["requests"] == 0
    assert len(as_alice["data"]["loan"]["payments"]["edges"]) == 1


async def record(http: httpx.AsyncClient, graph: FederatedGraph, installment: str, id: str) -> None:
    """Tells the loans subgraph that the payment `id` (a global id) paid `installment`."""
    variables = {"installmentId": installment, "paymentId": id}
    recorded = await post(http, graph.loans, RECORD, variables, token=None, debug=False)
    assert recorded == {"data": {"recordPayment": True}}


async def test_payments_the_loans_service_names_are_read_in_one_batch(
    federated_graph: FederatedGraph, http: httpx.AsyncClient
) -> None:
    paid, unpaid = (f"inst-{uuid.uuid4().int % 12 + 1}-{uuid.uuid4().hex[:8]}" for _ in "ab")
    loan = loan_id()
    for number in range(4):
        payment = await completed_payment(
            http, federated_graph, user="alice", loan=loan, installment=paid
        )
        await record(http, federated_graph, paid, payment["id"])
        absent = f"0190f5a4-0000-7000-8000-{number:012x}"
        await record(
            http, federated_graph, unpaid, payment_node_id(PaymentRef("alice", loan, absent))
        )

    as_alice = await ask(http, federated_graph, paid, ALICE)
    as_bob = await ask(http, federated_graph, paid, BOB)
    missing = await ask(http, federated_graph, unpaid, ALICE)

    assert "errors" not in as_alice, as_alice
    payments = as_alice["data"]["installment"]["payments"]
    assert payments == [{"amountCents": 5000, "status": "COMPLETED"}] * 4
    dynamodb = as_alice["extensions"]["dynamodb"]
    assert (dynamodb["requests"], dynamodb["operations"]) == (1, {"BatchGetItem": 1})
    # Another customer's payments are null, as payments that do not exist are (the gateway then
    # reports their non-null fields as missing, the same way for both): nothing says they exist.
    assert as_bob["data"]["installment"]["payments"] == [None] * 4
    assert as_bob["errors"] == missing["errors"]
    assert as_bob["data"]["installment"]["payments"] == missing["data"]["installment"]["payments"]


async def ask(
    http: httpx.AsyncClient, graph: FederatedGraph, installment: str, token: str
) -> dict[str, Any]:
    return await post(http, graph.gateway, INSTALLMENT_PAYMENTS, {"id": installment}, token=token)


async def test_the_gateway_forwards_no_token_where_the_client_sent_none(
    federated_graph: FederatedGraph, http: httpx.AsyncClient
) -> None:
    body = await post(
        http, federated_graph.gateway, LOAN_WITH_BOTH, {"loanId": loan_id()}, token=None
    )

    assert body["data"] is None
    assert [error["extensions"]["code"] for error in body["errors"]] == ["UNAUTHENTICATED"]


async def test_without_the_debug_header_no_report_comes_through(
    federated_graph: FederatedGraph, http: httpx.AsyncClient
) -> None:
    variables = {"loanId": loan_id()}
    body = await post(
        http, federated_graph.gateway, LOAN_WITH_BOTH, variables, token=ALICE, debug=False
    )

    assert body["data"]["loan"]["payments"] == {"edges": []}
    assert "dynamodb" not in body.get("extensions", {})


def test_a_breaking_change_to_a_shared_type_fails_composition(
    federated_graph: FederatedGraph, tmp_path: Path
) -> None:
    payments, loans = federated_graph.subgraphs
    loan_type = payments.sdl.index('type Loan implements Node @key(fields: "userId loanId") {')
    changed = payments.sdl[:loan_type] + payments.sdl[loan_type:].replace(
        "loanId: ID!", "loanId: String!", 1
    )

    with pytest.raises(CompositionFailed) as failure:
        compose([Subgraph(payments.name, payments.url, changed), loans], tmp_path)

    message = str(failure.value)
    assert message.startswith('FIELD_TYPE_MISMATCH: Type of field "Loan.loanId" is incompatible')
    assert 'type "String!" in subgraph "payments"' in message
    assert 'type "ID!" in subgraph "loans"' in message
