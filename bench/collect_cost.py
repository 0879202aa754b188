"""`python -m bench.collect_cost [--quick]`: what the collection job costs at the default layout
(issue 67): 10,000 RETRY payments (`--quick`: 1,000) written as items into their GSI2 shards of
64 on an embedded DynamoDB Local, one in four with no presentment left, collected in-process as
`loc-payments collect` runs (`jobs.collect.collect_retries`, pages of 100), every DynamoDB call
counted. Its target: Queries at most pages + shards (a Query fills a page or ends a group). For
reference, the same list read as the job read it before groups: `payments_by_status`, the merge
of every shard, a page of 100 at a time.
"""

from __future__ import annotations

import dataclasses
import io
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from bench import data, local_database
from bench.profile import quietly
from bench.report import Target
from datasource import CallCount, Item, PaymentStore, count_calls, create_table_if_missing, to_item
from domain.enums import PaymentStatus
from domain.keys import DEFAULT_GSI2_SHARDS, StatusLayout
from jobs.checkpoint import Checkpoint, CollectionCounts
from jobs.collect import CollectionRun, collect_retries

__all__ = ["DEFAULT", "QUICK", "Options", "measure", "render", "targets"]

TABLE = "bench-collect"
PAGE_SIZE = 100
MAX_ATTEMPTS = 3


@dataclasses.dataclass(frozen=True)
class Options:
    payments: int = 10_000


DEFAULT = Options()
QUICK = Options(payments=1_000)


def retry_items(count: int, layout: StatusLayout) -> Iterator[Item]:
    """`count` RETRY payments (the bench's data set's, of 100 users), every fourth with its
    presentments spent."""
    for n in range(count):
        made = data.payment(f"user-{n % 100:04d}", f"loan-{n % 7:02d}", 4 * n + 3)
        assert made.status is PaymentStatus.RETRY
        yield to_item(
            dataclasses.replace(made, attempts=MAX_ATTEMPTS) if n % 4 == 0 else made, layout
        )


async def measure(
    options: Options, *, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    layout = StatusLayout(DEFAULT_GSI2_SHARDS)
    table = local_database.table(TABLE)
    with local_database.dynamodb() as endpoint:
        async with data.raw_client(endpoint) as client:
            await create_table_if_missing(client, table, stream=False)
            await data.load(client, table, retry_items(options.payments, layout))
            store = PaymentStore(
                client, table_name=table, cursor_secret=b"bench-collect", layout=layout
            )
            log(f"collection: {options.payments} RETRY payments in {layout.shards} shards")
            with count_calls() as merged:
                merged_pages = await _merged_pages(store)
            pages = 0

            def count_page(listed: int, counts: CollectionCounts) -> None:
                nonlocal pages
                pages += 1

            run = CollectionRun(
                max_attempts=MAX_ATTEMPTS,
                # A day after the data set's presentments: only the spent ones fail.
                clock=lambda: data.EPOCH + timedelta(days=1),
                page_size=PAGE_SIZE,
            )
            started = time.perf_counter()
            with count_calls() as calls:
                final = await collect_retries(
                    store,
                    run,
                    report=io.BytesIO(),
                    start=Checkpoint(table_name=table, report=None, dry_run=False),
                    on_page=count_page,
                )
            seconds = time.perf_counter() - started
            log(f"collection: {calls.operations.get('Query', 0)} Queries for {pages} pages")
    return {
        "payments": options.payments,
        "shards": layout.shards,
        "groups": final.groups.modulus,
        "page_size": PAGE_SIZE,
        "counts": dataclasses.asdict(final.counts),
        "pages": pages,
        "queries": calls.operations.get("Query", 0),
        "calls": dict(sorted(calls.operations.items())),
        "units": _units(calls),
        "seconds": seconds,
        "payments_per_second": options.payments / seconds,
        "merged": {"pages": merged_pages, "queries": _queries(merged), "units": _units(merged)},
    }


async def _merged_pages(store: PaymentStore) -> int:
    """The pages of the RETRY list read merged, as the job read it before groups."""
    pages, after = 1, None
    page = await store.payments_by_status(status=PaymentStatus.RETRY, first=PAGE_SIZE)
    while page.has_next_page:
        after, pages = page.end_cursor, pages + 1
        page = await store.payments_by_status(
            status=PaymentStatus.RETRY, first=PAGE_SIZE, after=after
        )
    return pages


def _queries(count: CallCount) -> int:
    return count.operations.get("Query", 0)


def _units(count: CallCount) -> dict[str, dict[str, float]]:
    """The capacity units each API consumed, as DynamoDB Local reports them."""
    return {
        api: {"read": units.read, "write": units.write}
        for api, units in sorted(count.units_by_api.items())
    }


def _query_units(results: dict[str, Any]) -> float:
    return float(results["units"].get("Query", {}).get("read", 0.0))


def _bound(results: dict[str, Any]) -> int:
    return int(results["pages"] + results["shards"])


def targets(results: dict[str, Any]) -> list[Target]:
    """Queries over pages + shards, at most 1."""
    ratio = results["queries"] / _bound(results)
    return [
        Target(
            f"collect: Queries / (pages + shards), {results['payments']:,} RETRY payments "
            f"at {results['shards']} shards",
            {"collect": ratio},
            1.0,
            "max",
        )
    ]


def render(results: dict[str, Any]) -> str:
    counts, merged = results["counts"], results["merged"]
    met = "met" if results["queries"] <= _bound(results) else "NOT met"
    others = ", ".join(
        f"{name} {count:,}" for name, count in results["calls"].items() if name != "Query"
    )
    return "\n".join(
        [
            f"The collection job at the default {results['shards']} shards: "
            f"{results['payments']:,} RETRY payments ({counts['failed']:,} failed, "
            f"{counts['eligible']:,} reported), pages of {results['page_size']}, in-process on "
            "DynamoDB Local:",
            f"- Queries {results['queries']:,} for {results['pages']:,} pages in "
            f"{results['groups']} groups ({_query_units(results):,.1f} RCU); target at most "
            f"pages + shards ({_bound(results):,}): {met}",
            f"- other calls: {others}; {results['seconds']:.1f} s, "
            f"{results['payments_per_second']:,.0f} payments/s",
            f"- for reference, the same list read merged (payments_by_status, as the job read it "
            f"before groups): {merged['queries']:,} Queries for {merged['pages']:,} pages "
            f"({_query_units(merged):,.1f} RCU)",
        ]
    )


if __name__ == "__main__":
    options = QUICK if "--quick" in sys.argv else DEFAULT
    print(render(quietly(measure(options, log=lambda line: print(line, file=sys.stderr)))))
