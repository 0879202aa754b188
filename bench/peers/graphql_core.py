"""P1, the engine floor: graphql-core executing `schema.graphql` with plain resolvers over the
same `PaymentStore`, parse and validation cached per query text, no extensions, no checks of the
caller. Payment fields are sync functions of the domain payment; only the root fields and
`Loan.payments`, which read DynamoDB, are async.

    python -m bench.peers.graphql_core PORT ITEMS

serves it on the fake DynamoDB holding the items of file ITEMS (uvicorn with uvloop and
httptools, no access log).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Callable
from inspect import isawaitable
from pathlib import Path
from typing import Any

import uvicorn
from graphql import (
    DocumentNode,
    ExecutionResult,
    GraphQLEnumType,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLResolveInfo,
    GraphQLSchema,
    build_schema,
    execute,
    get_named_type,
    parse,
    validate,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from datasource import Page, PaymentStore
from domain.enums import PaymentStatus
from domain.payment import LoanRef, Payment, PaymentRef
from domain.validation import format_timestamp
from resolvers.node_ids import decode_node_id, loan_node_id, payment_node_id

SDL = Path(__file__).resolve().parents[2] / "schema.graphql"

Resolver = Callable[..., Any]
# The context of every resolver is the store.
Info = GraphQLResolveInfo[PaymentStore]


def _payment_field(name: str, type_: GraphQLOutputType) -> Resolver | None:
    """A plain function of the domain payment for a scalar or enum field it holds."""
    attribute = re.sub(r"([A-Z])", r"_\1", name).lower()
    named = get_named_type(type_)
    if attribute not in {field.name for field in dataclasses.fields(Payment)}:
        return None
    if isinstance(named, GraphQLEnumType):
        return lambda p, _: getattr(p, attribute).name
    if named.name == "DateTime":
        return lambda p, _: (
            None if (value := getattr(p, attribute)) is None else format_timestamp(value)
        )
    return None if isinstance(named, GraphQLObjectType) else lambda p, _: getattr(p, attribute)


LOAN_FIELDS: dict[str, Resolver] = {
    "id": lambda loan, _: loan_node_id(loan),
    "loanId": lambda loan, _: loan.loan_id,
    "userId": lambda loan, _: loan.user_id,
}

CONNECTION_FIELDS: dict[str, Resolver] = {
    "edges": lambda page, _: page.edges,
    "pageInfo": lambda page, _: page,
}

EDGE_FIELDS: dict[str, Resolver] = {
    "cursor": lambda edge, _: edge.cursor,
    "node": lambda edge, _: edge.node,
}

PAGE_INFO_FIELDS: dict[str, Resolver] = {
    "hasNextPage": lambda page, _: page.has_next_page,
    "hasPreviousPage": lambda page, _: page.has_previous_page,
    "startCursor": lambda page, _: page.edges[0].cursor if page.edges else None,
    "endCursor": lambda page, _: page.end_cursor,
}


async def _payment(_: None, info: Info, loanId: str, paymentId: str, userId: str) -> Payment | None:
    return await info.context.get(PaymentRef(userId, loanId, paymentId))


def _loan(_: None, info: Info, loanId: str, userId: str) -> LoanRef:
    return LoanRef(userId, loanId)


async def _loan_payments(loan: LoanRef, info: Info, status: str | None = None, **page: Any) -> Page:
    """`page`: first, after, last, before."""
    status_ = None if status is None else PaymentStatus(status)
    return await info.context.loan_payments(loan, status=status_, **page)


async def _payments_by_status(_: None, info: Info, status: str, **page: Any) -> Page:
    return await info.context.payments_by_status(status=PaymentStatus(status), **page)


async def _nodes(_: None, info: Info, ids: list[str]) -> list[Payment | LoanRef | None]:
    refs = [decode_node_id(node_id) for node_id in ids]
    payments = [ref for ref in refs if isinstance(ref, PaymentRef)]
    found = dict(zip(payments, await info.context.batch_get(payments), strict=True))
    return [ref if isinstance(ref, LoanRef) else found[ref] for ref in refs]


def _node_type(value: Any, *_: Any) -> str:
    return "Loan" if isinstance(value, LoanRef) else "Payment"


def _attach(schema: GraphQLSchema, type_name: str, resolvers: dict[str, Resolver]) -> None:
    object_type = schema.get_type(type_name)
    assert isinstance(object_type, GraphQLObjectType)
    for field_name, resolver in resolvers.items():
        object_type.fields[field_name].resolve = resolver


def build() -> GraphQLSchema:
    schema = build_schema(SDL.read_text())
    payment = schema.get_type("Payment")
    assert isinstance(payment, GraphQLObjectType)
    fields = {name: _payment_field(name, field.type) for name, field in payment.fields.items()}
    _attach(
        schema,
        "Payment",
        {name: found for name, found in fields.items() if found}
        | {
            "id": lambda p, _: payment_node_id(PaymentRef(p.user_id, p.loan_id, p.payment_id)),
            "loan": lambda p, _: LoanRef(p.user_id, p.loan_id),
        },
    )
    _attach(schema, "Loan", LOAN_FIELDS | {"payments": _loan_payments})
    _attach(schema, "PaymentConnection", CONNECTION_FIELDS)
    _attach(schema, "PaymentEdge", EDGE_FIELDS)
    _attach(schema, "PageInfo", PAGE_INFO_FIELDS)
    _attach(
        schema,
        "Query",
        {
            "payment": _payment,
            "loan": _loan,
            "paymentsByStatus": _payments_by_status,
            "nodes": _nodes,
        },
    )
    node = schema.get_type("Node")
    node.resolve_type = _node_type  # type: ignore[union-attr]
    return schema


class _Documents:
    """Parsed and validated documents by query text; an invalid one answers its errors."""

    def __init__(self, schema: GraphQLSchema) -> None:
        self._schema = schema
        self._cache: dict[str, DocumentNode | ExecutionResult] = {}

    def get(self, query: str) -> DocumentNode | ExecutionResult:
        found = self._cache.get(query)
        if found is None:
            document = parse(query)
            errors = validate(self._schema, document)
            found = ExecutionResult(None, errors) if errors else document
            self._cache[query] = found
        return found


def create_app(store: PaymentStore) -> Starlette:
    schema = build()
    documents = _Documents(schema)

    async def graphql(request: Request) -> JSONResponse:
        payload = json.loads(await request.body())
        document = documents.get(payload["query"])
        if isinstance(document, ExecutionResult):
            return JSONResponse(document.formatted, status_code=400)
        result = execute(
            schema,
            document,
            variable_values=payload.get("variables"),
            operation_name=payload.get("operationName"),
            context_value=store,
        )
        if isawaitable(result):
            result = await result
        assert isinstance(result, ExecutionResult)
        return JSONResponse(result.formatted)

    return Starlette(routes=[Route("/graphql", graphql, methods=["POST"])])


if __name__ == "__main__":
    from bench.fake_dynamodb import fake_store

    uvicorn.run(
        create_app(fake_store(Path(sys.argv[2]))),
        host="127.0.0.1",
        port=int(sys.argv[1]),
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
    )
