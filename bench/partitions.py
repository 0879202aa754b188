"""`python -m bench.partitions`: each index's write ceiling at the service's default layout
(SPEC §20), as a markdown table.

DynamoDB serves at most 1,000 write units a second per partition, an index's included, and a
throttled index write throttles the payment write behind it. So an index allows at most

    ceiling = 1,000 / (units a payment write costs the index * the busiest key's share)

payment writes a second. The units are measured: a burst of autopay creations, half of them then
submitted, through the real app in-process on DynamoDB Local, each answer's
`extensions.dynamodb` read per index, and the most any one write cost the index kept (a move
costs GSI1 and GSI2 a delete and a put, more than a creation). The shares:

    GSI2, GSI4   keyed by shard (`PAYMENT#<k>`, `EVENTS#<k>`, k a hash of the payment id): the
                 busiest shard's share of `IDS` payment ids made as the service makes them, at
                 the shard counts of the default settings
    table, GSI1, GSI3
                 keyed by user: the busiest user's share of an autopay morning of `IDS`
                 payments, one per loan due, each borrower holding 1 to `MOST_LOANS` loans
"""

from __future__ import annotations

import asyncio
import functools
import random
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from bench import local_database
from bench.load import service_headers
from bench.report import Target
from domain.enums import PaymentMethod, PaymentProcess
from domain.keys import feed_partition, status_partition
from domain.payment import new_payment
from harness.autopay import autopay
from process.embedded_dynamodb import EmbeddedDynamoDB
from process.settings import Settings
from server.app import create_app

__all__ = [
    "IDS", "PARTITION_WRITE_UNITS", "TARGET", "Ceiling", "ceilings",
    "measure", "render", "render_results", "shard_share", "targets", "write_units",
]  # fmt: skip

PARTITION_WRITE_UNITS = 1_000
# Payment writes a second every index must allow at the defaults (SPEC §20).
TARGET = 10_000
# Enough ids that the busiest shard's share is the hash's, not sampling noise: at 64 shards a
# shard's expected 1,562 ids vary by about 40 (2.5 %); at 1,000 ids it would be 25 %.
IDS = 100_000
# The most loans one borrower has in the autopay model (each loan due once in the morning).
MOST_LOANS = 4
BURST = 40
INDEXES = ("table", "GSI1", "GSI2", "GSI3", "GSI4")


@dataclass(frozen=True, slots=True)
class Ceiling:
    index: str
    key: str
    # The most write units one payment write cost the index, and the mean over the burst.
    units: float
    mean_units: float
    share: float

    @property
    def payment_writes_per_second(self) -> float:
        return PARTITION_WRITE_UNITS / (self.units * self.share)

    @property
    def met(self) -> bool:
        return self.payment_writes_per_second >= TARGET


def payment_ids(count: int) -> list[str]:
    """`count` payment ids, made by the domain's one maker of payments."""
    now = datetime.now(UTC)
    return [
        new_payment(
            user_id="u", loan_id="l", amount_cents=100, method=PaymentMethod.ACH,
            process=PaymentProcess.AUTO, reason="autopay", now=now,
        ).payment_id
        for _ in range(count)
    ]  # fmt: skip


def shard_share(ids: list[str], partition: Callable[[str, int], str], shards: int) -> float:
    """The busiest partition's share of `ids` when `partition` spreads them over `shards`."""
    counts = Counter(partition(payment_id, shards) for payment_id in ids)
    return max(counts.values()) / len(ids)


def user_share(payments: int, *, seed: int = 0) -> float:
    """The busiest borrower's share of an autopay morning of `payments` payments."""
    draw, busiest, made = random.Random(seed), 0, 0
    while made < payments:
        loans = min(draw.randint(1, MOST_LOANS), payments - made)
        busiest, made = max(busiest, loans), made + loans
    return busiest / payments


