"""Apollo Client's persisted-query link (`@apollo/client/link/persisted-queries`, pinned by
`trusted-documents/package-lock.json`) against a real `python -m server serve`: automatic
persisted queries' round trip (miss, register, hit), by POST and with hashed queries by GET."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import SERVICE
from tests.backends import Backend
from tests.conftest import _fresh_table
from tests.servers import served

DRIVER = Path(__file__).resolve().parents[2] / "trusted-documents" / "apq.mjs"


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
    table_name = await _fresh_table(ddblocal_backend)
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
