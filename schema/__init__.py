"""The GraphQL schema: Strawberry types over the resolvers."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.extensions import DisableIntrospection, SchemaExtension
from strawberry.schema.config import StrawberryConfig
from strawberry.types import ExecutionContext

from schema.execution import PaymentsExecutionContext
from schema.extensions import DynamoDBAccounting, PublicErrors, is_unexpected
from schema.limits import QueryLimits, limit_extensions
from schema.mutation import Mutation
from schema.query import Query
from schema.scalars import DATETIME
from schema.types import LoanType, PaymentType

logger = logging.getLogger("loc_payments.graphql")


class PaymentsSchema(strawberry.Schema):
    def __init__(self, *, hide_suggestions: bool = False, **options: Any) -> None:
        super().__init__(**options)
        self.hide_suggestions = hide_suggestions

    def _get_execute_function(self) -> Callable[..., Any]:
        # Variable coercion hints at names as validation does ("Did you mean 'process'?").
        execute = super()._get_execute_function()
        return partial(execute, hide_suggestions=True) if self.hide_suggestions else execute

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        # Expected failures are answers, not incidents: log only what gets masked.
        for error in errors:
            if is_unexpected(error):
                logger.error("unexpected error in %s", error.path, exc_info=error.original_error)


def build_schema(
    limits: QueryLimits | None = None,
    *,
    production: bool = False,
    observers: Sequence[Callable[[], SchemaExtension]] = (),
) -> PaymentsSchema:
    """The schema with its query limits; `production` turns introspection off and has
    graphql-core leave out its "Did you mean ...?" hints, in validation and in coercing
    variables, which would reveal the schema piece by piece.
    `observers` are extensions the server adds (its request log and metrics)."""
    extensions: list[Any] = [
        # Hooks unwind in reverse: observers see the response as the caller will.
        *observers,
        PublicErrors,
        *limit_extensions(limits or QueryLimits(), production=production),
        DynamoDBAccounting,
    ]
    if production:
        extensions.append(DisableIntrospection)
    return PaymentsSchema(
        query=Query,
        mutation=Mutation,
        types=[PaymentType, LoanType],
        extensions=extensions,
        execution_context_class=PaymentsExecutionContext,
        config=StrawberryConfig(scalar_map={datetime: DATETIME}),
        hide_suggestions=production,
    )
