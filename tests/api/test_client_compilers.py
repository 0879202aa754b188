"""The front-end tools compile against the schema the service serves, downloaded as a front-end team
does (SPEC §6): GraphQL Code Generator's client preset introspects `/graphql` of a real
`python -m cli serve` with `strictScalars: true` (only the service's own `DateTime` configured), and
relay-compiler compiles the Relay operations against the SDL printed from that introspection. Both
pinned by `tools/trusted-documents/package-lock.json`. The same codegen run against `/subgraph`
stops on federation's `_Any`, which is why `/graphql` must not hold it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from graphql import build_client_schema, get_introspection_query, print_schema

from tests.backends import Backend, fresh_table
from tests.servers import served

CLIENTS = Path(__file__).resolve().parents[2] / "tools" / "trusted-documents"
BIN = CLIENTS / "node_modules" / ".bin"


async def run(*command: str | Path, cwd: Path) -> tuple[int, str]:
    """A tool's exit status and everything it printed."""
    process = await asyncio.create_subprocess_exec(
        *map(str, command),
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 180)
    assert process.returncode is not None
    return process.returncode, out.decode()


async def codegen(url: str, directory: Path) -> tuple[int, str]:
    """The client preset over the codegen operations, the schema introspected from `url`."""
    config = {
        "schema": url,
        "documents": [str(CLIENTS / "src/codegen/operations.ts")],
        "generates": {
            f"{directory}/gql/": {
                "preset": "client",
                "config": {"strictScalars": True, "scalars": {"DateTime": "string"}},
            }
        },
    }
    path = written(directory / "codegen.json", json.dumps(config))
    return await run(BIN / "graphql-codegen", "--config", path, cwd=CLIENTS)


def written(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


async def served_sdl(url: str) -> str:
    """The SDL a team writes from the endpoint's introspection (Relay reads SDL only)."""
    async with httpx.AsyncClient() as http:
        response = await http.post(url, json={"query": get_introspection_query(descriptions=True)})
    response.raise_for_status()
    return print_schema(build_client_schema(response.json()["data"]))


async def relay_compiler(sdl: str, directory: Path) -> tuple[int, str]:
    """The Relay operations (`src/relay/App.ts`) compiled against `sdl`, in `directory`."""
    written(directory / "src/App.ts", (CLIENTS / "src/relay/App.ts").read_text())
    written(directory / "schema.graphql", sdl)
    (directory / "src/__generated__").mkdir()
    config = {
        "src": "./src",
        "schema": "./schema.graphql",
        "language": "typescript",
        "artifactDirectory": "./src/__generated__",
        "noSourceControl": True,
    }
    path = written(directory / "relay.config.json", json.dumps(config))
    return await run(BIN / "relay-compiler", path, cwd=directory)


@pytest.mark.ddblocal
async def test_codegen_and_relay_compile_against_the_served_schema(
    ddblocal_backend: Backend, tmp_path: Path
) -> None:
    table_name = await fresh_table(ddblocal_backend)
    try:
        async with served(ddblocal_backend.endpoint_url, table_name) as [url]:
            typed = await codegen(f"{url}/graphql", tmp_path / "codegen")
            leaked = await codegen(f"{url}/subgraph", tmp_path / "codegen-subgraph")
            relay = await relay_compiler(await served_sdl(f"{url}/graphql"), tmp_path / "relay")
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)

    assert typed[0] == 0, typed[1]
    generated = (tmp_path / "codegen/gql/graphql.ts").read_text()
    assert "export type LoanPaymentsQuery = " in generated
    assert "_Any" not in generated
    # The control: a schema with federation's scalars is what strict front ends cannot compile.
    assert leaked[0] != 0
    assert "Unknown scalar type _Any" in leaked[1]
    assert relay[0] == 0, relay[1]
    artifacts = sorted(path.name for path in (tmp_path / "relay/src/__generated__").iterdir())
    assert "AppLoanPaymentsQuery.graphql.ts" in artifacts, artifacts
