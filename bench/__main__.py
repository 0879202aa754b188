"""`python -m bench` (`make bench`; `--quick`: seconds, the smoke test; `--no-local`: the fake
pass only, no Java needed): every pass, the tables on stdout, the JSON file, and its figures in
the pages of docs/ (`bench.figures`).

The first pass runs the service (P3) against the engine floor (P1, `bench.peers.graphql_core`)
on the fake DynamoDB, each a server process on the server core, this process the load
generator; P1 must answer the service's `data` first, and in each repetition the peers take
turns at going first. Then `bench.local_pass`, and the live-updates, tracing and
trusted-documents passes, each on a DynamoDB Local of its own, budgets in a fleet
(`bench.budget_fleet`), a customer sending only new documents (`bench.new_documents`), the
collection job at the default layout (`bench.collect_cost`), `@defer`/`@stream`'s gain and
plain operations' CPU beside the base commit's (`bench.incremental_cost`), the throttling storms
(`bench.storm`), and each index's write ceiling at the default layout (`bench.partitions`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import uvloop

from bench import (
    budget_fleet,
    collect_cost,
    data,
    documents_cost,
    figures,
    incremental_cost,
    live,
    load,
    local_database,
    new_documents,
    partitions,
    report,
    storm,
    tracing_cost,
    usage_cost,
    webhooks_cost,
)
from bench.fake_dynamodb import INJECTED_LATENCY_SECONDS
from bench.local_pass import LocalOptions, LocalPass
from harness.processes import ROOT, Process

PEERS = {
    "P1": "engine floor: graphql-core, parse and validation cached",
    "P3": "this service, as `loc-payments serve` runs it",
}
CONNECTIONS = (1, 16)
# The niceness of this process and so of everything it starts: ahead of other work on the
# machine, whose load would otherwise set the pace (allowed to root or with CAP_SYS_NICE).
PRIORITY = -10


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny runs and data (the smoke test)")
    parser.add_argument("--seconds", type=float, help="length of each timed run (default 2)")
    parser.add_argument("--repetitions", type=int, help="of every cell (default 3)")
    parser.add_argument("--no-local", action="store_true", help="skip DynamoDB Local and scale")
    parser.add_argument(
        "--no-priority", dest="priority", action="store_false", help="do not raise it (nice -10)"
    )
    output = ROOT / "bench" / "results" / "latest.json"
    parser.add_argument("--output", type=Path, default=output, help="the JSON file")
    return parser.parse_args()


def _commit() -> str:
    describe = ["git", "describe", "--always", "--exclude=*", "--dirty= with local changes"]
    found = subprocess.run(describe, cwd=ROOT, capture_output=True, text=True)
    return found.stdout.strip() or "unknown"


async def _engine_pass(
    stored: list[Any], servers: list[Process], settings: dict[str, Any], log: Any
) -> dict[str, Any]:
    """The first pass, on servers started already (P1, P3) over the items `stored`."""
    for server in servers:
        load.listening(server)
    engine, service = servers
    work, headers = list(data.workloads(stored).values()), load.service_headers()
    log(f"fake DynamoDB: {len(stored)} payments; P1 and P3 listening; checking answers")
    calls = load.check_same_data(work, service, engine, headers)
    log("P1 and P3 return the same data for every workload; warming up")
    runs, resident, turn = [], [], 0
    with load.load_generator_core():
        for repetition in range(-1 if settings["warmup"] else 0, settings["repetitions"]):
            timed = repetition >= 0
            seconds = settings["seconds"] if timed else settings["warmup"]
            for workload in work:
                for connections in CONNECTIONS if timed else CONNECTIONS[-1:]:
                    first, turn = turn % len(servers), turn + timed
                    for server in servers[first:] + servers[:first]:
                        run = await load.timed_run(
                            server, workload, headers, connections, seconds, repetition
                        )
                        runs += [run] if timed else []
            if timed:
                resident.append(service.resident_mib())
                log(f"repetition {repetition + 1} of {settings['repetitions']} done")
    described = ("name", "title", "minimum_calls", "hundred_item_list")
    return {
        "payments": len(stored),
        "peers": PEERS,
        "workloads": [
            {key: getattr(w, key) for key in described} | {"service_calls": calls[w.name]}
            for w in work
        ],
        "cells": [
            {"peer": peer, "workload": w.name, "connections": n}
            | load.summary(run for run in runs if run.cell == (peer, w.name, n))
            for w in work
            for n in CONNECTIONS
            for peer in PEERS
        ],
        "runs": [asdict(run) for run in runs],
        # Its peak, read while it still runs.
        "service_memory": {
            "rss_mib_after_repetition": resident,
            "peak_rss_mib": service.peak_resident_mib(),
        },
    }


async def _run(arguments: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    started, quick = time.monotonic(), arguments.quick

    def log(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    seconds = arguments.seconds or (0.5 if quick else 2.0)
    repetitions = arguments.repetitions or (1 if quick else 3)
    # The smoke test (--quick) proves the harness, not the numbers: no warm-up.
    warmup = 0.0 if quick else min(seconds / 2, 0.5)
    cores = len(os.sched_getaffinity(0))
    placement = f"load generator on core {load.LOAD_CORE}, servers on core {load.SERVER_CORE}"
    if not load.pinning():
        placement = f"not pinned ({cores} core(s) available)"
    results: dict[str, Any] = {
        "command": " ".join(["python -m bench", *sys.argv[1:]]),
        "commit": _commit(),
        "machine": {
            "cores": cores,
            "placement": f"{placement}, nice {arguments.niceness}",
            "python": platform.python_version(),
            "niceness": arguments.niceness,
            "load_average_before": os.getloadavg(),
        },
        "settings": {
            "seconds_per_run": seconds,
            "repetitions": repetitions,
            "fake_latency_ms": INJECTED_LATENCY_SECONDS * 1000,
        },
    }
    users, loans, payments = (2, 5, 110) if quick else (10, 4, 120)
    stored = list(data.items(users=range(users), loans_per_user=loans, payments_per_loan=payments))
    items = workdir / "fake-items.json"
    items.write_text(json.dumps(stored, separators=(",", ":")))
    modules = {"P1": "bench.peers.graphql_core", "P3": "bench.fake_dynamodb"}
    servers = [
        Process(name, [sys.executable, "-m", module, "{port}", items], keep_stdout=False)
        for name, module in modules.items()
    ]
    scale = {"base_users": 2, "scale_users": 3} if quick else {}
    # The local pass's comparison on the lists: long runs after a warm-up, in rounds (issue 59);
    # the smoke test's as short as every other run.
    local_options = LocalOptions(seconds, warmup, repetitions, **scale)
    if quick:
        local_options = dataclasses.replace(
            local_options,
            compared_seconds=seconds,
            compared_warmup_seconds=0.0,
            compared_rounds=repetitions,
            raw_http_seconds=seconds,
        )
    local = None if arguments.no_local else LocalPass(local_options)
    with contextlib.ExitStack() as stack:
        # Every process of both passes starts at once; the local pass's then idle meanwhile.
        for server in servers:
            server.start()
            stack.callback(server.stop)
        if local is not None:
            stack.callback(local.stop)
            await local.start()
        settings = {"seconds": seconds, "warmup": warmup, "repetitions": repetitions}
        results["engine"] = await _engine_pass(stored, servers, settings, log)
        for server in servers:
            server.stop()
        if local is not None:
            results["dynamodb_local"] = await local.run(log)
    if local is not None:
        with contextlib.ExitStack() as stack:
            if quick:  # one DynamoDB Local for the passes (local_database)
                stack.enter_context(local_database.shared())
            await _passes(results, quick, log)
    found = report.targets(results["engine"], results.get("dynamodb_local"))
    if "storm" in results:
        found += storm.targets(results["storm"])
    if "partitions" in results:
        found += partitions.targets(results["partitions"])
    if "webhooks" in results:
        found += webhooks_cost.targets(results["webhooks"])
    if "budgets" in results:
        found += budget_fleet.targets(results["budgets"])
    if "new_documents" in results:
        found += new_documents.targets(results["new_documents"])
    if "collect" in results:
        found += collect_cost.targets(results["collect"])
    if "incremental" in results:
        found += incremental_cost.targets(results["incremental"])
    results["targets"] = report.target_records(found)
    results["machine"]["load_average_after"] = os.getloadavg()
    results["seconds"] = time.monotonic() - started
    log("done")
    return results


async def _passes(results: dict[str, Any], quick: bool, log: Callable[[str], None]) -> None:
    """The passes after the local pass, each on DynamoDB Local (and Redis where it says)."""
    log("live updates: subscribers on two instances, writes through both")
    results["live"] = await live.measure(live.QUICK if quick else live.LiveOptions(), log=log)
    log("live updates of a fleet: three instances through a Redis broker, one stream reader")
    fleet = live.QUICK_FLEET if quick else live.FLEET
    results["live_fleet"] = await live.measure(fleet, log=log)
    tracing = tracing_cost.QUICK if quick else tracing_cost.DEFAULT
    results["tracing"] = await tracing_cost.measure(tracing, log=log)
    documents = documents_cost.QUICK if quick else documents_cost.DEFAULT
    results["documents"] = await documents_cost.measure(documents, log=log)
    usage = usage_cost.QUICK if quick else usage_cost.DEFAULT
    results["field_usage"] = await usage_cost.measure(usage, log=log)
    webhooks = webhooks_cost.QUICK if quick else webhooks_cost.DEFAULT
    results["webhooks"] = await webhooks_cost.measure(webhooks, log=log)
    budgets = budget_fleet.QUICK if quick else budget_fleet.DEFAULT
    results["budgets"] = await budget_fleet.measure(budgets, log=log)
    news = new_documents.QUICK if quick else new_documents.DEFAULT
    results["new_documents"] = await new_documents.measure(news, log=log)
    collection = collect_cost.QUICK if quick else collect_cost.DEFAULT
    results["collect"] = await collect_cost.measure(collection, log=log)
    incremental = incremental_cost.QUICK if quick else incremental_cost.DEFAULT
    results["incremental"] = await incremental_cost.measure(incremental, log=log)
    storms = storm.QUICK if quick else storm.DEFAULT
    results["storm"] = await storm.measure(storms, log=log)
    results["partitions"] = await partitions.measure(log=log)


def main() -> None:
    arguments = _arguments()
    # The servers get only the settings the harness gives them, and the bench's clients' budgets
    # (budgets stay on: their charge is part of what a request costs).
    for name in [name for name in os.environ if name.startswith("LOC_")]:
        del os.environ[name]
    os.environ["LOC_BUDGET_OVERRIDES"] = load.BUDGET_OVERRIDES
    if arguments.priority:
        with contextlib.suppress(PermissionError):
            os.setpriority(os.PRIO_PROCESS, 0, PRIORITY)
    arguments.niceness = os.getpriority(os.PRIO_PROCESS, 0)
    with tempfile.TemporaryDirectory(prefix="loc-bench-") as workdir:
        results = uvloop.run(_run(arguments, Path(workdir)))
    arguments.output.parent.mkdir(parents=True, exist_ok=True)
    arguments.output.write_text(json.dumps(report.without_nan(results), indent=1) + "\n")
    # The pages show the latest run: another file (the smoke test's) leaves them alone.
    pages: list[Path] = []
    if arguments.output.resolve() == figures.RESULTS:
        pages = figures.write_pages(figures.latest())
    print(report.render(results))
    renders = (
        ("tracing", tracing_cost.render),
        ("documents", documents_cost.render),
        ("field_usage", usage_cost.render),
        ("webhooks", webhooks_cost.render),
        ("budgets", budget_fleet.render),
        ("new_documents", new_documents.render),
        ("collect", collect_cost.render),
        ("incremental", incremental_cost.render),
        ("storm", storm.render),
        ("partitions", partitions.render_results),
    )
    for name, render in renders:
        if name in results:
            print("\n" + render(results[name]))
    print(f"\n{results['seconds']:.0f} s; JSON: {arguments.output}")
    if pages:
        written = ", ".join(str(page.relative_to(ROOT)) for page in pages)
        print(f"Its figures written into {written}")


if __name__ == "__main__":
    main()
