"""The five GraphQL operations every peer answers, as a service caller would send them, each with
the fewest DynamoDB calls that can answer it (one GetItem for one key, one BatchGetItem per 100
distinct keys, one Query per distinct list)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from datasource.items import Item
from domain.payment import PaymentRef
from resolvers.node_ids import payment_node_id

PAYMENT_FIELDS = "paymentId status amountCents method attempts createdAt confirmationId loanId"
LIST_PAGE = 100
NESTED_PAGE = 20
NODE_COUNT = 50
NESTED_LOANS = 5


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    title: str
    query: str
    variables: dict[str, Any]
    minimum_calls: dict[str, int]
    # A 100-item list: where the service must come close to the engine floor.
    hundred_item_list: bool = False

    @property
    def body(self) -> bytes:
        return json.dumps({"query": self.query, "variables": self.variables}).encode()

    @property
    def minimum_requests(self) -> int:
        return sum(self.minimum_calls.values())


def _ref(item: Item) -> PaymentRef:
    return PaymentRef(
        item["loc_user_id"]["S"], item["loc_loan_id"]["S"], item["loc_payment_id"]["S"]
    )


def _loans(stored: list[Item]) -> list[tuple[str, str]]:
    """Every (user, loan) in the data, in order of appearance."""
    return list(
        dict.fromkeys((item["loc_user_id"]["S"], item["loc_loan_id"]["S"]) for item in stored)
    )


def build(stored: list[Item]) -> list[Workload]:
    """The workloads over `stored`: its first loan, its first five loans, 50 of its payments."""
    loans = _loans(stored)
    user, loan = loans[0]
    single = _ref(stored[len(stored) // 2])
    step = max(1, len(stored) // NODE_COUNT)
    node_ids = [payment_node_id(_ref(item)) for item in stored[::step][:NODE_COUNT]]
    nested = loans[:NESTED_LOANS]
    aliases = "\n".join(
        f"  l{n}: loan(userId: $u{n}, loanId: $l{n}) {{ payments(first: {NESTED_PAGE}) "
        "{ edges { node { ...P } } } }"
        for n in range(len(nested))
    )
    nested_variables = {f"u{n}": pair[0] for n, pair in enumerate(nested)} | {
        f"l{n}": pair[1] for n, pair in enumerate(nested)
    }
    nested_parameters = ", ".join(f"$u{n}: ID!, $l{n}: ID!" for n in range(len(nested)))
    return [
        Workload(
            "payment",
            "one payment by id",
            "query Payment($u: ID!, $l: ID!, $p: ID!) {\n"
            f"  payment(userId: $u, loanId: $l, paymentId: $p) {{ {PAYMENT_FIELDS} }}\n}}",
            {"u": single.user_id, "l": single.loan_id, "p": single.payment_id},
            {"GetItem": 1},
        ),
        Workload(
            "loan_page",
            f"a loan's payments, {LIST_PAGE} per page",
            "query LoanPage($u: ID!, $l: ID!) {\n"
            f"  loan(userId: $u, loanId: $l) {{ payments(first: {LIST_PAGE}) {{\n"
            f"    edges {{ node {{ {PAYMENT_FIELDS} }} }}\n"
            "    pageInfo { hasNextPage endCursor } } }\n}",
            {"u": user, "l": loan},
            {"Query": 1},
            hundred_item_list=True,
        ),
        Workload(
            "by_status",
            f"paymentsByStatus, {LIST_PAGE} per page",
            "query ByStatus {\n"
            f"  paymentsByStatus(status: PENDING, first: {LIST_PAGE}) {{\n"
            f"    edges {{ node {{ {PAYMENT_FIELDS} }} }}\n"
            "    pageInfo { hasNextPage endCursor } }\n}",
            {},
            {"Query": 1},
            hundred_item_list=True,
        ),
        Workload(
            "nodes",
            f"{NODE_COUNT} payments by node id",
            "query Nodes($ids: [ID!]!) {\n"
            f"  nodes(ids: $ids) {{ ... on Payment {{ {PAYMENT_FIELDS} }} }}\n}}",
            {"ids": node_ids},
            {"BatchGetItem": 1},
        ),
        Workload(
            "nested",
            f"{len(nested)} loans with {NESTED_PAGE} payments each",
            f"query Loans({nested_parameters}) {{\n{aliases}\n}}\n"
            f"fragment P on Payment {{ {PAYMENT_FIELDS} }}",
            nested_variables,
            {"Query": len(nested)},
        ),
    ]
