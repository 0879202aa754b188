"""The GraphQL schema: Strawberry types over the resolvers, run by the engine (`engine`) with
the payments' hooks (`schema.operation_hooks`)."""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import AsyncGenerator, Iterable, Sequence
from datetime import datetime
from typing import Any

from graphql import GraphQLError
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.schema import DEFAULT_ALLOWED_OPERATION_TYPES
from strawberry.types import ExecutionContext, ExecutionResult
from strawberry.types.graphql import OperationType

from datasource import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from domain.keys import DEFAULT_FEED_SHARDS, DEFAULT_GSI2_SHARDS
from engine import (
    Admission,
    FirstParse,
    Holding,
    Observer,
    OperationRunner,
    Parts,
    QueryLimits,
    check_version,
    compile_operation,
    graphql_schema,
)
from resolvers.context import Context
from schema.costs import LIST_CAPS, page_reads
from schema.federation import (
    FEDERATION_VERSION,
    FederatedSchema,
    public_schema,
    public_sdl,
    served_subgraph,
    subgraph_sdl,
)
from schema.mutation import Mutation
from schema.operation_hooks import payments_hooks
from schema.public_errors import is_unexpected
from schema.query import Query
from schema.scalars import DATETIME
from schema.stored_payments import payment_sources
from schema.subscription import Subscription
from schema.types import LoanType, PaymentType

logger = logging.getLogger("loc_payments.graphql")


__all__ = ["PaymentsSchema", "build_schema", "payments_limits"]


