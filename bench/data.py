"""The benchmark's payments, made by the domain's own constructor and transition engine and
stored as the datasource's items, so every peer holds what the service would write; the
workloads every peer answers over them; and the client and writer that load them into DynamoDB.
Users are `user-0000` ..., loans `loan-00` ...; statuses cycle through PENDING, ACHSENT,
COMPLETED and RETRY.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import aioboto3
from aiobotocore.config import AioConfig

from datasource import Item, to_item
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.keys import SEED_LAYOUT, StatusLayout
from domain.payment import Payment, PaymentRef, new_payment
from domain.transitions import TransitionRequest, apply_transition
from process.settings import LOCAL_AWS_CREDENTIALS, Settings
from resolvers.node_ids import payment_node_id

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = ["EPOCH", "WRITERS", "Workload", "items", "load", "payment", "raw_client", "workloads"]

EPOCH = datetime(2026, 1, 5, 14, 0, tzinfo=UTC)
S = PaymentStatus
FIELDS = "paymentId status amountCents method attempts createdAt confirmationId loanId"
LIST_PAGE, NESTED_PAGE, NODE_COUNT, NESTED_LOANS = 100, 20, 50, 5
BATCH_SIZE = 25  # DynamoDB's limit of items per BatchWriteItem
WRITERS = 8


def payment(user: str, loan: str, number: int) -> Payment:
    """The `number`-th payment of the data set, in the status its number picks."""
    now = EPOCH + timedelta(milliseconds=number)
    made = new_payment(
        user_id=user, loan_id=loan, amount_cents=1_000 + number % 50_000, method=PaymentMethod.ACH,
        process=PaymentProcess.AUTO, reason="benchmark data", now=now, account_last_four="4242",
        intended_installment_id=f"inst-{number}",
    )  # fmt: skip
    status = (S.PENDING, S.ACHSENT, S.COMPLETED, S.RETRY)[number % 4]
    moves = [TransitionRequest(S.ACHSENT, "presented", f"ach-{number}")]
    moves += [TransitionRequest(S.COMPLETED, "settled")] if status is S.COMPLETED else []
    moves += (
        [TransitionRequest(S.RETRY, "returned", return_code="R01")] if status is S.RETRY else []
    )
    for move in moves if status is not S.PENDING else []:
        made = apply_transition(made, move, max_attempts=3, now=now)
    return made


def items(
    *,
    users: range,
    loans_per_user: int,
    payments_per_loan: int,
    first_number: int = 0,
    layout: StatusLayout = SEED_LAYOUT,
) -> Iterator[Item]:
    """The items of `users`, loan by loan; numbers (and so statuses) continue from
    `first_number`; GSI2 keys in `layout`."""
    number = first_number
    for user in users:
        for loan in range(loans_per_user):
            for _ in range(payments_per_loan):
                yield to_item(payment(f"user-{user:04d}", f"loan-{loan:02d}", number), layout)
                number += 1


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    title: str
    query: str
    variables: dict[str, Any]
    # The fewest DynamoDB calls that can answer it.
    minimum_calls: dict[str, int]
    hundred_item_list: bool = False

    @property
    def body(self) -> bytes:
        return json.dumps({"query": self.query, "variables": self.variables}).encode()


def _ref(item: Item) -> PaymentRef:
    return PaymentRef(*(item[f"loc_{name}_id"]["S"] for name in ("user", "loan", "payment")))


def workloads(stored: list[Item]) -> dict[str, Workload]:
    """The five operations over `stored`, by name: its middle payment, its first loan's page,
    the first PENDING page, 50 of its payments by node id, its first five loans."""
    loans = list(dict.fromkeys((i["loc_user_id"]["S"], i["loc_loan_id"]["S"]) for i in stored))
    single = _ref(stored[len(stored) // 2])
    step = max(1, len(stored) // NODE_COUNT)
    node_ids = [payment_node_id(_ref(item)) for item in stored[::step][:NODE_COUNT]]
    nested = loans[:NESTED_LOANS]
    page = f"edges {{ node {{ {FIELDS} }} }}\n    pageInfo {{ hasNextPage endCursor }}"
    loans_query = ", ".join(f"$u{n}: ID!, $l{n}: ID!" for n in range(len(nested)))
    aliases = "\n".join(
        f"  l{n}: loan(userId: $u{n}, loanId: $l{n}) {{ payments(first: {NESTED_PAGE}) "
        "{ edges { node { ...P } } } }"
        for n in range(len(nested))
    )
    pairs = {
        f"{key}{n}": value
        for n, pair in enumerate(nested)
        for key, value in zip("ul", pair, strict=True)
    }
    found = [
        Workload("payment", "one payment by id",
                 "query Payment($u: ID!, $l: ID!, $p: ID!) {\n"
                 f"  payment(userId: $u, loanId: $l, paymentId: $p) {{ {FIELDS} }}\n}}",
                 {"u": single.user_id, "l": single.loan_id, "p": single.payment_id},
                 {"GetItem": 1}),
        Workload("loan_page", f"a loan's payments, {LIST_PAGE} per page",
                 "query LoanPage($u: ID!, $l: ID!) {\n  loan(userId: $u, loanId: $l) "
                 f"{{ payments(first: {LIST_PAGE}) {{\n    {page} }} }}\n}}",
                 {"u": loans[0][0], "l": loans[0][1]}, {"Query": 1}, hundred_item_list=True),
        Workload("by_status", f"paymentsByStatus, {LIST_PAGE} per page",
                 f"query ByStatus {{\n  paymentsByStatus(status: PENDING, first: {LIST_PAGE}) "
                 f"{{\n    {page} }}\n}}",
                 {}, {"Query": 1}, hundred_item_list=True),
        Workload("nodes", f"{NODE_COUNT} payments by node id",
                 "query Nodes($ids: [ID!]!) {\n"
                 f"  nodes(ids: $ids) {{ ... on Payment {{ {FIELDS} }} }}\n}}",
                 {"ids": node_ids}, {"BatchGetItem": 1}),
        Workload("nested", f"{len(nested)} loans with {NESTED_PAGE} payments each",
                 f"query Loans({loans_query}) {{\n{aliases}\n}}\n"
                 f"fragment P on Payment {{ {FIELDS} }}",
                 pairs, {"Query": len(nested)}),
    ]  # fmt: skip
    return {workload.name: workload for workload in found}


@contextlib.asynccontextmanager
async def raw_client(endpoint: str, **config: Any) -> AsyncIterator[Any]:
    """An aioboto3 client with the SDK's defaults but the service's pool size (the default of
    10 would hold 16 connections back), local credentials and region, and `config`."""
    settings = Settings(env="local", dynamodb_endpoint=endpoint)
    pool = {"max_pool_connections": settings.dynamodb_max_pool_connections}
    async with aioboto3.Session().client(
        "dynamodb",
        region_name=settings.region,
        endpoint_url=endpoint,
        config=AioConfig(**(pool | config)),
        **LOCAL_AWS_CREDENTIALS,
    ) as client:
        yield client


async def load(
    client: DynamoDBClient, table_name: str, items: Iterator[Item], *, writers: int = WRITERS
) -> dict[str, Any]:
    """Every item of `items` written with BatchWriteItem, `writers` calls in flight; items are
    made as the writers ask for them, and `UnprocessedItems` sent again after a short wait.
    The payments written, the seconds, the rate, the calls made and the writers."""
    started, written, requests = time.perf_counter(), 0, 0

    async def writer() -> None:
        nonlocal written, requests
        while batch := list(itertools.islice(items, BATCH_SIZE)):
            pending: Any = [{"PutRequest": {"Item": item}} for item in batch]
            while pending:
                response = await client.batch_write_item(RequestItems={table_name: pending})
                requests += 1
                if pending := response.get("UnprocessedItems", {}).get(table_name, []):
                    await asyncio.sleep(0.05)
            written += len(batch)

    async with asyncio.TaskGroup() as group:
        for _ in range(writers):
            group.create_task(writer())
    seconds = time.perf_counter() - started
    rate = written / seconds if seconds else 0.0
    return {"payments": written, "seconds": seconds, "payments_per_second": rate} | {
        "batch_write_requests": requests,
        "writers": writers,
    }
