"""`python -m bench.capacity`: what each GraphQL operation costs in DynamoDB capacity, as
DynamoDB Local reports it, as a markdown table: the calls, the read and write units, and the
units per table and index of each answer's `extensions.dynamodb`.

The real app in-process on DynamoDB Local, its table seeded as `make run` seeds it: the
walkthrough's operations (docs/api.md) in order; each mutation once, on a payment brought to
the status it moves from, with an idempotency key as the service's own writers send them (a
skip also without one, and sent again); then the benchmark's workloads (`bench.data`). Within a
transaction DynamoDB Local counts items whose units are equal once, so a creation with a key
and a presentment are reported 2 units under AWS's figure.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import data
from bench.load import service_headers
from process.embedded_dynamodb import EmbeddedDynamoDB
from process.settings import Settings
from server.app import create_app

__all__ = ["list_costs", "measure", "render", "render_lists", "walkthrough"]

WALKTHROUGH = Path(__file__).resolve().parents[1] / "docs" / "api.md"
# The walkthrough's operations, as `tests/api/test_readme.py` reads them.
GRAPHQL_BLOCK = re.compile(r"```graphql\n(.*?)```", re.DOTALL)
OPERATION_NAME = re.compile(r"(?:query|mutation) (\w+)")
VARIABLE = re.compile(r"\$(\w+):")
USER = "bench-user"
ANSWER = "__typename ... on PaymentPayload { payment { paymentId } } ... on UserError { code }"
CREATE = f"mutation($i: CreatePaymentInput!) {{ createPayment(input: $i) {{ {ANSWER} }} }}"
# Each mutation on a payment of its own loan and method, after the moves that bring it to the
# status the mutation moves from: (row, mutation, its input) in order, a row of None unreported.
MUTATIONS: dict[tuple[str, str], list[tuple[str | None, str, dict[str, Any]]]] = {
    ("loan-ach", "ACH"): [
        ("submitPayment", "submitPayment", {"confirmationId": "ach-bench-1"}),
        ("completePayment", "completePayment", {}),
        ("returnPayment", "returnPayment", {"returnCode": "R10"}),  # a late return
    ],
    ("loan-retry", "ACH"): [
        (None, "submitPayment", {"confirmationId": "ach-bench-2"}),
        ("schedulePaymentRetry", "schedulePaymentRetry", {"returnCode": "R01"}),
        ("failPayment", "failPayment", {}),
    ],
    ("loan-card", "PINLESS"): [
        ("completePayment (PINless: presents, claims its id)", "completePayment",
         {"confirmationId": "card-bench-1"}),
        ("chargeBackPayment", "chargeBackPayment", {}),
    ],
    ("loan-skip", "ACH"): [
        ("skipPayment", "skipPayment", {"idempotencyKey": "bench-skip"}),
        ("skipPayment sent again with its key (replayed)", "skipPayment",
         {"idempotencyKey": "bench-skip"}),
    ],
    ("loan-unkeyed", "ACH"): [("skipPayment (no key)", "skipPayment", {"idempotencyKey": None})],
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Cost:
    operations: dict[str, int]
    read: float
    write: float
    # "table", or an index's name -> {"read": units, "write": units}.
    capacity: dict[str, dict[str, float]]


def walkthrough() -> list[str]:
    return GRAPHQL_BLOCK.findall(WALKTHROUGH.read_text())


async def measure(endpoint: str, *, table_name: str = "bench-capacity") -> dict[str, Cost]:
    """Operation -> what it cost, on a fresh table of the demonstration payments on `endpoint`
    (which must not hold `table_name` yet)."""
    settings = Settings(env="local", table_name=table_name, dynamodb_endpoint=endpoint)
    app = create_app(
        settings.model_copy(update={"live_updates": False, "metrics": "off"}), seed_demo_data=True
    )
    rows: dict[str, Cost] = {}
    headers = {**service_headers(), "X-Debug-DynamoDB": "1"}

    async def run(label: str | None, query: str, variables: dict[str, Any]) -> Any:
        response = await http.post(
            "/graphql", json={"query": query, "variables": variables}, headers=headers
        )
        body: dict[str, Any] = response.json()
        if response.status_code != 200 or body.get("errors"):
            raise RuntimeError(f"{query.split('{')[0].strip()}: {response.text[:500]}")
        report = body["extensions"]["dynamodb"]
        units = {
            "table" if name == table_name else name.removeprefix(f"{table_name}/"): units
            for name, units in report["capacity"].items()
        }
        if label is not None:
            read, write = report["readCapacityUnits"], report["writeCapacityUnits"]
            rows[label] = Cost(report["operations"], read, write, units)
        return body["data"]

    async def mutate(label: str | None, mutation: str, **input: Any) -> str:
        """The id of the payment a mutation answers; a UserError answer is a failure."""
        input_type = mutation[0].upper() + mutation[1:] + "Input"
        query = f"mutation($i: {input_type}!) {{ {mutation}(input: $i) {{ {ANSWER} }} }}"
        result = (await run(label, query, {"i": input}))[mutation]
        if result["__typename"] != "PaymentPayload":
            raise RuntimeError(f"{mutation}: {result}")
        payment_id: str = result["payment"]["paymentId"]
        return payment_id

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench.test") as http:
            known = {"userId": "user-1", "loanId": "loan-1"}
            for operation in walkthrough():
                name = OPERATION_NAME.search(operation)
                step = f"walkthrough: {name[1] if name else operation.split('{')[0].strip()}"
                variables = {key: known[key] for key in VARIABLE.findall(operation)}
                if created := (await run(step, operation, variables)).get("createPayment"):
                    known["paymentId"] = created["payment"]["paymentId"]
            for number, ((loan, method), moves) in enumerate(MUTATIONS.items()):
                payment = {"userId": USER, "loanId": loan}
                first = "createPayment" if number == 0 else None
                payment["paymentId"] = await mutate(
                    first, "createPayment", **payment, amountCents=12_500, method=method,
                    process="AUTO", accountLastFour="6789", intendedInstallmentId="inst-1",
                )  # fmt: skip
                for row, mutation, extra in moves:
                    # As internal writers do, every move is sent with a key of its own.
                    key = f"bench-{mutation}-{payment['paymentId']}-{len(rows)}"
                    input = {**payment, "reason": "bench", "idempotencyKey": key} | extra
                    await mutate(row, mutation, **input)
            stored = list(
                data.items(
                    users=range(4),
                    loans_per_user=1,
                    payments_per_loan=110,
                    layout=settings.status_layout,
                )
            )
            # Loaded as a fixture is, by a client of its own: not one of the service's calls.
            async with data.raw_client(endpoint) as client:
                await data.load(client, table_name, iter(stored))
            for workload in data.workloads(stored).values():
                await run(f"workload: {workload.title}", workload.query, workload.variables)
    return rows


# The two layouts a list's page is read in: the defaults (SPEC §20) and the seed's one shard.
LAYOUTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "one shard": {"gsi2_shards": 1, "events_shards": 1},
}
BY_STATUS = """query($after: String) {
  paymentsByStatus(status: PENDING, first: 100, after: $after) {
  pageInfo { hasNextPage endCursor } edges { node { paymentId amountCents } } } }"""
EVENTS = """query($after: String) { events(first: 100, after: $after) {
  pageInfo { hasNextPage endCursor } edges { node { eventId type } } } }"""
SETTLE_SECONDS = 0.5
DAY_SECONDS = 86_400
EMPTY_QUERY_RCU = 0.5


@dataclass(frozen=True, slots=True)
class ListCost:
    read: float
    queries: int
    rounds: int


async def list_costs(endpoint: str, *, payments: int = 110) -> dict[str, dict[str, ListCost]]:
    """Layout -> what a 100-item `paymentsByStatus` page, a 100-item `events` page and a poll
    of the feed's head (nothing new: each shard's Query finds nothing) read, over `payments`
    payments created through the API, on a fresh table per layout at `endpoint`."""
    found: dict[str, dict[str, ListCost]] = {}
    headers = {**service_headers(), "X-Debug-DynamoDB": "1"}
    for layout, shards in LAYOUTS.items():
        settings = Settings(
            env="local", table_name=f"bench-lists-{uuid.uuid4().hex[:8]}",
            dynamodb_endpoint=endpoint, live_updates=False, metrics="off", webhooks=False,
            events_settle_seconds=SETTLE_SECONDS, **shards,
        )  # fmt: skip
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://bench.test", headers=headers
            ) as http:

                async def ask(query: str, after: str | None = None) -> tuple[Any, ListCost]:
                    response = await http.post(
                        "/graphql", json={"query": query, "variables": {"after": after}}
                    )
                    body = response.json()
                    if "data" not in body or body.get("errors"):
                        raise RuntimeError(f"{query.split('(')[1]}: {response.text[:500]}")
                    report = body["extensions"]["dynamodb"]
                    cost = ListCost(
                        report["readCapacityUnits"],
                        report["operations"].get("Query", 0),
                        report.get("listRounds", 0),
                    )
                    [connection] = body["data"].values()
                    return connection, cost

                for number in range(payments):
                    await http.post("/graphql", json={"query": CREATE, "variables": {"i": {
                        "userId": f"lists-{number}", "loanId": "loan-1", "amountCents": 100,
                        "method": "ACH", "process": "AUTO", "idempotencyKey": f"c-{number}",
                    }}})  # fmt: skip
                await asyncio.sleep(2 * SETTLE_SECONDS)
                _, by_status = await ask(BY_STATUS)
                page, events = await ask(EVENTS)
                while page["pageInfo"]["hasNextPage"]:
                    page, _ = await ask(EVENTS, page["pageInfo"]["endCursor"])
                _, head = await ask(EVENTS, page["pageInfo"]["endCursor"])
        found[layout] = {"paymentsByStatus": by_status, "events": events, "head": head}
    return found


def render_lists(found: dict[str, dict[str, ListCost]]) -> str:
    """A markdown table of the lists' costs, each layout beside one shard's."""
    lines = [
        "| list (100 a page) | layout | RCU | Queries | sequential rounds |",
        "|---|---|---|---|---|",
    ]
    for name in ("paymentsByStatus", "events", "head"):
        for layout, costs in found.items():
            cost = costs[name]
            label = "a poll of the feed's head (nothing new)" if name == "head" else name
            lines.append(f"| {label} | {layout} | {cost.read:g} | {cost.queries} | {cost.rounds} |")
    lines.append("")
    for layout, costs in found.items():
        # DynamoDB Local reports an empty Query as 0 RCU; AWS bills every Query at least one
        # 4 KB read, 0.5 RCU eventually consistent.
        head = costs["head"]
        billed = max(head.read, EMPTY_QUERY_RCU * head.queries)
        lines.append(
            f"A poll of the feed's head, {layout}: {head.queries} Queries, {head.read:g} RCU as "
            f"reported, {billed:g} by AWS's minimum; {billed * DAY_SECONDS:,.0f} RCU a day at "
            f"one poll a second."
        )
    return "\n".join(lines)


def render(rows: dict[str, Cost]) -> str:
    """A markdown table of the operations' costs."""
    header = ["operation", "DynamoDB calls", "RCU", "WCU", "per table/index (R/W)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for operation, cost in rows.items():
        calls = ", ".join(f"{api} {count}" for api, count in cost.operations.items())
        detail = ", ".join(
            f"{name} {u['read']:g}/{u['write']:g}" for name, u in cost.capacity.items()
        )
        cells = [operation, calls or "none", f"{cost.read:g}", f"{cost.write:g}", detail or "none"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    with EmbeddedDynamoDB(data_dir=None) as database:
        print(render(asyncio.run(measure(database.endpoint_url))))
        print()
        print(render_lists(asyncio.run(list_costs(database.endpoint_url))))
