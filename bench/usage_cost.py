"""`python -m bench.usage_cost [--quick]`: what counting field usage costs (SPEC §19,
`loc_payments_field_usage_total{client, field}`): the CPU per request of a loan's page of 100
with the count on and off (`LOC_FIELD_USAGE`), in-process (`bench.profile`) on DynamoDB Local.

The target (at most 2% more CPU per request with the count on) is judged on the count's own time
(`count_cost`: the code that runs only with it on, timed directly) against the page's CPU per
request; the interleaved rounds of one app with the count switched on and off, beside an A/A
side, are reported too, and show that this machine does not resolve 2% that way.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

from bench.load import service_headers
from bench.profile import Request, Rounds, interleaved, local_dynamodb, paired, quietly, running
from engine import Observed
from harness.asgi import asgi_caller, asgi_headers
from resolvers.callers import Caller
from resolvers.context import Context
from schema import build_schema
from server.app import create_app
from server.request_records import Metrics

__all__ = ["DEFAULT", "QUICK", "measure", "render"]

WORKLOAD = "loan_page"
IN_FLIGHT = 16
DEFAULT = Rounds(requests=100, rounds=30, warmup=100)
QUICK = Rounds(requests=16, rounds=1, warmup=5)
# The bound of issue 43: the count's CPU over none's.
TARGET = 1.02


async def measure(
    options: Rounds, *, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """The CPU per request of each side (the median of the rounds) and on's over off's (the
    median of each round's)."""
    async with local_dynamodb() as (settings, work):
        app = create_app(settings)
        metrics: Metrics = app.state.metrics
        headers = asgi_headers({**service_headers(), "apollographql-client-name": "bench"})
        call = asgi_caller(app, work[WORKLOAD].body, headers)

        def switched(counted: bool) -> Request:
            async def request() -> bytes:
                metrics.field_usage = counted
                return await call()

            return request

        # A second "off" side: the spread of two identical sides is what this machine resolves.
        callers = {"off": switched(False), "on": switched(True), "off_again": switched(False)}
        async with running(app):
            answers = {side: await request() for side, request in callers.items()}
            if answers["on"] != answers["off"] or b'"errors"' in answers["on"]:
                raise RuntimeError(f"the two sides answer differently: {answers}")
            found = await interleaved(callers, options, IN_FLIGHT)
    log("field usage: loan_page measured")
    cell = paired({"off": found["off"], "on": found["on"]}, "off", "on")
    same = paired({"off": found["off"], "off_again": found["off_again"]}, "off", "off_again")
    per_operation = count_cost(work[WORKLOAD].query)
    return {
        "workload": WORKLOAD,
        "in_flight": IN_FLIGHT,
        "requests_per_cell": options.requests,
        "rounds": options.rounds,
        **cell,
        "ratio_off_off": same["ratio"],
        "count_us_per_operation": per_operation * 1e6,
        "count_share": per_operation * 1000 / cell["off_cpu_ms"],
        "target": TARGET,
        # Judged on the count's own cost: the interleaved on/off ratio cannot resolve 2% here
        # (its A/A twin, `ratio_off_off`, moves by as much).
        "met": 1 + per_operation * 1000 / cell["off_cpu_ms"] <= TARGET,
    }


def count_cost(query: str, operations: int = 50_000) -> float:
    """The CPU seconds the count adds to one operation, measured on exactly the code that runs
    only with it on: the lookup of the coordinates the operation selected (kept with its plan;
    the text arrives as a new string with each request, so it is hashed again) and the count's
    increment in `Metrics.observe`, less `Metrics.observe` with the count off."""
    schema = build_schema()
    schema.is_valid(query)  # prepared and cached, as by the first request
    context = Context(
        store=cast(Any, None),  # `observe` reads no store
        max_attempts=3,
        clock=lambda: datetime.now(UTC),
        # Only an authenticated caller's operations are counted.
        authenticated=Caller("bench", is_service=True),
    )
    context.client = "bench"

    def observed(counted: bool) -> Observed[Any]:
        text = (query + " ")[:-1]  # a new string, as a request's body gives
        if counted:
            return Observed(
                "LoanPage", context, [], 0.005, selected=lambda: schema.selected_fields(text)
            )
        return Observed("LoanPage", context, [], 0.005)

    spent: dict[bool, list[float]] = {}
    for counted in (False, True, False, True, False, True):
        metrics = Metrics(field_usage=counted)
        started = time.process_time()
        for _ in range(operations):
            metrics.observe(observed(counted))
        spent.setdefault(counted, []).append((time.process_time() - started) / operations)
    return max(0.0, min(spent[True]) - min(spent[False]))


def render(results: dict[str, Any]) -> str:
    met = "met" if results["met"] else "NOT met"
    return (
        f"Field usage on {results['workload']}: the count's own CPU "
        f"{results['count_us_per_operation']:.2f} us per operation, "
        f"{results['count_share']:.3%} of a page's {results['off_cpu_ms']:.3f} ms "
        f"(target <= {results['target'] - 1:.0%}: {met}); for reference, in-process with "
        f"{results['in_flight']} in flight, on/off {results['ratio']:.3f} beside off/off "
        f"{results['ratio_off_off']:.3f} (what this machine resolves)"
    )


if __name__ == "__main__":
    options = QUICK if "--quick" in sys.argv else DEFAULT
    print(render(quietly(measure(options, log=lambda line: print(line, file=sys.stderr)))))