async def write_units(endpoint: str, *, table_name: str, burst: int = BURST) -> dict[str, Any]:
    """Index -> (most, mean) write units of one payment write, over `burst` autopay creations
    and the submission of half of them, on a fresh table `table_name` at `endpoint`."""
    settings = Settings(env="local", table_name=table_name, dynamodb_endpoint=endpoint)
    app = create_app(settings.model_copy(update={"live_updates": False, "metrics": "off"}))
    headers = {**service_headers(), "X-Debug-DynamoDB": "1"}
    costs: list[dict[str, float]] = []

    async def write(http: httpx.AsyncClient, query: str, input: dict[str, Any]) -> str | None:
        response = await http.post("/graphql", json={"query": query, "variables": {"i": input}})
        body = response.json()
        [answer] = body["data"].values()
        if "payment" not in answer:
            raise RuntimeError(f"{query.split('(')[2]}: {answer}")
        costs.append(
            {
                "table" if name == table_name else name.removeprefix(f"{table_name}/"): units[
                    "write"
                ]
                for name, units in body["extensions"]["dynamodb"]["capacity"].items()
            }
        )
        payment_id: str = answer["payment"]["paymentId"]
        return payment_id

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench.test", headers=headers
        ) as http:
            for number in range(burst):
                user = f"autopay-{number}-{uuid.uuid4().hex[:8]}"
                await autopay(functools.partial(write, http), user, submit=number % 2 == 0)
    return {
        index: (
            max(cost.get(index, 0.0) for cost in costs),
            sum(cost.get(index, 0.0) for cost in costs) / len(costs),
        )
        for index in INDEXES
    }


async def ceilings(endpoint: str, *, table_name: str, settings: Settings) -> list[Ceiling]:
    """Each index's ceiling in the layout of `settings`, units measured at `endpoint`."""
    units = await write_units(endpoint, table_name=table_name)
    ids = payment_ids(IDS)
    gsi2, gsi4 = settings.gsi2_shards, settings.events_shards
    by_user = user_share(IDS)
    keys = {
        "table": ("USER#<user>", by_user),
        "GSI1": ("USER#<user>", by_user),
        "GSI2": (_sharded("PAYMENT", gsi2), shard_share(ids, status_partition, gsi2)),
        "GSI3": ("USER#<user>", by_user),
        "GSI4": (_sharded("EVENTS", gsi4), shard_share(ids, feed_partition, gsi4)),
    }
    return [
        Ceiling(index, key, units[index][0], units[index][1], share)
        for index, (key, share) in keys.items()
    ]


async def measure(*, log: Callable[[str], None]) -> dict[str, Any]:
    """`make bench`'s pass: each index's ceiling at the default settings, on a DynamoDB Local of
    its own (the run's shared one in the smoke test), as JSON."""
    log("write ceilings: each index's busiest key at the default layout")
    with local_database.dynamodb() as endpoint:
        found = await ceilings(
            endpoint, table_name=local_database.table("bench-partitions"), settings=Settings()
        )
    return {
        "ids": IDS,
        "indexes": [
            {"index": c.index, "key": c.key, "units": c.units, "mean_units": c.mean_units,
             "share": c.share, "payment_writes_per_second": c.payment_writes_per_second}
            for c in found
        ],
    }  # fmt: skip


def targets(results: dict[str, Any]) -> list[Target]:
    """Every index's ceiling at least `TARGET` payment writes a second (SPEC §20)."""
    ceilings = {row["index"]: row["payment_writes_per_second"] for row in results["indexes"]}
    return [Target("payment writes/s each index allows (defaults)", ceilings, TARGET, "min")]


def render_results(results: dict[str, Any]) -> str:
    found = [
        Ceiling(row["index"], row["key"], row["units"], row["mean_units"], row["share"])
        for row in results["indexes"]
    ]
    return render(found)


def _sharded(partition: str, shards: int) -> str:
    return partition if shards == 1 else f"{partition}#<k>, {shards} shards"


def render(found: list[Ceiling]) -> str:
    header = [
        "index", "partition key", "units a payment write costs it (most; mean)",
        "busiest key's share", "payment writes/s it allows", f"≥ {TARGET:,}",
    ]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for ceiling in found:
        cells = [
            ceiling.index,
            ceiling.key,
            f"{ceiling.units:g}; {ceiling.mean_units:.2f}",
            f"{ceiling.share:.4%}",
            f"{ceiling.payment_writes_per_second:,.0f}",
            "met" if ceiling.met else "NOT met",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    with EmbeddedDynamoDB(data_dir=None) as database:
        found = asyncio.run(
            ceilings(database.endpoint_url, table_name="bench-partitions", settings=Settings())
        )
    print(f"{IDS:,} payment ids; the busiest borrower of an autopay morning of as many payments")
    print(render(found))
