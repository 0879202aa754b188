"""A real federated graph for the federation tests: this service (`python -m cli serve` on
DynamoDB Local), the tests' own loans subgraph, the supergraph composed from their SDLs by
@theguild/federation-composition, and Hive Gateway serving it, as the README's Federation says.

- `compose(services)`: the supergraph SDL, or `CompositionFailed` with the composer's messages.
- `federated_graph` (module): the three processes, each on a free port, and their URLs; a
  supergraph that does not compose fails the tests with the composer's messages.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from harness.processes import Process, Service
from tests.backends import Backend, fresh_table

REPO = Path(__file__).resolve().parents[2]
FEDERATION = REPO / "tools" / "federation"
SUBGRAPH_SDL = REPO / "schema.subgraph.graphql"
LOANS_MODULE = "tests.federation.loans_subgraph"


class CompositionFailed(Exception):
    """The composer refused the subgraphs; the message is its own."""


@dataclass(frozen=True, slots=True)
class Subgraph:
    name: str
    url: str
    sdl: str


def compose(subgraphs: Sequence[Subgraph], directory: Path) -> str:
    """The supergraph SDL of `subgraphs` (`tools/federation/compose.mjs`)."""
    arguments: list[str] = []
    for subgraph in subgraphs:
        path = directory / f"{subgraph.name}.graphql"
        path.write_text(subgraph.sdl)
        arguments += [subgraph.name, subgraph.url, str(path)]
    run = subprocess.run(
        ["node", FEDERATION / "compose.mjs", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if run.returncode != 0:
        raise CompositionFailed(run.stderr.strip() or f"compose.mjs exited {run.returncode}")
    return run.stdout


async def subgraph_sdl(http: httpx.AsyncClient, url: str) -> str:
    response = await http.post(url, json={"query": "{ _service { sdl } }"})
    response.raise_for_status()
    sdl: str = response.json()["data"]["_service"]["sdl"]
    return sdl


@contextlib.asynccontextmanager
async def processes(*started: Process) -> AsyncIterator[None]:
    for process in started:
        process.start()
    try:
        yield
    finally:
        for process in started:
            process.stop()


@dataclass(frozen=True, slots=True)
class FederatedGraph:
    """The GraphQL endpoints of the gateway and of each subgraph, and the subgraphs' SDLs."""

    gateway: str
    payments: str
    loans: str
    subgraphs: list[Subgraph]


@pytest.fixture(scope="module")
async def federated_graph(
    ddblocal_backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[FederatedGraph]:
    async with federated(ddblocal_backend, tmp_path_factory.mktemp("federation")) as graph:
        yield graph


@contextlib.asynccontextmanager
async def federated(
    backend: Backend,
    directory: Path,
    *,
    gateway_env: Mapping[str, str] | None = None,
    **settings: str,
) -> AsyncIterator[FederatedGraph]:
    """The three processes: the service with `settings` (LOC_* by setting name) on a table of
    its own, the loans subgraph, and Hive Gateway with `gateway_env` added to its environment."""
    table_name = await fresh_table(backend)  # `local` would create it; prod does not
    loans = Process("the loans subgraph", [sys.executable, "-m", LOANS_MODULE, "{port}"])
    service = Service(backend.endpoint_url, table_name, settings)
    payments = service.url
    async with processes(loans, service), httpx.AsyncClient() as http:
        await loans.wait_ready(http, "/graphql?query=%7B__typename%7D")
        # Its table answers (in prod /readyz says no more; no test here reads live updates).
        await service.wait_ready(http, "/readyz")
        # The payments service's subgraph is `/subgraph`: `/graphql` holds no federation.
        loans_url = f"{loans.url}/graphql"
        subgraphs = [
            Subgraph("payments", f"{payments}/subgraph", SUBGRAPH_SDL.read_text()),
            Subgraph("loans", loans_url, await subgraph_sdl(http, loans_url)),
        ]
        try:
            supergraph = compose(subgraphs, directory)
        except CompositionFailed as failure:
            pytest.fail(f"the supergraph does not compose:\n{failure}", pytrace=False)
        supergraph_path = directory / "supergraph.graphql"
        supergraph_path.write_text(supergraph)
        gateway = Process(
            "Hive Gateway",
            gateway_command(supergraph_path),
            cwd=FEDERATION,
            env=None if gateway_env is None else {**os.environ, **gateway_env},
        )
        async with processes(gateway):
            await gateway.wait_ready(http, "/readiness")
            yield FederatedGraph(
                f"{gateway.url}/graphql", f"{payments}/subgraph", loans_url, subgraphs
            )
    await backend.client.delete_table(TableName=table_name)


def gateway_command(supergraph: Path) -> list[str | Path]:
    """The README's command: Hive Gateway on the supergraph, with the propagation config."""
    return [
        FEDERATION / "node_modules/.bin/hive-gateway",
        "supergraph",
        supergraph,
        "--config-path",
        FEDERATION / "gateway.config.mjs",
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
    ]
