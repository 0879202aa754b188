"""P1, the engine floor: graphql-core executing `schema.graphql` with plain resolvers over the
same `PaymentStore`, parse and validation cached, no extensions, no checks of the caller; only
the fields that read DynamoDB are async. `python -m bench.peers.graphql_core PORT ITEMS` serves
it on the fake DynamoDB holding the items of file ITEMS (uvicorn, no access log).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import sys
from collections.abc import Callable
from inspect import isawaitable
from pathlib import Path
from typing import Any

import graphql
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from datasource import Page, PaymentStore
from domain.enums import PaymentStatus
from domain.payment import LoanRef, Payment, PaymentRef
from domain.validation import format_timestamp
from resolvers.node_ids import decode_node_id, loan_node_id, payment_node_id

__all__ = ["create_app"]

SDL = Path(__file__).resolve().parents[2] / "schema.graphql"
INCREMENTAL = frozenset({"defer", "stream"})
# The context of every resolver is the store.
Info = graphql.GraphQLResolveInfo[PaymentStore]


def _payment_field(name: str, type_: graphql.GraphQLOutputType) -> Callable[..., Any] | None:
    """A plain function of the domain payment for a scalar or enum field it holds."""
    attribute = re.sub(r"([A-Z])", r"_\1", name).lower()
    named = graphql.get_named_type(type_)
    if attribute not in {field.name for field in dataclasses.fields(Payment)}:
        return None
    if isinstance(named, graphql.GraphQLEnumType):
        return lambda p, _: getattr(p, attribute).name
    if named.name == "DateTime":
        return lambda p, _: None if (at := getattr(p, attribute)) is None else format_timestamp(at)
    return (
        None if isinstance(named, graphql.GraphQLObjectType) else lambda p, _: getattr(p, attribute)
    )


async def _payment(_: None, info: Info, loanId: str, paymentId: str, userId: str) -> Payment | None:
    return await info.context.get(PaymentRef(userId, loanId, paymentId))


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


RESOLVERS: dict[str, dict[str, Callable[..., Any]]] = {
    "Payment": {
        "id": lambda p, _: payment_node_id(PaymentRef(p.user_id, p.loan_id, p.payment_id)),
        "loan": lambda p, _: LoanRef(p.user_id, p.loan_id),
    },
    "Loan": {
        "id": lambda loan, _: loan_node_id(loan),
        "loanId": lambda loan, _: loan.loan_id,
        "userId": lambda loan, _: loan.user_id,
        "payments": _loan_payments,
    },
    "PaymentConnection": {"edges": lambda page, _: page.edges, "pageInfo": lambda page, _: page},
    "PaymentEdge": {"cursor": lambda edge, _: edge.cursor, "node": lambda edge, _: edge.node},
    "PageInfo": {
        "hasNextPage": lambda page, _: page.has_next_page,
        "hasPreviousPage": lambda page, _: page.has_previous_page,
        "startCursor": lambda page, _: page.edges[0].cursor if page.edges else None,
        "endCursor": lambda page, _: page.end_cursor,
    },
    "Query": {
        "payment": _payment,
        "loan": lambda _, info, loanId, userId: LoanRef(userId, loanId),
        "paymentsByStatus": _payments_by_status,
        "nodes": _nodes,
    },
}


def build() -> graphql.GraphQLSchema:
    built = graphql.build_schema(SDL.read_text())
    # The served schema declares @defer and @stream (SPEC §22). This peer answers the bench's
    # plain operations, which graphql-core executes only for a schema without them.
    without: dict[str, Any] = dict(built.to_kwargs())
    without["directives"] = [d for d in built.directives if d.name not in INCREMENTAL]
    schema = graphql.GraphQLSchema(**without)
    types: dict[str, Any] = {name: schema.get_type(name) for name in [*RESOLVERS, "Node"]}
    plain = {name: _payment_field(name, f.type) for name, f in types["Payment"].fields.items()}
    for name, resolvers in RESOLVERS.items():
        found = resolvers | ({n: r for n, r in plain.items() if r} if name == "Payment" else {})
        for field_name, resolver in found.items():
            types[name].fields[field_name].resolve = resolver
    types["Node"].resolve_type = lambda value, *_: (
        "Loan" if isinstance(value, LoanRef) else "Payment"
    )
    return schema


def create_app(store: PaymentStore) -> Starlette:
    schema = build()

    @functools.cache
    def document(query: str) -> graphql.DocumentNode | graphql.ExecutionResult:
        """Parsed and validated, by query text; an invalid one, its errors."""
        parsed = graphql.parse(query)
        errors = graphql.validate(schema, parsed)
        return graphql.ExecutionResult(None, errors) if errors else parsed

    async def answer(request: Request) -> JSONResponse:
        payload = json.loads(await request.body())
        parsed = document(payload["query"])
        if isinstance(parsed, graphql.ExecutionResult):
            return JSONResponse(parsed.formatted, status_code=400)
        variables, operation = payload.get("variables"), payload.get("operationName")
        result = graphql.execute(
            schema, parsed, variable_values=variables, operation_name=operation, context_value=store
        )
        if isawaitable(result):
            result = await result
        assert isinstance(result, graphql.ExecutionResult)
        return JSONResponse(result.formatted)

    return Starlette(routes=[Route("/graphql", answer, methods=["POST"])])


if __name__ == "__main__":
    from bench.fake_dynamodb import fake_store

    app, port = create_app(fake_store(Path(sys.argv[2]))), int(sys.argv[1])
    uvicorn.run(
        app, port=port, loop="uvloop", http="httptools", access_log=False, log_level="warning"
    )
