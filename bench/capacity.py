"""What each GraphQL operation costs in DynamoDB capacity, as DynamoDB Local reports it.

    python -m bench.capacity [--strong-reads]

DynamoDB Local (started here, in memory) and the real app in-process (`create_app`, called
through ASGI), on a table seeded with the demonstration payments as `make run` seeds it. It runs
the README walkthrough's operations in order, then each of the eight mutations once on a payment
it brings to the status the mutation moves from (with an idempotency key, as the service's own
writers send them; a skip also without one, and sent again), every request with
`X-Debug-DynamoDB: 1`, and
prints a markdown table of what `extensions.dynamodb` reports: the calls, the read and write
units (RCU, WCU), and the units per table and index.

Last, the lists at their largest page (100 payments) and one lookup, on a loan of 101 payments.
`--strong-reads` measures again, on a fresh table, with `Settings(strong_reads=True)`, and adds
its RCU and WCU as two more columns; `measure` takes any such settings override.

The figures are DynamoDB Local's, and agree with AWS's rules (an eventually consistent read of up
to 4 KB costs half a unit, a strong one a unit, a write a unit per table or index item it writes
and two per index whose key it moves, a transaction twice that) but for one thing: within a
transaction, DynamoDB Local counts items whose units are the same (table and indexes alike) once.
So a creation with an idempotency key (payment, event, key record) and a presentment (payment,
event, confirmation id's claim) are reported 2 units under AWS's figure: their event and their
record or claim each cost one unit on the table alone.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.runs import service_headers
from server.app import create_app
from server.embedded_dynamodb import EmbeddedDynamoDB
from server.settings import Settings

README = Path(__file__).resolve().parents[1] / "README.md"
# The walkthrough's operations, as `tests/api/test_readme.py` reads them.
GRAPHQL_BLOCK = re.compile(r"```graphql\n(.*?)```", re.DOTALL)
OPERATION_NAME = re.compile(r"(?:query|mutation) (\w+)")
VARIABLE = re.compile(r"\$(\w+):")
TABLE_NAME = "bench-capacity"
DEBUG_DYNAMODB = {"X-Debug-DynamoDB": "1"}
USER = "bench-user"
# A set of figures: its name, and its overrides of the app's settings.
DEFAULT: dict[str, Mapping[str, Any]] = {"default": {}}
STRONG_READS: dict[str, Mapping[str, Any]] = {"strong reads": {"strong_reads": True}}

ANSWER = """__typename
    ... on PaymentPayload { payment { paymentId status attempts allowedTransitions } }
    ... on UserError { code message }"""


@dataclass(frozen=True, slots=True)
class Cost:
    operations: dict[str, int]
    read: float
    write: float
    # "table", or an index's name -> {"read": units, "write": units}.
    capacity: dict[str, dict[str, float]] = field(default_factory=dict)


def walkthrough(readme: Path = README) -> list[str]:
    return GRAPHQL_BLOCK.findall(readme.read_text())


def _mutation(name: str) -> str:
    input_type = name[0].upper() + name[1:] + "Input"
    return f"mutation($input: {input_type}!) {{ {name}(input: $input) {{ {ANSWER} }} }}"


class _Session:
    """The app, called as a service caller with the DynamoDB report asked for."""

    def __init__(self, http: httpx.AsyncClient, table_name: str) -> None:
        self._http = http
        self._headers = {**service_headers(), **DEBUG_DYNAMODB}
        self._table = table_name

    async def run(self, query: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
        response = await self._http.post(
            "/graphql", json={"query": query, "variables": dict(variables or {})},
            headers=self._headers,
        )  # fmt: skip
        body: dict[str, Any] = response.json()
        if response.status_code != 200 or body.get("errors"):
            raise RuntimeError(f"{query.split('{')[0].strip()}: {response.text[:500]}")
        return body

    async def mutate(self, mutation: str, **input: Any) -> tuple[dict[str, Any], Cost]:
        """The payment a mutation answers, and what it cost; a UserError answer is a failure."""
        body = await self.run(_mutation(mutation), {"input": input})
        result = body["data"][mutation]
        if result["__typename"] != "PaymentPayload":
            raise RuntimeError(f"{mutation}: {result}")
        payment: dict[str, Any] = result["payment"]
        return payment, self.cost_of(body)

    def cost_of(self, body: dict[str, Any]) -> Cost:
        """What an operation cost, from its answer's `extensions.dynamodb`."""
        report = body["extensions"]["dynamodb"]
        return Cost(
            operations=report["operations"],
            read=report["readCapacityUnits"],
            write=report["writeCapacityUnits"],
            capacity={
                "table" if name == self._table else name.removeprefix(f"{self._table}/"): units
                for name, units in report["capacity"].items()
            },
        )


