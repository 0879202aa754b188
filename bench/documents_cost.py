"""`python -m bench.documents_cost [--quick]`: the CPU per request of a trusted document run by
its id against the same query sent as text, in-process (`bench.profile`) on DynamoDB Local.

One app with a manifest of the two workloads' documents: one payment by id and a loan's page of
100, each by `documentId` and by `query`, 16 in flight, in interleaved rounds, once both
answered the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.profile import Rounds, caller, interleaved, local_dynamodb, paired, quietly, running
from server.app import create_app

__all__ = ["DEFAULT", "QUICK", "WORKLOADS", "measure", "render"]

WORKLOADS = ("payment", "loan_page")
IN_FLIGHT = 16
DEFAULT = Rounds(requests=160, rounds=8, warmup=100)
QUICK = Rounds(requests=16, rounds=1, warmup=5)


async def measure(
    options: Rounds, *, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """The CPU per request of each side and workload (the median of the rounds) and id's over
    text's (the median of each round's)."""
    cells = []
    with tempfile.TemporaryDirectory(prefix="loc-documents-") as folder:
        async with local_dynamodb() as (settings, work):
            manifest = Path(folder) / "persisted-documents.json"
            manifest.write_text(json.dumps({name: work[name].query for name in WORKLOADS}))
            app = create_app(settings.model_copy(update={"trusted_documents": (manifest,)}))
            async with running(app):
                for name in WORKLOADS:
                    digest = hashlib.sha256(work[name].query.encode()).hexdigest()
                    by_id = {"documentId": f"sha256:{digest}", "variables": work[name].variables}
                    bodies = {"text": work[name].body, "id": json.dumps(by_id).encode()}
                    callers = {side: caller(app, body) for side, body in bodies.items()}
                    answers = {side: await call() for side, call in callers.items()}
                    # The same data; `extensions.cost` tells each call's budget left.
                    same = {side: _without_cost(answer) for side, answer in answers.items()}
                    if same["id"] != same["text"] or b'"errors"' in answers["id"]:
                        raise RuntimeError(
                            f"{name}: by id and by text answer differently: {answers}"
                        )
                    found = await interleaved(callers, options, IN_FLIGHT)
                    cells.append(
                        {"workload": name, "in_flight": IN_FLIGHT} | paired(found, "text", "id")
                    )
                    log(f"trusted documents: {name} measured")
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


def _without_cost(answer: bytes) -> Any:
    body = json.loads(answer)
    body.get("extensions", {}).pop("cost", None)
    return body


if __name__ == "__main__":
    options = QUICK if "--quick" in sys.argv else DEFAULT
    print(render(quietly(measure(options, log=lambda line: print(line, file=sys.stderr)))))
