"""`python -m bench.burst_shares`: SPEC §20's Done-when as a new user would try it. A burst of
payments (each its own borrower's, half of them then submitted) through `python -m cli serve`
with the stack's settings, then one Scan of the table: for each index the write units a payment
write cost it (from `extensions.dynamodb`, DynamoDB's ConsumedCapacity), its busiest key's share
of its items, and the ceiling 1,000 / (units x share).

A burst of a thousand is too small to measure a hash's imbalance (`bench.partitions` does that
over 100,000 ids); what it can show is that no key holds more than chance gives it. The model:
each of the burst's borrowers lands on one of K keys, each equally likely, with all its items in
the index (both events of a moved payment are in its payment's shard). K is the shard count for
the sharded indexes (GSI2, GSI4), and the number of keys the burst wrote for those keyed by user.
From the borrowers' item counts, one key's count has an exact distribution (a sum of binomials);
the bound is the least share c / n such that

    K x P(one key holds c items or more) <= 1 / 1,000

so chance puts the busiest key beyond it in under one burst in a thousand (for GSI2's 1,000
payments over 64 shards: 3.5 %, where four standard deviations, 3.13 %, is passed once in a
hundred). An index whose busiest share stays within the bound is **met**; a hot key is not.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.load import service_headers
from bench.partitions import PARTITION_WRITE_UNITS
from datasource import GSI1PK, GSI2PK, GSI3PK, GSI4PK, PK, acting_as, open_client
from harness.autopay import autopay
from harness.processes import serving
from process.embedded_dynamodb import EmbeddedDynamoDB
from process.settings import Settings

__all__ = ["PAYMENTS", "IndexShare", "burst_shares", "render", "stack_settings"]

PAYMENTS = 1_000
CLIENTS = 16
STACK_TEMPLATE = Path(__file__).parent.parent / "infra" / "stack.template.json"
# The stack's variables the test service sets its own way (a local service with development
# tokens and every document on the bench's DynamoDB Local), or that change nothing a write does.
NOT_TAKEN = (
    "LOC_ENV", "LOC_TABLE_NAME", "LOC_REGION", "LOC_PORT", "LOC_LOG_FORMAT", "LOC_AUTH_",
    "LOC_TRUSTED_DOCUMENTS",
)  # fmt: skip
KEY_ATTRIBUTES = {"table": PK, "GSI1": GSI1PK, "GSI2": GSI2PK, "GSI3": GSI3PK, "GSI4": GSI4PK}
# How rarely chance may pass the bound: once in a thousand bursts.
CHANCE = 1e-3
AUTOPAY = "autopay"


@dataclass(frozen=True, slots=True)
class IndexShare:
    index: str
    busiest_key: str
    # The most write units one payment write cost the index, and the mean over the burst.
    units: float
    mean_units: float
    items: int
    bound: float  # the busiest share chance explains (module docstring)
    keys: int  # K: the shards, or the keys the burst wrote
    share: float

    @property
    def ceiling(self) -> float:
        return PARTITION_WRITE_UNITS / (self.units * self.share)

    @property
    def met(self) -> bool:
        return self.share <= self.bound


def stack_settings(template: Path = STACK_TEMPLATE) -> dict[str, str]:
    """The service's variables in the stack's task definition, at the parameters' defaults: those
    a local test service can take (`NOT_TAKEN` aside), e.g. LOC_BUDGET_EXPECTED_INSTANCES."""
    stack = json.loads(template.read_text())
    parameters = stack["Parameters"]
    [task] = (r for r in stack["Resources"].values() if r["Type"] == "AWS::ECS::TaskDefinition")
    found: dict[str, str] = {}
    for entry in task["Properties"]["ContainerDefinitions"][0]["Environment"]:
        if "Fn::If" in entry:  # set only when its parameter is given: none is by default
            entry = entry["Fn::If"][1]
            if not parameters[entry["Value"]["Ref"]].get("Default"):
                continue
        value = entry["Value"]
        if isinstance(value, dict):
            value = parameters.get(value.get("Ref", ""), {}).get("Default")
        if not entry["Name"].startswith(NOT_TAKEN) and isinstance(value, str | int):
            found[entry["Name"]] = str(value)
    return found


async def burst(
    url: str, *, run: str, payments: int, clients: int = CLIENTS
) -> list[dict[str, float]]:
    """`payments` autopay creations, every other one then submitted, by `clients` at once, each
    for a borrower `autopay-<run>-<n>` of its own: the write units each write cost each index
    (`table`, `GSI1`, ...)."""
    headers = {**service_headers(), "X-Debug-DynamoDB": "1"}
    costs: list[dict[str, float]] = []
    numbers = iter(range(payments))

    async def write(http: httpx.AsyncClient, query: str, input: dict[str, Any]) -> str | None:
        response = await http.post("/graphql", json={"query": query, "variables": {"i": input}})
        body = response.json()
        answer = next(iter((body.get("data") or {}).values()), None)
        if response.status_code != 200 or not answer or "payment" not in answer:
            raise RuntimeError(f"a write was refused ({response.status_code}): {body}")
        costs.append(
            {
                name.rpartition("/")[2] if "/" in name else "table": units["write"]
                for name, units in body["extensions"]["dynamodb"]["capacity"].items()
            }
        )
        payment_id: str = answer["payment"]["paymentId"]
        return payment_id

    async def borrower(http: httpx.AsyncClient) -> None:
        for number in numbers:
            user = f"{AUTOPAY}-{run}-{number}"
            await autopay(functools.partial(write, http), user, submit=number % 2 == 0)

    limits = httpx.Limits(max_connections=clients + 2)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30, limits=limits) as http:
        await asyncio.gather(*(borrower(http) for _ in range(clients)))
    return costs


@dataclass(frozen=True, slots=True)
class Scanned:
    """Per index: its items counted by partition key, and by borrower (the table's key)."""

    keys: dict[str, Counter[str]]
    by_user: dict[str, Counter[str]]

    def bound(self, index: str, keys: int) -> float:
        """The least share that `keys` keys, each borrower's items on one of them at random,
        give one key with probability at most CHANCE / keys."""
        clusters = Counter(self.by_user[index].values())
        p = 1 / keys
        count = [1.0]  # P(a key holds k items)
        for size, borrowers in clusters.items():
            taken = [_binomial(borrowers, j, p) for j in range(borrowers + 1)]
            merged = [0.0] * (len(count) + size * borrowers)
            for k, a in enumerate(count):
                for j, b in enumerate(taken):
                    merged[k + size * j] += a * b
            count = merged
        total, tail = len(count) - 1, 0.0
        for held in range(total, -1, -1):
            tail += count[held]
            if keys * tail > CHANCE:
                return (held + 1) / total
        return 1.0


def _binomial(n: int, k: int, p: float) -> float:
    """P(k of n, each with probability p), in logs: C(1000, 500) alone is 2.7e299."""
    ways = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
    return math.exp(ways + k * math.log(p) + (n - k) * math.log1p(-p))


async def scanned_keys(endpoint: str, table_name: str, *, users: str) -> Scanned:
    """One Scan of the table: each index's partition keys, counted over the items of the users
    whose key starts `users` (the burst's: not the service's demo data)."""
    found = Scanned(
        {index: Counter() for index in KEY_ATTRIBUTES},
        {index: Counter() for index in KEY_ATTRIBUTES},
    )
    settings = Settings(env="local", table_name=table_name, dynamodb_endpoint=endpoint)
    # The measurement's own read, not the service's: no grant of the task role is asked for it.
    with acting_as("bench-measurement"):
        return await _scan(settings, table_name, users, found)


async def _scan(settings: Settings, table_name: str, users: str, found: Scanned) -> Scanned:
    async with open_client(settings.dynamo_config()) as client:
        more: dict[str, Any] = {}
        while True:
            page = await client.scan(TableName=table_name, **more)
            for item in page["Items"]:
                if not item[PK]["S"].startswith(users):
                    continue
                for index, attribute in KEY_ATTRIBUTES.items():
                    if attribute in item:
                        found.keys[index][item[attribute]["S"]] += 1
                        found.by_user[index][item[PK]["S"]] += 1
            if "LastEvaluatedKey" not in page:
                return found
            more = {"ExclusiveStartKey": page["LastEvaluatedKey"]}


async def burst_shares(
    endpoint: str, *, payments: int = PAYMENTS, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """The burst through a real service on a fresh table at `endpoint`, and each index's
    figures, as JSON."""
    run = uuid.uuid4().hex[:8]
    table_name = f"bench-burst-{run}"
    settings = stack_settings()
    log(f"burst: {payments} payments through python -m cli serve with {settings}")
    names = {name.removeprefix("LOC_").lower(): value for name, value in settings.items()}
    async with serving(endpoint, table_name, 1, **names) as [service]:
        started = time.monotonic()
        costs = await burst(service.url, run=run, payments=payments)
        seconds = time.monotonic() - started
    counted = await scanned_keys(endpoint, table_name, users=f"USER#{AUTOPAY}-{run}-")
    taken = {name: value for name, value in names.items() if name in Settings.model_fields}
    defaults = Settings.model_validate({"env": "local", **taken})
    shards = {"GSI2": defaults.gsi2_shards, "GSI4": defaults.events_shards}
    indexes = []
    for index, keys in counted.keys.items():
        key, most = keys.most_common(1)[0]
        share = IndexShare(
            index=index,
            busiest_key=key,
            units=max(cost.get(index, 0.0) for cost in costs),
            mean_units=sum(cost.get(index, 0.0) for cost in costs) / len(costs),
            items=sum(keys.values()),
            bound=counted.bound(index, shards.get(index, len(keys))),
            keys=shards.get(index, len(keys)),
            share=most / sum(keys.values()),
        )
        indexes.append(_row(share))
    return {
        "payments": payments,
        "writes": len(costs),
        "seconds": round(seconds, 2),
        "settings": settings,
        "indexes": indexes,
    }


def _row(share: IndexShare) -> dict[str, Any]:
    return {
        "index": share.index, "busiest_key": share.busiest_key, "units": share.units,
        "mean_units": round(share.mean_units, 3), "items": share.items,
        "keys": share.keys,
        "share": share.share, "bound": share.bound, "ceiling": share.ceiling, "met": share.met,
    }  # fmt: skip


def render(results: dict[str, Any]) -> str:
    header = [
        "index", "busiest key", "units a payment write costs it (most; mean)", "items",
        "K", "busiest share", "bound", "ceiling 1,000 / (units x share)", "",
    ]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in results["indexes"]:
        cells = [
            row["index"], f"`{row['busiest_key']}`", f"{row['units']:g}; {row['mean_units']:.2f}",
            f"{row['items']:,}", f"{row['keys']:,}",
            f"{row['share']:.2%}", f"{row['bound']:.2%}",
            f"{row['ceiling']:,.0f}", "**met**" if row["met"] else "**NOT met**",
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    with EmbeddedDynamoDB(data_dir=None) as database:
        results = asyncio.run(burst_shares(database.endpoint_url, log=print))
    print(
        f"{results['payments']:,} payments, {results['writes']:,} payment writes in "
        f"{results['seconds']} s; the stack's settings: {results['settings']}"
    )
    print(render(results))