async def _walkthrough(session: _Session, rows: dict[str, Cost]) -> None:
    known: dict[str, Any] = {"userId": "user-1", "loanId": "loan-1"}
    for operation in walkthrough():
        name = OPERATION_NAME.search(operation)
        label = name.group(1) if name else operation.split("{")[0].strip()
        body = await session.run(
            operation, {key: known[key] for key in VARIABLE.findall(operation)}
        )
        rows[f"walkthrough: {label}"] = session.cost_of(body)
        created = body["data"].get("createPayment")
        if created is not None:
            known["paymentId"] = created["payment"]["paymentId"]


async def _mutations(session: _Session, rows: dict[str, Cost]) -> None:
    """Each of the eight mutations, on a payment brought to the status it moves from."""

    async def create(loan: str, method: str) -> tuple[dict[str, Any], Cost]:
        payment, cost = await session.mutate(
            "createPayment", userId=USER, loanId=loan, amountCents=12_500, method=method,
            process="AUTO", accountLastFour="6789", intendedInstallmentId="inst-1",
        )  # fmt: skip
        return {"userId": USER, "loanId": loan, "paymentId": payment["paymentId"]}, cost

    async def move(mutation: str, payment: dict[str, Any], **input: Any) -> Cost:
        # As internal writers do, every move is sent with an idempotency key of its own.
        key = f"bench-{mutation}-{payment['paymentId']}-{len(rows)}"
        input = {"idempotencyKey": key, **input}
        return (await session.mutate(mutation, **payment, reason="bench", **input))[1]

    ach, rows["createPayment"] = await create("loan-ach", "ACH")
    rows["submitPayment"] = await move("submitPayment", ach, confirmationId="ach-bench-1")
    rows["completePayment"] = await move("completePayment", ach)
    rows["returnPayment"] = await move("returnPayment", ach, returnCode="R10")  # a late return

    retried, _ = await create("loan-ach", "ACH")
    await move("submitPayment", retried, confirmationId="ach-bench-2")
    rows["schedulePaymentRetry"] = await move("schedulePaymentRetry", retried, returnCode="R01")
    rows["failPayment"] = await move("failPayment", retried)

    card, _ = await create("loan-card", "PINLESS")
    rows["completePayment (PINless: presents, claims its id)"] = await move(
        "completePayment", card, confirmationId="card-bench-1"
    )
    rows["chargeBackPayment"] = await move("chargeBackPayment", card)

    skipped, _ = await create("loan-ach", "ACH")
    rows["skipPayment"] = await move("skipPayment", skipped, idempotencyKey="bench-skip")
    rows["skipPayment sent again with its key (replayed)"] = await move(
        "skipPayment", skipped, idempotencyKey="bench-skip"
    )
    unkeyed, _ = await create("loan-ach", "ACH")
    rows["skipPayment (no key)"] = await move("skipPayment", unkeyed, idempotencyKey=None)


