"""`python -m bench.documents_cost`: the CPU per request of a trusted document run by its id
against the same query sent as text, in-process on DynamoDB Local.

One app (`create_app`, the JSON request log on) with a manifest of the two workloads' documents
(`LOC_TRUSTED_DOCUMENTS`), called through ASGI as `bench.tracing_cost` calls it: one payment by
id and a loan's page of 100, each by `documentId` and by `query`, 16 requests in flight, in
interleaved rounds. Both must answer the same bytes before anything is timed.

    python -m bench.documents_cost           # the report `make bench` prints
    python -m bench.documents_cost --quick   # seconds: proves the harness
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop

from bench import dataset, generator, workloads
from bench.profile import JSON, asgi_caller, cpu_ms
from bench.runs import service_headers
from bench.serve import service_settings
from datasource.table import create_table_if_missing
from server.app import create_app
from server.embedded_dynamodb import EmbeddedDynamoDB
from server.logs import configure_logging
from server.runtime import tune_garbage_collector

WORKLOADS = ("payment", "loan_page")
SIDES = ("text", "id")
IN_FLIGHT = 16


@dataclass(frozen=True)
class DocumentsOptions:
    requests: int = 160  # per side, workload and round
    rounds: int = 8
    warmup: int = 100


QUICK = DocumentsOptions(requests=16, rounds=1, warmup=5)


def _bodies(work: workloads.Workload) -> dict[str, bytes]:
    digest = hashlib.sha256(work.query.encode()).hexdigest()
    by_id = {"documentId": f"sha256:{digest}", "variables": work.variables}
    return {"text": work.body, "id": json.dumps(by_id).encode()}


async def measure(
    options: DocumentsOptions, *, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """The CPU per request of each side and workload (the median of the rounds) and id's over
    text's (the median of each round's pair)."""
    database = EmbeddedDynamoDB(data_dir=None)
    endpoint = database.start()
    try:
        with tempfile.TemporaryDirectory(prefix="loc-documents-") as folder:
            return await _measure(options, endpoint, Path(folder), log)
    finally:
        database.stop()


async def _measure(
    options: DocumentsOptions, endpoint: str, folder: Path, log: Callable[[str], None]
) -> dict[str, Any]:
    stored = list(dataset.items(users=range(2), loans_per_user=1, payments_per_loan=110))
    work = {w.name: w for w in workloads.build(stored) if w.name in WORKLOADS}
    manifest = folder / "persisted-documents.json"
    manifest.write_text(json.dumps({w.name: w.query for w in work.values()}))
    settings = service_settings(0, endpoint, live_updates=False).model_copy(
        update={"trusted_documents": (manifest,)}
    )
    app = create_app(settings)
    headers = JSON + [(k.lower().encode(), v.encode()) for k, v in service_headers().items()]
    spent: dict[tuple[str, str], list[float]] = {(s, w): [] for s in SIDES for w in WORKLOADS}
    async with app.router.lifespan_context(app):
        store = app.state.store
        await create_table_if_missing(store.client, settings.table_name, stream=False)
        await generator.load(store.client, settings.table_name, iter(stored))
        tune_garbage_collector()  # as `loc-payments serve` runs
        for name in WORKLOADS:
            callers = {
                side: asgi_caller(app, body, headers) for side, body in _bodies(work[name]).items()
            }
            answers = {side: await callers[side]() for side in SIDES}
            if answers["id"] != answers["text"] or b'"errors"' in answers["id"]:
                raise RuntimeError(f"{name}: by id and by text answer differently: {answers}")
            for side in SIDES:
                for _ in range(options.warmup):
                    await callers[side]()
            for round_ in range(options.rounds):
                for side in SIDES if round_ % 2 == 0 else SIDES[::-1]:
                    spent[side, name].append(
                        await cpu_ms(callers[side], options.requests, IN_FLIGHT)
                    )
            log(f"trusted documents: {name} measured")
    cells = []
    for name in WORKLOADS:
        text, by_id = spent["text", name], spent["id", name]
        cells.append(
            {
                "workload": name,
                "in_flight": IN_FLIGHT,
                "text_cpu_ms": statistics.median(text),
                "id_cpu_ms": statistics.median(by_id),
                "ratio": statistics.median(i / t for i, t in zip(by_id, text, strict=True)),
            }
        )
    return {"requests_per_cell": options.requests, "rounds": options.rounds, "cells": cells}


def render(results: dict[str, Any]) -> str:
    lines = [
        "Trusted documents: CPU ms per request in-process on DynamoDB Local, the same query "
        f"by documentId and by text, {IN_FLIGHT} in flight",
        "workload   by text  by id   id/text   (medians of the rounds)",
    ]
    for cell in results["cells"]:
        lines.append(
            f"{cell['workload']:<10} {cell['text_cpu_ms']:7.3f}  {cell['id_cpu_ms']:6.3f}  "
            f"{cell['ratio']:7.3f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.documents_cost", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few requests: the harness only")
    parser.add_argument("--requests", type=int, help="per cell and round (default 160)")
    parser.add_argument("--rounds", type=int, help="(default 8)")
    arguments = parser.parse_args()
    options = QUICK if arguments.quick else DocumentsOptions()
    options = dataclasses.replace(
        options,
        requests=arguments.requests or options.requests,
        rounds=arguments.rounds or options.rounds,
    )
    with open(os.devnull, "w") as discarded:
        configure_logging(log_format="json", local=False, stream=discarded)
        results = uvloop.run(measure(options, log=lambda line: print(line, file=sys.stderr)))
    print(render(results))


if __name__ == "__main__":
    main()
