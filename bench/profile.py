"""`python -m bench.profile WORKLOAD`: where the service's own CPU goes on one workload.

The real app (`create_app`, with the JSON request log on, as `loc-payments serve` logs) on the
benchmark's fake DynamoDB without its latency, called in-process through ASGI, so the profile
holds the service and nothing of uvicorn or the network. It prints the CPU time per request
without the profiler, then cProfile's top functions with it.

    python -m bench.profile payment                    # one payment by id
    python -m bench.profile loan_page --requests 300 --sort cumulative
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time
from typing import Any

import uvloop
from starlette.types import Message

from bench import dataset, workloads
from bench.fake_dynamodb import FakeDynamoDB, as_client
from bench.runs import service_headers
from bench.serve import FAKE_ENDPOINT, service_settings
from server.app import create_app
from server.logs import configure_logging
from server.runtime import tune_garbage_collector

WARMUP = 200


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    names = [workload.name for workload in workloads.build(_stored())]
    parser.add_argument("workload", choices=names)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--sort", default="tottime", help="a pstats sort key (default tottime)")
    parser.add_argument("--top", type=int, default=35)
    return parser.parse_args()


def _stored() -> list[Any]:
    return list(dataset.items(users=range(10), loans_per_user=4, payments_per_loan=120))


async def _profile(arguments: argparse.Namespace) -> None:
    stored = _stored()
    work = {workload.name: workload for workload in workloads.build(stored)}[arguments.workload]
    settings = service_settings(0, FAKE_ENDPOINT)
    client = as_client(FakeDynamoDB(settings.table_name, stored, latency=0.0))
    app = create_app(settings, dynamodb_endpoint=FAKE_ENDPOINT, dynamodb_client=client)
    headers = [(b"content-type", b"application/json")] + [
        (name.lower().encode(), value.encode()) for name, value in service_headers().items()
    ]
    body = work.body
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/graphql",
        "raw_path": b"/graphql",
        "query_string": b"",
        "root_path": "",
        "headers": [*headers, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
    }

    async def request() -> bytes:
        sent: list[Message] = []

        async def receive() -> Message:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Message) -> None:
            sent.append(message)

        await app({**scope, "state": {}}, receive, send)
        answer: bytes = sent[1]["body"]
        return answer

    async with app.router.lifespan_context(app):
        tune_garbage_collector()
        for _ in range(WARMUP):
            answer = await request()
        if b'"errors"' in answer:
            raise RuntimeError(f"{work.name} failed: {answer[:300]!r}")
        started = time.process_time()
        for _ in range(arguments.requests):
            await request()
        per_request = (time.process_time() - started) / arguments.requests * 1000
        print(f"{work.name}: {per_request:.3f} ms of CPU per request, without the profiler")
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(arguments.requests):
            await request()
        profiler.disable()
    report = io.StringIO()
    stats = pstats.Stats(profiler, stream=report)
    stats.sort_stats(arguments.sort).print_stats(arguments.top)
    print(report.getvalue())


def main() -> None:
    arguments = _arguments()
    with open(os.devnull, "w") as discarded:
        configure_logging(log_format="json", local=False, stream=discarded)
        uvloop.run(_profile(arguments))


if __name__ == "__main__":
    main()
