"""`python -m bench.budget_cost [--quick]`: what a budget costs a request without a broker (SPEC
§21, issue 58: at most 50 µs of CPU): the charge before an operation runs and its settling after
(`server.budgets.Budgets.admit`, `_Charge.settle`), timed in process over many callers; and,
beside it, the actual cost counted over a loan's page of 100 payments
(`engine.limits.actual_cost`), which every answer's `extensions.cost` needs."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from graphql import parse
from strawberry.types.graphql import OperationType

from engine import actual_cost
from process.settings import Settings
from resolvers.callers import Caller
from resolvers.context import Context
from schema import build_schema, payments_limits
from server.budgets import BudgetPolicy, Budgets

__all__ = ["measure"]

TARGET_US = 50.0
CALLERS = 1000
PAGE = """query($loan: ID!) { loan(userId: "u", loanId: $loan) { payments(first: 100) {
  edges { cursor node { id paymentId amountCents status method process createdAt updatedAt
  applications { installmentId amountCents } } } pageInfo { hasNextPage endCursor } } } }"""


def _context(user: str) -> Context:
    context = Context.__new__(Context)  # what the budget reads of one: the caller, the cost
    context.authenticated = Caller(user)
    context.cost = None
    return context


async def _charges(requests: int) -> float:
    """CPU seconds a charge and its settling take, the mean over `requests`."""
    budgets = Budgets(BudgetPolicy.from_settings(Settings()))
    contexts = [_context(f"user-{n}") for n in range(CALLERS)]
    started = time.process_time()
    for n in range(requests):
        charge = await budgets.admit(contexts[n % CALLERS], OperationType.QUERY, 300)
        assert charge is not None
        charge.settle(200)
    return (time.process_time() - started) / requests


def _page() -> dict[str, Any]:
    payment = {
        "id": "UGF5bWVudDp1L2wvcA",
        "paymentId": "p",
        "amountCents": 5000,
        "status": "PENDING",
        "method": "ACH",
        "process": "MANUAL",
        "createdAt": "2026-03-02T15:30:00Z",
        "updatedAt": "2026-03-02T15:30:00Z",
        "applications": [{"installmentId": "i", "amountCents": 5000}],
    }
    edges = [{"cursor": "c", "node": payment} for _ in range(100)]
    return {"loan": {"payments": {"edges": edges, "pageInfo": {"hasNextPage": False}}}}


def _actual(requests: int) -> float:
    schema = build_schema().served
    document, data, limits = parse(PAGE), _page(), payments_limits()
    started = time.process_time()
    for _ in range(requests):
        actual_cost(schema, document, None, limits, data)
    return (time.process_time() - started) / requests


def measure(*, quick: bool = False) -> dict[str, Any]:
    requests = 2_000 if quick else 50_000
    charge = asyncio.run(_charges(requests))
    page = _actual(20 if quick else 500)
    return {
        "requests": requests,
        "charge_us_per_request": round(charge * 1e6, 2),
        "actual_cost_us_page_of_100": round(page * 1e6, 1),
        "target_us": TARGET_US,
        "met": charge * 1e6 <= TARGET_US,
    }


if __name__ == "__main__":
    print(json.dumps(measure(quick="--quick" in sys.argv[1:]), indent=2))
