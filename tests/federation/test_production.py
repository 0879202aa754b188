"""Federation in prod (SPEC §14, §15), through a real Hive Gateway: the gateway holds the trusted
documents (`GATEWAY_TRUSTED_DOCUMENTS`) and refuses a client's text; it sends its query plans to
`/subgraph` with its own token (the `payments:gateway` scope, `GATEWAY_TOKEN_FILE`) and the
client's in `X-Forwarded-Authorization`, which decides what each field returns."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import pytest

from tests.api.conftest import PROD_SETTINGS, prod_token
from tests.backends import Backend
from tests.federation.conftest import FederatedGraph, federated
from tests.federation.loans_subgraph import BALANCE_CENTS
from tests.federation.test_gateway import (
    INSTALLMENT_PAYMENTS,
    LOAN_WITH_BOTH,
    completed_payment,
    record,
)

TRUSTED = {"InstallmentPayments": INSTALLMENT_PAYMENTS, "LoanWithBoth": LOAN_WITH_BOTH}


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def gateway_token() -> str:
    claims = {"sub": "hive-gateway", "scope": "payments:gateway", "exp": int(time.time()) + 3600}
    return jwt.encode(claims, PROD_SETTINGS["auth_jwt_secret"], algorithm="HS256")


@pytest.fixture(scope="module")
async def prod_graph(
    ddblocal_backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[FederatedGraph]:
    directory = tmp_path_factory.mktemp("federation-prod")
    manifest = directory / "web.json"
    operations = [
        {"id": sha256(text), "name": name, "type": "query", "body": text}
        for name, text in TRUSTED.items()
    ]
    manifest.write_text(
        json.dumps(
            {"format": "apollo-persisted-query-manifest", "version": 1, "operations": operations}
        )
    )
    token_file = directory / "gateway.token"
    token_file.write_text(gateway_token())
    gateway_env = {
        "GATEWAY_TRUSTED_DOCUMENTS": str(manifest),
        "GATEWAY_TOKEN_FILE": str(token_file),
    }
    async with federated(
        ddblocal_backend, directory, gateway_env=gateway_env, **PROD_SETTINGS
    ) as graph:
        yield graph


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


async def ask(
    http: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    *,
    token: str,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    response = await http.post(
        url, json=body, headers={"Authorization": f"Bearer {token}", **(headers or {})}
    )
    assert response.headers["content-type"].startswith("application/"), response.text
    answer: dict[str, Any] = response.json()
    return answer


def codes(body: dict[str, Any]) -> list[str]:
    return [error.get("extensions", {}).get("code") for error in body.get("errors", [])]


async def test_a_customers_trusted_document_through_the_gateway_shows_their_own_payments(
    prod_graph: FederatedGraph, http: httpx.AsyncClient
) -> None:
    service = prod_token("collections-job", service=True)
    installment, loan = f"inst-3-{uuid.uuid4().hex[:8]}", f"loan-{uuid.uuid4().hex[:12]}"
    for _ in range(2):
        payment = await completed_payment(
            http, prod_graph, user="alice", loan=loan, installment=installment, service=service
        )
        await record(http, prod_graph, installment, payment["id"])
    by_id = {
        "documentId": f"sha256:{sha256(INSTALLMENT_PAYMENTS)}",
        "variables": {"id": installment},
    }
    # Apollo's form names the document by the hash alone.
    by_hash = {
        "variables": {"loanId": loan},
        "extensions": {"persistedQuery": {"version": 1, "sha256Hash": sha256(LOAN_WITH_BOTH)}},
    }

    as_alice = await ask(http, prod_graph.gateway, by_id, token=prod_token("alice"))
    as_bob = await ask(http, prod_graph.gateway, by_id, token=prod_token("bob"))
    loan_of_alice = await ask(http, prod_graph.gateway, by_hash, token=prod_token("alice"))

    assert "errors" not in as_alice, as_alice
    assert (
        as_alice["data"]["installment"]["payments"]
        == [{"amountCents": 5000, "status": "COMPLETED"}] * 2
    )
    # Bob's forwarded token decides: alice's payments are null to him, as missing ones are.
    assert as_bob["data"]["installment"]["payments"] == [None, None]
    assert "errors" not in loan_of_alice, loan_of_alice
    assert loan_of_alice["data"]["loan"]["balanceCents"] == BALANCE_CENTS
    assert len(loan_of_alice["data"]["loan"]["payments"]["edges"]) == 2


async def test_a_customers_text_is_refused_by_the_gateway_and_by_the_subgraph(
    prod_graph: FederatedGraph, http: httpx.AsyncClient
) -> None:
    alice = prod_token("alice")
    text = {"query": LOAN_WITH_BOTH, "variables": {"loanId": "loan-1"}}
    unknown = {"documentId": f"sha256:{sha256('{ __typename }')}"}

    at_gateway = await ask(http, prod_graph.gateway, text, token=alice)
    unknown_at_gateway = await ask(http, prod_graph.gateway, unknown, token=alice)
    at_subgraph = await ask(http, prod_graph.payments, text, token=alice)
    # A customer naming another caller in the gateway's header is no gateway.
    posing = await ask(
        http,
        prod_graph.payments,
        text,
        token=alice,
        headers={"X-Forwarded-Authorization": f"Bearer {prod_token('bob')}"},
    )

    # Refused before any plan runs: no data at all, not a subgraph's error inside one.
    assert "data" not in at_gateway and codes(at_gateway) == ["DOCUMENT_NOT_TRUSTED"], at_gateway
    assert codes(unknown_at_gateway) == ["PERSISTED_QUERY_NOT_IN_LIST"], unknown_at_gateway
    assert codes(at_subgraph) == ["DOCUMENT_NOT_TRUSTED"]
    assert codes(posing) == ["FORBIDDEN"]
    assert posing.get("data") is None
