"""Budgets as Apollo Client sees them (SPEC §21): `tools/trusted-documents/throttled.mjs` (Apollo
Client pinned by that folder's lock) runs a query against a real `python -m cli serve` until its
service client's budget is spent. Admitted answers carry `extensions.cost`; over budget, with Apollo
Client's own Accept header (application/graphql-response+json), its error is the GraphQL error
THROTTLED, the answer's status 429 and its Retry-After whole seconds; with application/json it is a
ServerError of status 429 whose response holds Retry-After and whose body THROTTLED."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import token
from tests.api.test_budgets import CREATE, create_input, engine_cost
from tests.backends import Backend, fresh_table
from tests.servers import served

pytestmark = pytest.mark.ddblocal

DRIVER = Path(__file__).resolve().parents[2] / "tools" / "trusted-documents" / "throttled.mjs"
# The driver's query (src/apollo/operations.js), a page of 3 of a loan's payments, as Apollo
# Client sends it: its cache adds __typename to each selection set.
LOAN_PAYMENTS = """query LoanPayments($userId: ID!, $loanId: ID!) {
  loan(userId: $userId, loanId: $loanId) {
    payments(first: 3) {
      edges { node { id paymentId status amountCents __typename } __typename }
      pageInfo { hasNextPage endCursor __typename }
      __typename
    }
    __typename
  }
}"""
LOAN = {"userId": "alice", "loanId": "loan-1"}
BURST = 100


@pytest.fixture(scope="module")
async def url(ddblocal_backend: Backend) -> AsyncIterator[str]:
    table_name = await fresh_table(ddblocal_backend)
    try:
        # Budgets of 100 refilling at 1 a minute: nothing refills during the test.
        async with served(
            ddblocal_backend.endpoint_url,
            table_name,
            max_query_cost=str(BURST),
            budget_service_rate=str(1 / 60),
            budget_service_burst=str(BURST),
            # A first parse costs what the operation does (tested in tests/api/test_budgets.py).
            budget_new_document_cost="1",
        ) as [url]:
            # Three payments, so each page returns all it asked for and nothing is refunded;
            # created by a client of its own, so the budgets under test are full.
            writer = token("seed", service=True, azp="seed-client")
            async with httpx.AsyncClient(
                base_url=url, headers={"authorization": f"Bearer {writer}"}, timeout=30
            ) as http:
                for _ in range(3):
                    created = await http.post(
                        "/graphql", json={"query": CREATE, "variables": {"input": create_input()}}
                    )
                    assert created.status_code == 200, created.text
            yield f"{url}/graphql"
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)


async def apollo_client(url: str, client: str, *options: str) -> list[dict[str, Any]]:
    node = shutil.which("node")
    assert node is not None, "Apollo Client runs under Node (installed with npm)"
    process = await asyncio.create_subprocess_exec(
        node,
        str(DRIVER),
        "--url",
        url,
        "--token",
        token("job", service=True, azp=client),
        "--user-id",
        LOAN["userId"],
        "--loan-id",
        LOAN["loanId"],
        "--requests",
        "5",
        *options,
        cwd=DRIVER.parent,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    runs: list[dict[str, Any]] = json.loads(out)["runs"]
    return runs


def admitted_then_throttled(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs the budget refused, once those it admitted are checked: 100 admits 2 of 42."""
    cost = engine_cost(LOAN_PAYMENTS, LOAN)
    assert cost == 42
    admitted = BURST // cost
    for run in runs[:admitted]:
        assert (run["status"], run["error"]) == (200, None), run
        assert run["cost"]["requestedQueryCost"] == run["cost"]["actualQueryCost"] == cost
    assert runs[admitted - 1]["cost"]["throttleStatus"]["currentlyAvailable"] == BURST % cost
    throttled = runs[admitted:]
    for run in throttled:
        assert run["status"] == 429, run
        # Until the budget holds 42 again, at 1 a minute, in whole seconds.
        assert int(run["retryAfter"]) == (cost - BURST % cost) * 60, run
    return throttled


async def test_apollo_client_over_budget_reads_throttled_429_and_retry_after(url: str) -> None:
    throttled = admitted_then_throttled(await apollo_client(url, "apollo-front-end"))
    for run in throttled:
        assert run["error"]["name"] == "CombinedGraphQLErrors", run
        assert run["error"]["codes"] == ["THROTTLED"], run
        assert run["cost"]["requestedQueryCost"] == 42
        assert run["cost"]["actualQueryCost"] == 0


async def test_apollo_client_asking_for_json_reads_a_server_error_of_429(url: str) -> None:
    runs = await apollo_client(url, "apollo-json", "--accept", "application/json")
    for run in admitted_then_throttled(runs):
        error = run["error"]
        assert (error["name"], error["statusCode"]) == ("ServerError", 429), run
        assert error["retryAfter"] == run["retryAfter"]
        assert error["codes"] == ["THROTTLED"], run
