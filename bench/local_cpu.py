"""`python -m bench.local_cpu WORKLOAD`: the service's CPU per request on DynamoDB Local, against
raw aioboto3's for the same call, in one process.

The real app (`create_app`, with the JSON request log on) is called in-process through ASGI on an
embedded DynamoDB Local (in memory), and raw aioboto3 makes the call the workload needs (a
`GetItem` for one payment, a `Query` for a page, eventually consistent as the service reads) on
the bench's raw client (the SDK's defaults, the service's pool size); each at 1 and at 16
requests in flight, in interleaved rounds, so that the machine's noise falls on both. CPU time
is this process's alone (DynamoDB Local is another): what the service and a script calling the
SDK spend. It also prints the DynamoDB calls the service made per request (below 1 at 16 in
flight: lookups coalesced).

    python -m bench.local_cpu payment
    python -m bench.local_cpu loan_page --requests 480
    python -m bench.local_cpu payment --no-coalescing     # each request its own call

With `--service-only` it runs the service alone, 16 in flight, for a profiler to sample (the
README's `py-spy record` command).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import uvloop

from bench import dataset, generator, workloads
from bench.profile import JSON, Request, _warm, asgi_caller, cpu_ms
from bench.raw_dynamodb import call_parameters, raw_client
from bench.runs import service_headers
from bench.serve import service_settings
from datasource.table import create_table_if_missing
from server.app import create_app
from server.embedded_dynamodb import EmbeddedDynamoDB
from server.logs import configure_logging
from server.runtime import tune_garbage_collector

COMPARED = ("payment", "loan_page", "by_status")
IN_FLIGHT = (1, 16)
ROUNDS = 3
RAW_WARMUP = 50


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.local_cpu", description=__doc__)
    parser.add_argument("workload", choices=COMPARED)
    parser.add_argument("--requests", type=int, default=1600, help="per side and concurrency")
    parser.add_argument(
        "--no-coalescing",
        dest="coalesce",
        action="store_false",
        help="the service with LOC_DYNAMODB_COALESCE_LOOKUPS=false",
    )
    parser.add_argument(
        "--service-only", action="store_true", help="the service alone, 16 in flight (to profile)"
    )
    return parser.parse_args()


async def _measure(arguments: argparse.Namespace, endpoint: str) -> None:
    settings = service_settings(0, endpoint, live_updates=False).model_copy(
        update={"dynamodb_coalesce_lookups": arguments.coalesce}
    )
    stored = list(dataset.items(users=range(2), loans_per_user=1, payments_per_loan=110))
    work = {w.name: w for w in workloads.build(stored)}[arguments.workload]
    app = create_app(settings, dynamodb_endpoint=endpoint)
    headers = JSON + [(k.lower().encode(), v.encode()) for k, v in service_headers().items()]
    service: Request = asgi_caller(app, work.body, headers)
    async with app.router.lifespan_context(app):
        store = app.state.store
        await create_table_if_missing(store.client, settings.table_name, stream=False)
        await generator.load(store.client, settings.table_name, iter(stored))
        calls = [0]

        def count_call(**_: Any) -> None:
            calls[0] += 1

        store.client.meta.events.register("before-call.dynamodb", count_call)
        tune_garbage_collector()
        await _warm("the service", service)
        if arguments.service_only:
            alone = await cpu_ms(service, arguments.requests, max(IN_FLIGHT))
            print(f"{work.name}: the service alone, {alone:.3f} ms of CPU per request")
            return
        async with raw_client(endpoint) as client:
            parameters = call_parameters(work.name, work.variables, settings.table_name)
            method = client.get_item if work.name == "payment" else client.query

            async def raw() -> Any:
                return await method(**parameters)

            for _ in range(RAW_WARMUP):
                await raw()
            spent = {(side, n): 0.0 for side in ("service", "raw") for n in IN_FLIGHT}
            service_calls = dict.fromkeys(IN_FLIGHT, 0)
            for _ in range(ROUNDS):
                for in_flight in IN_FLIGHT:
                    before = calls[0]
                    spent["service", in_flight] += await cpu_ms(
                        service, arguments.requests, in_flight
                    )
                    service_calls[in_flight] += calls[0] - before
                    spent["raw", in_flight] += await cpu_ms(raw, arguments.requests, in_flight)
    coalescing = "on" if arguments.coalesce else "off"
    print(f"{work.name}: CPU ms per request in this process (coalescing {coalescing})")
    print("in flight  service  raw aioboto3  raw / service  service DynamoDB calls/request")
    for in_flight in IN_FLIGHT:
        mine, theirs = spent["service", in_flight] / ROUNDS, spent["raw", in_flight] / ROUNDS
        per_request = service_calls[in_flight] / (
            ROUNDS * max(1, arguments.requests // in_flight) * in_flight
        )
        print(
            f"{in_flight:9d}  {mine:7.3f}  {theirs:12.3f}  {theirs / mine:13.2f}  {per_request:.2f}"
        )


def main() -> None:
    arguments = _arguments()
    database = EmbeddedDynamoDB(data_dir=None)
    endpoint = database.start()
    try:
        with open(os.devnull, "w") as discarded:
            configure_logging(log_format="json", local=False, stream=discarded)
            uvloop.run(_measure(arguments, endpoint))
    finally:
        database.stop()


if __name__ == "__main__":
    main()
