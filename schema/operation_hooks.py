"""What the payments service adds to each GraphQL operation the engine runs (`engine.Hooks`):
a time budget on DynamoDB and the count of its calls (`datasource.deadline`,
`datasource.accounting`), `extensions.dynamodb` when the caller may ask for it, the operation's
trace (`schema.tracing`), errors in the words a caller may read (`schema.public_errors`), and
the read-only selection check (`schema.projection`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from graphql import GraphQLError

from datasource import CallCount, count_calls, storage_budget
from engine import Admission, Extensions, FirstParse, Holding, Hooks, Observer
from resolvers.context import Context
from schema import tracing
from schema.federation import NoSubgraphSdlRule
from schema.projection import read_only_selected
from schema.public_errors import public_error

__all__ = ["payments_hooks"]


def payments_hooks(
    *,
    observers: Sequence[Observer[Any]],
    on_errors: Callable[[Sequence[GraphQLError]], None],
    dynamodb_budget: float | None,
    trace_documents: bool,
    admit: Admission[Any] | None = None,
    first_parse: FirstParse[Any] | None = None,
    hold: Holding[Any] | None = None,
) -> Hooks[Any]:
    """The hooks of the payments schema: `dynamodb_budget` is the seconds each operation may
    spend on DynamoDB (None: no limit), `trace_documents` puts each document in its span, `admit`
    charges each operation to its caller's budget and `first_parse` refuses a text not yet prepared
    to a caller who cannot pay for it (`server.budgets`; None: no budgets), `hold` charges a
    subscription's start and events and holds its caller's slot (`server.subscription_budgets`).
    The context is a request's `Context`, or whatever a test or a tool passes: each hook checks."""
    return Hooks(
        scope=functools.partial(dynamodb_scope, dynamodb_budget),
        trace=functools.partial(tracing.operation_trace, record_document=trace_documents),
        event_errors=tracing.record_errors,
        on_errors=on_errors,
        public_error=public_error,
        before=read_only_selected,
        admit=admit,
        first_parse=first_parse,
        hold=hold,
        observers=observers,
        production_rules=(NoSubgraphSdlRule,),
    )


@contextmanager
def dynamodb_scope(budget: float | None, context: object) -> Iterator[Extensions]:
    """The operation's DynamoDB calls counted into `context.calls`, all within `budget`; gives
    `extensions.dynamodb` when the context asks for it (`debug_dynamodb`). A context of another
    kind (a test's, a tool's) is left alone."""
    with count_calls() as calls, storage_budget(budget):
        if isinstance(context, Context):
            context.calls = calls
        yield functools.partial(_extensions, context, calls)


def _extensions(context: object, calls: CallCount) -> dict[str, Any] | None:
    if isinstance(context, Context) and context.debug_dynamodb:
        return {"dynamodb": dynamodb_report(calls)}
    return None


def dynamodb_report(calls: CallCount) -> dict[str, Any]:
    """`extensions.dynamodb` (SPEC §8, §11): the calls, the items they read, and the capacity
    units they consumed in all and per table (`<table>`) and index (`<table>/<index>`), to the
    hundredth.

        {"requests": 2, "operations": {"Query": 1, "BatchGetItem": 1}, "itemsRead": 4,
         "readCapacityUnits": 1.0, "writeCapacityUnits": 0.0,
         "capacity": {"payments": {"read": 0.5, "write": 0.0},
                      "payments/GSI2": {"read": 0.5, "write": 0.0}}}
    """
    return {
        "requests": calls.requests,
        "operations": dict(calls.operations),
        # What the reads went through (a Query's ScannedCount, a lookup's items found).
        "itemsRead": calls.items_read,
        "readCapacityUnits": _units(calls.units.read),
        "writeCapacityUnits": _units(calls.units.write),
        # The most Queries (or rounds of Queries at once, over shards) one list waited for.
        "listRounds": calls.list_rounds,
        "capacity": {
            name: {"read": _units(units.read), "write": _units(units.write)}
            for name, units in sorted(calls.units_by_index.items())
        },
    }


def _units(value: float) -> float:
    return round(value, 2)