FULL_PAGE = 100
FULL_PAGES = {
    "a loan's payments, 100 a page": (
        'query($u: ID!) { loan(userId: $u, loanId: "loan-full") { payments(first: 100) '
        "{ edges { node { paymentId status amountCents } } } } }"
    ),
    "paymentsByStatus, 100 a page": (
        "{ paymentsByStatus(status: PENDING, first: 100) "
        "{ edges { node { paymentId status amountCents } } } }"
    ),
    "one payment by id": (
        'query($u: ID!, $p: ID!) { payment(userId: $u, loanId: "loan-full", paymentId: $p) '
        "{ paymentId status amountCents } }"
    ),
}


async def _full_pages(session: _Session, rows: dict[str, Cost]) -> None:
    """The lists at their largest page (and one lookup), on a loan of 101 payments."""
    ids = []
    for _ in range(FULL_PAGE + 1):
        payment, _cost = await session.mutate(
            "createPayment", userId=USER, loanId="loan-full", amountCents=12_500, method="ACH",
            process="AUTO", accountLastFour="6789", intendedInstallmentId="inst-1",
        )  # fmt: skip
        ids.append(payment["paymentId"])
    for label, query in FULL_PAGES.items():
        variables = {"u": USER, "p": ids[0]} if "$p" in query else {"u": USER}
        if "$u" not in query:
            variables = {}
        rows[label] = session.cost_of(await session.run(query, variables))


async def measure(
    endpoint: str, *, table_name: str = TABLE_NAME, overrides: Mapping[str, Any] | None = None
) -> dict[str, Cost]:
    """Operation -> what it cost, on a fresh table of the demonstration payments on `endpoint`
    (which must not hold `table_name` yet), with `overrides` on the app's settings."""
    settings = Settings(
        env="local",
        table_name=table_name,
        dynamodb_endpoint=endpoint,
        live_updates=False,
        metrics="off",
        **(overrides or {}),
    )
    app = create_app(settings, seed_demo_data=True)
    rows: dict[str, Cost] = {}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench.test") as http:
            session = _Session(http, table_name)
            await _walkthrough(session, rows)
            await _mutations(session, rows)
            await _full_pages(session, rows)
    return rows


def render(columns: Mapping[str, dict[str, Cost]]) -> str:
    """A markdown table: the first set of figures in full, each other set's RCU and WCU."""
    names = list(columns)
    header = ["operation", "DynamoDB calls", "RCU", "WCU", "per table/index (R/W)"]
    for name in names[1:]:
        header += [f"RCU ({name})", f"WCU ({name})"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for operation, cost in columns[names[0]].items():
        calls = ", ".join(f"{api} {count}" for api, count in cost.operations.items())
        detail = ", ".join(
            f"{name} {_number(units['read'])}/{_number(units['write'])}"
            for name, units in cost.capacity.items()
        )
        cells = [operation, calls or "none", _number(cost.read), _number(cost.write)]
        cells.append(detail or "none")
        for name in names[1:]:
            other = columns[name].get(operation)
            cells += ["-", "-"] if other is None else [_number(other.read), _number(other.write)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _number(units: float) -> str:
    return f"{units:g}"


async def measure_all(
    endpoint: str, variants: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Cost]]:
    """Each set of figures (name -> settings overrides), each on a fresh table of its own."""
    return {
        name: await measure(endpoint, table_name=f"{TABLE_NAME}-{number}", overrides=overrides)
        for number, (name, overrides) in enumerate(variants.items())
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.capacity", description=__doc__)
    parser.add_argument(
        "--strong-reads",
        action="store_true",
        help="measure again with every read strongly consistent (Settings.strong_reads)",
    )
    arguments = parser.parse_args(argv)
    variants: dict[str, Mapping[str, Any]] = dict(DEFAULT)
    if arguments.strong_reads:
        variants.update(STRONG_READS)
    with EmbeddedDynamoDB(data_dir=None) as database:
        columns = asyncio.run(measure_all(database.endpoint_url, variants))
    print(render(columns))


if __name__ == "__main__":
    main()
