"""Trusted documents as the front-end clients themselves use them: the manifests their tools made
(`tools/trusted-documents/manifests/`, each with the command that made it in
`tools/trusted-documents/README.md`) load, and each document runs by the id its client sends, as a
customer in prod, over POST and (queries) GET; and Apollo Client's persisted-query link
(`@apollo/client/link/persisted-queries`, pinned by `tools/trusted-documents/package-lock.json`),
driven from Node against a real `python -m cli serve`, makes automatic persisted queries'
round trip (miss, register, hit) by POST and with hashed queries by GET."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from datasource import DynamoConfig
from tests.api.conftest import PROD_SETTINGS, SERVICE, api_client, prod_token
from tests.backends import Backend, fresh_table
from tests.servers import served

MANIFESTS = Path(__file__).resolve().parents[2] / "tools" / "trusted-documents" / "manifests"
DRIVER = MANIFESTS.parent / "apq.mjs"


def by_id(name: str, identifier: str) -> dict[str, Any]:
    """The request fields each client names a document with."""
    if name.startswith("apollo"):  # Apollo Client's persisted-query link
        return {"extensions": {"persistedQuery": {"version": 1, "sha256Hash": identifier}}}
    if name.startswith("relay"):  # Relay's network layer, as its persisted-queries guide has it
        return {"doc_id": identifier}
    return {"documentId": identifier}  # GraphQL Code Generator's client preset


def documents(path: Path) -> dict[str, str]:
    """Each operation's kind and name (`query LoanPayments`) to its id."""
    data = json.loads(path.read_text())
    if "operations" in data:
        data = {operation["id"]: operation["body"] for operation in data["operations"]}
    found = {}
    for identifier, text in data.items():
        kind, name = re.search(r"\b(query|mutation) (\w+)", text).groups()  # type: ignore[union-attr]
        found[f"{kind} {name}"] = identifier
    return found


@pytest.mark.parametrize("manifest", sorted(MANIFESTS.glob("*.json")), ids=lambda path: path.name)
async def test_each_clients_documents_run_by_id_for_a_customer_in_prod(
    moto_config: DynamoConfig, manifest: Path
) -> None:
    ids = documents(manifest)
    [create] = [ids[name] for name in ids if name.startswith("mutation")]
    [listing] = [ids[name] for name in ids if "LoanPayments" in name]
    [one] = [ids[name] for name in ids if "OnePayment" in name]
    headers = {"Authorization": f"Bearer {prod_token('alice')}"}
    loan = {"userId": "alice", "loanId": "loan-1"}
    settings = {**PROD_SETTINGS, "trusted_documents": str(manifest)}

    async with api_client(moto_config, **settings) as api:

        async def run(identifier: str, variables: dict[str, Any], method: str) -> Any:
            fields = {**by_id(manifest.name, identifier), "variables": variables}
            if method == "GET":
                params = {
                    key: value if isinstance(value, str) else json.dumps(value)
                    for key, value in fields.items()
                }
                response = await api.http.get("/graphql", params=params, headers=headers)
            else:
                response = await api.http.post("/graphql", json=fields, headers=headers)
            assert response.status_code == 200, response.text
            body = response.json()
            assert "errors" not in body, body
            return body["data"]

        created = await run(
            create, {**loan, "amountCents": 2500, "idempotencyKey": manifest.name}, "POST"
        )
        payment = created["createPayment"]["payment"]
        listed = [await run(listing, loan, method) for method in ("POST", "GET")]
        fetched = await run(one, {**loan, "paymentId": payment["paymentId"]}, "GET")

    for page in listed:
        [edge] = page["loan"]["payments"]["edges"]
        assert edge["node"]["paymentId"] == payment["paymentId"]
    assert fetched["payment"]["amountCents"] == 2500


async def apollo_client(url: str, *options: str) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "Apollo Client runs under Node (installed with npm)"
    process = await asyncio.create_subprocess_exec(
        node,
        str(DRIVER),
        "--url",
        url,
        "--token",
        SERVICE,
        "--user-id",
        "user-1",
        "--loan-id",
        "loan-1",
        *options,
        cwd=DRIVER.parent,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    ran: dict[str, Any] = json.loads(out)
    return ran


@pytest.mark.ddblocal
@pytest.mark.parametrize("options", [(), ("--get",)], ids=["POST", "GET"])
async def test_apollo_clients_automatic_persisted_queries_miss_register_and_hit(
    ddblocal_backend: Backend, options: tuple[str, ...]
) -> None:
    table_name = await fresh_table(ddblocal_backend)
    try:
        async with served(ddblocal_backend.endpoint_url, table_name) as [url]:
            ran = await apollo_client(f"{url}/graphql", *options)
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)

    miss, register, hit = ran["requests"]
    hashed = "GET" if options else "POST"
    assert (miss["method"], miss["queryText"], miss["sha256Hash"]) == (
        hashed,
        False,
        register["sha256Hash"],
    )
    assert miss["body"]["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"
    assert (register["method"], register["queryText"], register["status"]) == ("POST", True, 200)
    assert (hit["method"], hit["queryText"], hit["status"]) == (hashed, False, 200)
    assert hit["body"] == register["body"]
    assert [result["error"] for result in ran["results"]] == [None, None]
    assert ran["results"][0]["data"]["loan"]["payments"]["edges"] == []
