"""The GraphQL-over-HTTP specification, audited (SPEC §13): the npm package graphql-http, pinned by
`http-audit/package-lock.json`, runs every one of its `serverAudits` against a real
`python -m cli serve`, at `/graphql` and at the federation subgraph's `/subgraph` (the same
protocols, §15); every MUST, SHOULD and MAY audit must pass."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.backends import Backend, fresh_table
from tests.servers import served

REPO = Path(__file__).resolve().parents[2]
AUDIT = REPO / "tools" / "http-audit" / "audit.mjs"
# graphql-http 1.23.1's serverAudits: so that an audit that stops running is noticed.
AUDITS = 61


async def audit(url: str) -> list[dict[str, Any]]:
    node = shutil.which("node")
    assert node is not None, "the HTTP audit needs Node (installed with npm)"
    process = await asyncio.create_subprocess_exec(
        node,
        str(AUDIT),
        url,
        cwd=AUDIT.parent,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    results: list[dict[str, Any]] = json.loads(out)
    return results


@pytest.mark.ddblocal
@pytest.mark.parametrize("path", ["/graphql", "/subgraph"])
async def test_every_audit_of_the_graphql_over_http_specification_passes(
    ddblocal_backend: Backend, path: str
) -> None:
    table_name = await fresh_table(ddblocal_backend)
    try:
        async with served(ddblocal_backend.endpoint_url, table_name) as [url]:
            results = await audit(f"{url}{path}")
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)

    failed = [f"{r['id']} {r['name']}: {r['reason']}" for r in results if r["status"] != "ok"]
    assert not failed, "\n".join(failed)
    assert len(results) == AUDITS
    levels = {result["name"].split()[0] for result in results}
    assert levels == {"MUST", "SHOULD", "MAY"}
