"""`python -m bench.usage_cost [--quick]`: what counting field usage costs (SPEC §19,
`loc_payments_field_usage_total{client, field}`): the CPU per request of a loan's page of 100
with the count on and off (`LOC_FIELD_USAGE`), in-process (`bench.profile`) on DynamoDB Local.

One app, the count switched on or off for each round, the same request naming its client
(`apollographql-client-name`), 16 in flight, in interleaved rounds, once both sides answered the
same bytes. (Two apps differed by more than the count between runs: the app is held constant.)
The target: at most 2% more CPU per request with the count on.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

from bench.load import service_headers
from bench.profile import Request, Rounds, interleaved, local_dynamodb, paired, quietly, running
from harness.asgi import asgi_caller, asgi_headers
from resolvers.callers import Unauthenticated
from resolvers.context import Context
from schema.operations import Observed
from server.app import create_app
from server.observability import Metrics

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
    per_operation = observe_cost()
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
        "met": cell["ratio"] <= TARGET,
    }


def observe_cost(operations: int = 50_000) -> float:
    """The CPU seconds the count adds to one operation's observation: `Metrics.observe` of a
    loan page's operation (its eleven coordinates) with the count on, less with it off."""
    fields = frozenset(
        {
            "Query.loan",
            "Query.loan(userId:)",
            "Query.loan(loanId:)",
            "Loan.payments",
            "Loan.payments(first:)",
            "PaymentConnection.edges",
            "PaymentEdge.node",
            "Payment.paymentId",
            "Payment.status",
            "Payment.amountCents",
            "Payment.createdAt",
        }
    )
    # No store: `observe` reads none of it.
    context = Context(
        store=cast(Any, None),
        max_attempts=3,
        clock=lambda: datetime.now(UTC),
        authenticated=Unauthenticated("a bench observation"),
    )
    context.client = "bench"
    observed = Observed("LoanPage", context, [], 0.005, selected=lambda: fields)
    spent: dict[bool, list[float]] = {}
    for counted in (False, True, False, True):
        metrics = Metrics(field_usage=counted)
        started = time.process_time()
        for _ in range(operations):
            metrics.observe(observed)
        spent.setdefault(counted, []).append((time.process_time() - started) / operations)
    return max(0.0, min(spent[True]) - min(spent[False]))


def render(results: dict[str, Any]) -> str:
    met = "met" if results["met"] else "NOT met"
    return (
        f"Field usage: CPU ms per request in-process on DynamoDB Local, {results['workload']}, "
        f"{results['in_flight']} in flight: off {results['off_cpu_ms']:.3f}, "
        f"on {results['on_cpu_ms']:.3f}, on/off {results['ratio']:.3f} "
        f"(target <= {results['target']:.2f}: {met}); off/off {results['ratio_off_off']:.3f} "
        f"(the machine's noise); the count itself {results['count_us_per_operation']:.3f} us "
        f"per operation, {results['count_share']:.4%} of a page's CPU"
    )


if __name__ == "__main__":
    options = QUICK if "--quick" in sys.argv else DEFAULT
    print(render(quietly(measure(options, log=lambda line: print(line, file=sys.stderr)))))
