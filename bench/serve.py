"""One peer as a server process: `python -m bench.serve <peer> --port N ...`.

The service runs through `server.cli.serve`, so it is served exactly as `loc-payments serve`
serves it (one uvicorn worker; uvloop and httptools, which uvicorn picks when installed; the
access log). On the fake, `create_app` gets the fake client handed in; on DynamoDB Local nothing
is changed. The other Python peers run on uvicorn with uvloop and httptools and no access log; the
Node peer replaces this process by `node bench/peers/node/server.mjs`.

Each peer imports only what it needs, so the HTTP floor starts in a fraction of a second.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

    from datasource import PaymentStore
    from server.settings import Settings

HOST = "127.0.0.1"
# Never reached: the fake client stands in for it. Set so that no embedded DynamoDB starts.
FAKE_ENDPOINT = "http://fake-dynamodb.invalid"


def service_settings(
    port: int,
    endpoint: str,
    table_name: str | None = None,
    gsi2_shards: int = 1,
    live_updates: bool = True,
) -> Settings:
    from pydantic import SecretStr

    from server.settings import DEV_CURSOR_SECRET, Settings

    # Without a table name, `local`'s own (local-loc-service).
    table: dict[str, Any] = {} if table_name is None else {"table_name": table_name}
    return Settings(
        env="local",
        host=HOST,
        port=port,
        dynamodb_endpoint=endpoint,
        cursor_secret=SecretStr(DEV_CURSOR_SECRET),
        gsi2_shards=gsi2_shards,
        live_updates=live_updates,
        **table,
    )


def _fake_client(data: Path) -> DynamoDBClient:
    from bench import dataset
    from bench.fake_dynamodb import FakeDynamoDB, as_client

    return as_client(FakeDynamoDB(_fake_table_name(), dataset.read(data)))


def _fake_table_name() -> str:
    return service_settings(0, FAKE_ENDPOINT).table_name


def _fake_store(data: Path) -> PaymentStore:
    from datasource import PaymentStore
    from server.settings import DEV_CURSOR_SECRET

    return PaymentStore(
        _fake_client(data),
        table_name=_fake_table_name(),
        cursor_secret=DEV_CURSOR_SECRET.encode(),
    )


def _run(app: Any, port: int) -> None:
    uvicorn.run(
        app,
        host=HOST,
        port=port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
    )


def http_floor(arguments: argparse.Namespace) -> None:
    from bench.peers import http_floor

    _run(http_floor.create_app(arguments.responses), arguments.port)


def graphql_core(arguments: argparse.Namespace) -> None:
    from bench.peers import graphql_core

    _run(graphql_core.create_app(_fake_store(arguments.data)), arguments.port)


def strawberry(arguments: argparse.Namespace) -> None:
    from bench.peers import strawberry_app

    _run(strawberry_app.create_app(_fake_store(arguments.data)), arguments.port)


def service(arguments: argparse.Namespace) -> None:
    import functools

    from server import app
    from server.cli import serve

    client = _fake_client(arguments.data)
    # `serve` looks `create_app` up when it runs, so it builds the app on the fake.
    app.create_app = functools.partial(app.create_app, dynamodb_client=client)
    serve(service_settings(arguments.port, FAKE_ENDPOINT))


def service_local(arguments: argparse.Namespace) -> None:
    from server.cli import serve

    # The pass's tables have no stream (bench.local_pass): no live updates to serve.
    serve(
        service_settings(
            arguments.port,
            arguments.endpoint,
            arguments.table,
            arguments.gsi2_shards,
            live_updates=False,
        )
    )


NODE_PEER = Path(__file__).resolve().parent / "peers" / "node"


def node(arguments: argparse.Namespace) -> None:
    """The Node.js peer (`bench/peers/node/server.mjs`), in place of this process."""
    import os

    from server.settings import DEV_CURSOR_SECRET, DEV_JWT_SECRET

    if not (NODE_PEER / "node_modules").is_dir():
        raise SystemExit(f"the Node peer is not installed: npm ci --prefix {NODE_PEER}")
    settings = service_settings(arguments.port, arguments.endpoint, arguments.table)
    os.execvp(
        "node",
        [
            "node",
            str(NODE_PEER / "server.mjs"),
            *("--port", str(arguments.port), "--endpoint", arguments.endpoint),
            *("--table", settings.table_name, "--region", settings.region),
            *("--jwt-secret", DEV_JWT_SECRET, "--cursor-secret", DEV_CURSOR_SECRET),
        ],
    )


PEERS = {
    "http-floor": http_floor,
    "graphql-core": graphql_core,
    "strawberry": strawberry,
    "service": service,
    "service-local": service_local,
    "node": node,
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.serve")
    parser.add_argument("peer", choices=PEERS)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data", type=Path, help="the fake's items (a JSON list)")
    parser.add_argument("--responses", type=Path, help="http-floor: [[request, response], ...]")
    parser.add_argument("--endpoint", help="service-local, node: the DynamoDB endpoint")
    parser.add_argument("--table", help="service-local, node: the table, if not local's default")
    parser.add_argument("--gsi2-shards", type=int, default=1, help="service-local: GSI2 shards")
    arguments = parser.parse_args()
    PEERS[arguments.peer](arguments)


if __name__ == "__main__":
    main()