class PaymentsSchema(FederatedSchema):
    """The schema with its query limits; `production` turns introspection off and has
    graphql-core leave out its "Did you mean ...?" hints (in validation and in coercing
    variables), which would reveal the schema piece by piece. `observers` are what the server
    adds (its request log and metrics); `dynamodb_budget` the seconds each operation may spend
    on DynamoDB (`datasource.deadline`); `trace_documents` puts each operation's document in its
    span (`schema.tracing`); `admit` charges each operation to its caller's budget
    and `first_parse` refuses a text not yet prepared to a caller who cannot pay for it
    (`server.budgets`), `hold` a subscription's start and events and its caller's slot
    (`server.subscription_budgets`). Operations run by their compiled plans (`engine.compiler`);
    `leaves_from_items` has them read a listed payment's fields from its item
    (`schema.stored_payments`).

    `subgraph` serves the schema as a federation subgraph (`_service`, `_entities`, federation's
    directives and scalars); without it, the public schema, which holds none of them
    (`schema.federation`)."""

    def __init__(
        self,
        limits: QueryLimits | None = None,
        *,
        production: bool = False,
        observers: Sequence[Observer[Any]] = (),
        dynamodb_budget: float | None = None,
        trace_documents: bool = False,
        subgraph: bool = False,
        admit: Admission[Any] | None = None,
        first_parse: FirstParse[Any] | None = None,
        hold: Holding[Any] | None = None,
        leaves_from_items: bool = True,
    ) -> None:
        check_version()
        super().__init__(
            query=Query,
            mutation=Mutation,
            subscription=Subscription,
            types=[PaymentType, LoanType],
            config=StrawberryConfig(scalar_map={datetime: DATETIME}),
            federation_version=FEDERATION_VERSION,
        )
        subgraph_schema = graphql_schema(self)
        self.subgraph = subgraph
        self.served = (
            served_subgraph(subgraph_schema) if subgraph else public_schema(subgraph_schema)
        )
        self._operations: OperationRunner[Any] = OperationRunner(
            self.served,
            compile_operation=functools.partial(
                compile_operation,
                self,
                served=self.served,
                sources=payment_sources() if leaves_from_items else None,
            ),
            limits=payments_limits(limits),
            production=production,
            hooks=payments_hooks(
                observers=observers,
                on_errors=self.process_errors,
                dynamodb_budget=dynamodb_budget,
                trace_documents=trace_documents,
                admit=admit,
                first_parse=first_parse,
                hold=hold,
            ),
        )

    async def execute(
        self,
        query: str | None,
        variable_values: dict[str, Any] | None = None,
        context_value: Any | None = None,
        root_value: Any | None = None,
        operation_name: str | None = None,
        allowed_operation_types: Iterable[OperationType] | None = None,
        operation_extensions: dict[str, Any] | None = None,
    ) -> ExecutionResult:
        del root_value  # the root types hold no state
        allowed = allowed_operation_types or DEFAULT_ALLOWED_OPERATION_TYPES
        return await self._operations.run(
            query,
            variables=variable_values,
            context=context_value,
            operation_name=operation_name,
            allowed=allowed,
            operation_extensions=operation_extensions,
        )

    async def execute_in_parts(
        self,
        query: str | None,
        *,
        variable_values: dict[str, Any] | None,
        context_value: Any,
        operation_name: str | None,
        allowed_operation_types: Iterable[OperationType],
        operation_extensions: dict[str, Any] | None = None,
    ) -> ExecutionResult | Parts:
        """`execute` for a client that reads an answer in parts: an operation whose `@defer`
        or `@stream` applies comes as `Parts` (`OperationRunner.run_in_parts`)."""
        return await self._operations.run_in_parts(
            query,
            variables=variable_values,
            context=context_value,
            operation_name=operation_name,
            allowed=allowed_operation_types,
            operation_extensions=operation_extensions,
        )

    async def stream(
        self,
        query: str | None,
        variable_values: dict[str, Any] | None = None,
        context_value: Any | None = None,
        root_value: Any | None = None,
        operation_name: str | None = None,
        operation_extensions: dict[str, Any] | None = None,
        allowed_operation_types: Iterable[OperationType] | None = None,
    ) -> AsyncGenerator[ExecutionResult, None]:
        """Operations over WebSocket, through the same checks as `execute`; each runs in a
        context of its own (`Context.fresh`), though the connection's context is shared."""
        del root_value, operation_extensions
        if isinstance(context_value, Context):
            context_value = context_value.fresh()
        return self._operations.stream(
            query,
            variables=variable_values,
            context=context_value,
            operation_name=operation_name,
            allowed=allowed_operation_types or DEFAULT_ALLOWED_OPERATION_TYPES,
        )

    def as_str(self) -> str:
        """The SDL of what this schema serves: schema.graphql, or with `subgraph`
        schema.subgraph.graphql."""
        return subgraph_sdl(self) if self.subgraph else public_sdl(self.served)

    def prepare_trusted(self, query: str) -> list[GraphQLError]:
        """Prepare a trusted document for good (`OperationRunner.pin`); its problems, if any."""
        return self._operations.pin(query)

    def selected_fields(self, query: str, operation_name: str | None = None) -> frozenset[str]:
        """The schema coordinates an operation of a valid `query` selects, as the field-usage
        metric counts them (`OperationRunner.selected`)."""
        return self._operations.selected(query, operation_name)

    def is_valid(self, query: str) -> bool:
        """Whether a document parses and validates (as a request would find it)."""
        return self._operations.is_valid(query)

    def process_errors(
        self, errors: Sequence[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        # Expected failures are answers, not incidents: log only what gets masked.
        for error in errors:
            if is_unexpected(error):
                logger.error("unexpected error in %s", error.path, exc_info=error.original_error)


def payments_limits(limits: QueryLimits | None = None) -> QueryLimits:
    """`limits` (the engine's defaults without) with the payments' page sizes
    (`datasource.pages`), which a connection's cost counts, the caps of its unsized lists, and
    what its sharded lists' pages read (`schema.costs`: at the default layouts unless `limits`
    says for the layouts served)."""
    limits = limits or QueryLimits()
    return dataclasses.replace(
        limits,
        default_page_size=DEFAULT_PAGE_SIZE,
        max_page_size=MAX_PAGE_SIZE,
        list_caps=LIST_CAPS,
        page_reads=limits.page_reads
        or page_reads(status_partitions=DEFAULT_GSI2_SHARDS, feed_partitions=DEFAULT_FEED_SHARDS),
    )


# The schema with its options, as the server and the tests build it: one signature, not two.
build_schema = PaymentsSchema
