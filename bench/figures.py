"""The benchmark's figures in the pages, written into the Markdown from `bench/results/latest.json`:
`make bench` does it after each run, `python -m bench.figures` again from the file as it is.

`render` puts what a run says between each pair of markers of a page,
`<!-- bench:NAME -->…<!-- /bench:NAME -->`, NAME one of `RENDERERS`: a block on lines of its own
when the first marker opens its line, a sentence otherwise; a pass the run did not make is said
so. The docs build refuses a page whose figures are not what the file renders
(`docs/hooks/bench_figures.py`).

Why markers: docs/developing.md.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import (
    budget_fleet,
    collect_cost,
    incremental_cost,
    new_documents,
    report,
    storm,
    usage_cost,
    webhooks_cost,
)
from bench.errors import MarkerError

__all__ = ["MARKER", "RESULTS", "latest", "main", "render", "write_pages"]

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "latest.json"
DOCS = ROOT / "docs"
PAIR = re.compile(r"<!-- bench:(?P<name>[a-z_]+) -->.*?<!-- /bench:(?P=name) -->", re.DOTALL)
MARKER = re.compile(r"<!-- /?bench:[a-z_]+ -->")
TRACING_HEADER = [
    "workload",
    "in flight",
    "none, CPU ms / request",
    "otlp",
    "otlp / none",
    "spans / request",
]
DOCUMENTS_HEADER = ["workload", "in flight", "by text, CPU ms / request", "by id", "id / text"]
# `report.without_nan` writes an unmeasurable figure as null; these are null by design.
NULL_BY_DESIGN = {"bound", "met"}

Results = dict[str, Any]


def latest() -> Results:
    results: Results = json.loads(RESULTS.read_text())
    return results


def render(markdown: str, results: Results) -> str:
    """`markdown` with what `results` says between each pair of markers."""
    if (unpaired := MARKER.search(PAIR.sub("", markdown))) is not None:
        raise MarkerError(f"{unpaired[0]} has no pair: <!-- bench:NAME -->…<!-- /bench:NAME -->")

    def replace(found: re.Match[str]) -> str:
        name = found["name"]
        renderer = RENDERERS.get(name)
        if renderer is None:
            known = ", ".join(RENDERERS)
            raise MarkerError(f"unknown marker <!-- bench:{name} -->; known: {known}")
        figures = renderer(results)
        indent = markdown[markdown.rfind("\n", 0, found.start()) + 1 : found.start()]
        if indent.strip() == "":
            # A line that opens with a comment is an HTML block, which Markdown leaves
            # unformatted: the figures go on lines of their own.
            between = f"\n\n{textwrap.indent(figures, indent)}\n\n{indent}"
        elif "\n" in figures:
            raise MarkerError(f"<!-- bench:{name} --> renders a block: put it on a line of its own")
        else:
            between = figures
        return f"<!-- bench:{name} -->{between}<!-- /bench:{name} -->"

    return PAIR.sub(replace, markdown)


def write_pages(results: Results, docs: Path = DOCS) -> list[Path]:
    """Renders `results` into every page of `docs` that holds markers; the pages it changed."""
    changed = []
    for page in sorted(docs.glob("*.md")):
        markdown = page.read_text()
        rendered = render(markdown, results)
        if rendered != markdown:
            page.write_text(rendered)
            changed.append(page)
    return changed


def _absent(results: Results, what: str) -> str:
    return (
        f"*`bench/results/latest.json` holds no {what}: the run it records (commit "
        f"`{results['commit']}`, `{results['command']}`) did not make them; `make bench` does.*"
    )


def _met(met: bool | None) -> str:
    return "met" if met else "NOT met"


def _run(results: Results) -> str:
    machine = results["machine"]
    targets = [target for target in results["targets"] if not target["reference"]]
    missed = [target["name"] for target in targets if not target["met"]]
    verdict = f"{len(targets) - len(missed)} of its {len(targets)} targets met" + (
        "." if not missed else f", {len(missed)} NOT met: " + "; ".join(missed) + "."
    )
    return (
        f"`{results['command']}` at commit `{results['commit']}`, "
        f"{results['seconds'] / 60:.0f} minutes on {machine['cores']} cores "
        f"({machine['placement']}), Python {machine['python']}; the load average was "
        f"{machine['load_average_before'][0]:.1f} before and "
        f"{machine['load_average_after'][0]:.1f} after. {verdict}"
    )


def _table(results: Results) -> str:
    return f"```text\n{report.render(_with_nan(results))}\n```"


def _with_nan(value: Any, key: str | None = None) -> Any:
    """The run as `make bench` rendered it: nulls back to NaN, which the table prints."""
    if value is None and key not in NULL_BY_DESIGN:
        return math.nan
    if isinstance(value, dict):
        return {name: _with_nan(item, name) for name, item in value.items()}
    if isinstance(value, list):
        return [_with_nan(item, key) for item in value]
    return value


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def _live(results: Results) -> str:
    live = results.get("live")
    if live is None:
        return _absent(results, "live-updates figures")
    settings, latency = live["settings"], live["latency_ms"]
    return (
        f"{settings['subscribers']} subscribers on {settings['instances']} instances "
        f"({settings['users']} users, so every event reaches "
        f"{settings['subscribers_per_user']:g} subscribers, half of them on the instance that "
        f"did not write), {live['writes']:,} writes through both instances: delivery from the "
        f"mutation's answer to the subscriber's message p50 {latency['p50']:,.0f} ms, p99 "
        f"{latency['p99']:,.0f} ms, max {latency['max']:,.0f} ms (the "
        f"{settings['stream_poll_interval_s']:g} s poll interval is most of it), "
        f"{live['delivered']:,} of {live['expected']:,} messages delivered, "
        f"{live['missing']:,} missing, {live['duplicates']:,} repeated (commit "
        f"`{results['commit']}`)."
    )


def _live_fleet(results: Results) -> str:
    fleet, live = results.get("live_fleet"), results.get("live")
    if fleet is None or live is None:
        return _absent(results, "the fleet's live-updates figures")
    settings, latency = fleet["settings"], fleet["latency_ms"]
    return (
        f"{settings['subscribers']} subscribers on {settings['instances']} instances through the "
        f"Redis broker, one of them reading the stream: delivery p50 {latency['p50']:,.0f} ms, "
        f"p99 {latency['p99']:,.0f} ms, max {latency['max']:,.0f} ms, beside p50 "
        f"{live['latency_ms']['p50']:,.0f} ms and p99 {live['latency_ms']['p99']:,.0f} ms with "
        f"{live['settings']['instances']} instances each reading the stream; "
        f"{fleet['delivered']:,} of {fleet['expected']:,} messages delivered, "
        f"{fleet['missing']:,} missing, {fleet['duplicates']:,} repeated (commit "
        f"`{results['commit']}`)."
    )


def _tracing(results: Results) -> str:
    tracing = results.get("tracing")
    if tracing is None:
        return _absent(results, "tracing figures")
    rows = [
        [
            cell["workload"],
            str(cell["in_flight"]),
            f"{cell['none_cpu_ms']:.3f}",
            f"{cell['otlp_cpu_ms']:.3f}",
            f"{cell['ratio']:.2f}",
            f"{tracing['spans_per_request'][cell['workload']]:.0f}",
        ]
        for cell in tracing["cells"]
    ]
    return (
        f"{_markdown_table(TRACING_HEADER, rows)}\n\n"
        f"Spans ended {tracing['spans_ended']:,}, received {tracing['spans_received']:,}; "
        f"the page's target (otlp / none ≤ {tracing['page_target']:.2f}) "
        f"{_met(tracing['page_target_met'])} (commit `{results['commit']}`)."
    )


def _documents(results: Results) -> str:
    documents = results.get("documents")
    if documents is None:
        return _absent(results, "trusted-documents figures")
    rows = [
        [
            cell["workload"],
            str(cell["in_flight"]),
            f"{cell['text_cpu_ms']:.3f}",
            f"{cell['id_cpu_ms']:.3f}",
            f"{cell['ratio']:.2f}",
        ]
        for cell in documents["cells"]
    ]
    return _markdown_table(DOCUMENTS_HEADER, rows)


def _field_usage(results: Results) -> str:
    usage = results.get("field_usage")
    if usage is None:
        return _absent(results, "field-usage figures")
    return usage_cost.render(usage) + f" (commit `{results['commit']}`)."


def _cpu_breakdown(results: Results) -> str:
    breakdown = (results.get("dynamodb_local") or {}).get("cpu_breakdown")
    if breakdown is None:
        return _absent(results, "breakdown of the service's CPU")
    cpu_ms = breakdown["server_cpu_ms_per_request"]
    rows = [
        [part, f"{share:.0%}", f"{share * cpu_ms:.2f}"]
        for part, share in sorted(breakdown["shares"].items(), key=lambda item: -item[1])
    ]
    table = _markdown_table(["part", "share of the CPU", "CPU ms / request"], rows)
    return (
        f"`{breakdown['workload']}` on DynamoDB Local, {cpu_ms:.2f} ms of the service's CPU a "
        f"request (commit `{results['commit']}`):\n\n{table}"
    )


def _webhooks(results: Results) -> str:
    webhooks = results.get("webhooks")
    if webhooks is None:
        return _absent(results, "webhook figures")
    return webhooks_cost.render(webhooks) + f" (commit `{results['commit']}`)."


def _budgets(results: Results) -> str:
    budgets = results.get("budgets")
    if budgets is None:
        return _absent(results, "figures of budgets in a fleet")
    return budget_fleet.render(budgets) + f" (commit `{results['commit']}`)."


def _collect(results: Results) -> str:
    collect = results.get("collect")
    if collect is None:
        return _absent(results, "figures of the collection job")
    return collect_cost.render(collect) + f"\n\n(commit `{results['commit']}`)"


def _new_documents(results: Results) -> str:
    found = results.get("new_documents")
    if found is None:
        return _absent(results, "figures of a customer sending only new documents")
    return new_documents.render(found) + f" (commit `{results['commit']}`)."


def _incremental(results: Results) -> str:
    found = results.get("incremental")
    if found is None:
        return _absent(results, "figures of @defer and @stream")
    return incremental_cost.render(found) + f"\n\n(commit `{results['commit']}`)"


def _storm(results: Results) -> str:
    storms = results.get("storm")
    if storms is None:
        return _absent(results, "throttling storm figures")
    return storm.render(storms) + f"\n\n(commit `{results['commit']}`)"


RENDERERS: dict[str, Callable[[Results], str]] = {
    "run": _run,
    "table": _table,
    "live": _live,
    "live_fleet": _live_fleet,
    "tracing": _tracing,
    "documents": _documents,
    "field_usage": _field_usage,
    "webhooks": _webhooks,
    "budgets": _budgets,
    "new_documents": _new_documents,
    "collect": _collect,
    "incremental": _incremental,
    "storm": _storm,
    "cpu_breakdown": _cpu_breakdown,
}


def main() -> None:
    changed = write_pages(latest())
    names = ", ".join(str(page.relative_to(ROOT)) for page in changed)
    print(f"figures of {RESULTS.relative_to(ROOT)} written into {names or 'no page: all current'}")


if __name__ == "__main__":
    main()
