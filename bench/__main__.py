"""`python -m bench` (`make bench`): both passes, the table on stdout, the JSON file.

python -m bench                  the full run (11 to 17 minutes on 2 cores, with the tracing and
                                 trusted-documents passes)
python -m bench --quick          seconds, not minutes: proves the harness works
python -m bench --no-local       the fake pass only (no Java needed, no live-updates, no tracing)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from bench import documents_cost, live, report, tracing_cost
from bench.engine_pass import EngineOptions, EnginePass
from bench.fake_dynamodb import INJECTED_LATENCY_SECONDS
from bench.local_pass import LocalOptions, LocalPass
from bench.processes import (
    LOAD_CORE,
    ROOT,
    SERVER_CORE,
    cores_available,
    pinning,
    raise_priority,
)

DEFAULT_OUTPUT = ROOT / "bench" / "results" / "latest.json"


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny runs and data (the smoke test)")
    parser.add_argument("--seconds", type=float, help="length of each timed run (default 2)")
    parser.add_argument("--repetitions", type=int, help="of every cell (default 3)")
    parser.add_argument("--no-local", action="store_true", help="skip DynamoDB Local and scale")
    parser.add_argument(
        "--scale-users", type=int, help="users of 100 payments at scale (default 1000)"
    )
    parser.add_argument(
        "--no-priority",
        dest="priority",
        action="store_false",
        help="do not raise the priority (nice -10) of the benchmark's processes",
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="the JSON file")
    return parser.parse_args()


def _commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return f"{head}{' with local changes' if dirty else ''}" if head else "unknown"


def _placement(niceness: int) -> str:
    if pinning():
        where = f"load generator on core {LOAD_CORE}, servers on core {SERVER_CORE}"
    else:
        where = f"not pinned ({len(cores_available())} core(s) available)"
    return f"{where}, nice {niceness}"


async def _run(arguments: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    started = time.monotonic()

    def log(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    quick = arguments.quick
    seconds = arguments.seconds or (0.5 if quick else 2.0)
    repetitions = arguments.repetitions or (1 if quick else 3)
    # The smoke test (--quick) proves the harness, not the numbers: no warm-up.
    warmup = 0.0 if quick else min(seconds / 2, 0.5)
    results: dict[str, Any] = {
        "command": " ".join(["python -m bench", *sys.argv[1:]]),
        "commit": _commit(),
        "machine": {
            "cores": len(cores_available()),
            "placement": _placement(arguments.niceness),
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
    engine_options = EngineOptions(workdir, seconds, warmup, repetitions)
    local_options = LocalOptions(seconds, warmup, repetitions)
    if quick:
        engine_options = EngineOptions(
            workdir, seconds, warmup, repetitions, users=2, loans_per_user=5, payments_per_loan=110
        )
        local_options = LocalOptions(seconds, warmup, repetitions, base_users=2, scale_users=3)
    if arguments.scale_users:
        local_options = dataclasses.replace(local_options, scale_users=arguments.scale_users)
    engine = EnginePass(engine_options)
    local = None if arguments.no_local else LocalPass(local_options)
    try:
        # Every process of both passes starts at once; the local pass's then idle meanwhile.
        engine.start()
        if local is not None:
            await local.start()
        results["engine"] = await engine.run(log)
        engine.stop()
        if local is not None:
            results["dynamodb_local"] = await local.run(log)
    finally:
        engine.stop()
        if local is not None:
            local.stop()
    if not arguments.no_local:
        # Last, on its own DynamoDB Local and servers: live updates (`python -m bench.live`).
        live_options = (
            live.LiveOptions(subscribers=4, writes=20, users=2) if quick else live.LiveOptions()
        )
        log("live updates: subscribers on two instances, writes through both")
        results["live"] = await live.measure(live_options, log=log)
        # Then what traces cost (`python -m bench.tracing_cost`), on a DynamoDB Local of its own.
        tracing = tracing_cost.QUICK if quick else tracing_cost.TracingOptions()
        results["tracing"] = await tracing_cost.measure(tracing, log=log)
        # And trusted documents by id against text (`python -m bench.documents_cost`).
        documents = documents_cost.QUICK if quick else documents_cost.DocumentsOptions()
        results["documents"] = await documents_cost.measure(documents, log=log)
    results["targets"] = report.target_records(
        report.targets(results["engine"], results.get("dynamodb_local"))
    )
    results["machine"]["load_average_after"] = os.getloadavg()
    results["seconds"] = time.monotonic() - started
    log("done")
    return results


def main() -> None:
    arguments = _arguments()
    # The servers get only the settings the harness gives them.
    for name in [name for name in os.environ if name.startswith("LOC_")]:
        del os.environ[name]
    arguments.niceness = (
        raise_priority() if arguments.priority else os.getpriority(os.PRIO_PROCESS, 0)
    )
    with tempfile.TemporaryDirectory(prefix="loc-bench-") as workdir:
        results = uvloop.run(_run(arguments, Path(workdir)))
    arguments.output.parent.mkdir(parents=True, exist_ok=True)
    arguments.output.write_text(json.dumps(report.without_nan(results), indent=1) + "\n")
    print(report.render(results))
    if "tracing" in results:
        print("\n" + tracing_cost.render(results["tracing"]))
    if "documents" in results:
        print("\n" + documents_cost.render(results["documents"]))
    print(f"\n{results['seconds']:.0f} s; JSON: {arguments.output}")


if __name__ == "__main__":
    main()
