"""One GraphQL operation, from its text to its result, in the order the steps run:

    parse      cached per query text (a trusted document's for good, `pin`); beyond
               `max_tokens` tokens the document is refused
    type       the operation (named, or the only one) must be one the transport allows
    validate   cached with the parse: graphql-core's rules, depth and alias limits, Strawberry's
               own rules, no introspection (nor `_service`) and no "Did you mean" in production
    cost       a valid document that costs too much is refused; kept with the document unless a
               `first` or a list of keys (`nodes`, `_entities`) in it is a variable
    execute    the operation's plan (`schema.compiler`, compiled once and cached with the parse),
               counting the DynamoDB calls it makes and the capacity they consume
               (`dynamodb_report`), which must all end within the operation's budget
               (`datasource.deadline`)
    errors     the unexpected logged and masked, the rest made public (`schema.public_errors`);
               a result refused before execution (parse, validation, cost, variables) is a
               `PreExecutionError`: its GraphQL response has no `data` entry
    observe    the server's observers (request log, metrics) see the finished operation
    trace      with a tracer, the operation is a span from its parse to its answer, current
               while it executes (`schema.tracing`)

A subscription (`stream`, over WebSocket) takes the same steps up to the cost; then each event
is executed as graphql-core's `subscribe` maps it, and its errors made public the same way.

Strawberry would run these steps through an extension object per concern, made afresh for every
request, each hook entered and left through a context manager; as one function they cost a
fraction of that, which on a one-payment request is most of the service's own CPU.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from inspect import isawaitable
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLError,
    GraphQLSchema,
    GraphQLSyntaxError,
    OperationDefinitionNode,
    parse,
    specified_rules,
    subscribe,
    validate,
)
from graphql import ExecutionResult as GraphQLExecutionResult
from graphql.validation import ASTValidationRule, NoSchemaIntrospectionCustomRule
from strawberry.exceptions import MissingQueryError
from strawberry.extensions import MaxAliasesLimiter, QueryDepthLimiter
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.schema.validation_rules.maybe_null import MaybeNullValidationRule
from strawberry.schema.validation_rules.one_of import OneOfInputValidationRule
from strawberry.types import ExecutionResult
from strawberry.types.execution import PreExecutionError
from strawberry.types.graphql import OperationType
from strawberry.utils.operation import get_operation_type

from datasource import deadline
from datasource.accounting import CallCount, count_calls
from schema.compiler import Plan
from schema.federation import NoSubgraphSdlRule
from schema.limits import QueryLimits, cost_refusal, fixed_cost, operation_cost
from schema.public_errors import public_error
from schema.tracing import operation_trace, record_errors
from schema.usage import coordinates

# Distinct query texts kept parsed and validated; clients send a handful of fixed operations.
CACHED_DOCUMENTS = 512


@dataclass(frozen=True, slots=True)
class Observed:
    """A finished operation, as the server's observers see it."""

    operation: str  # its name, or its first root field
    context: Any
    errors: Sequence[GraphQLError]
    duration: float
    # The schema coordinates it selected (`schema.usage`), looked up only when an observer asks
    # (`fields`): empty when it did not run.
    selected: Callable[[], frozenset[str]] = frozenset

    @property
    def fields(self) -> frozenset[str]:
        return self.selected()


Observer = Callable[[Observed], None]


@dataclass(slots=True)
class _Operation:
    """What is kept of one operation of a valid document: its type, its cost when no variable
    sets it (else None: costed per request), and its plan, compiled on first use."""

    type: OperationType
    cost: int | None
    plan: Plan | None = None
    coordinates: frozenset[str] | None = None  # computed on first use


@dataclass(slots=True)
class _Prepared:
    """A document parsed and validated, with its operations by name (None: its only one), each
    as it was first asked for."""

    document: DocumentNode | None
    errors: list[GraphQLError]
    operations: dict[str | None, _Operation] = field(default_factory=dict)


# Called before an operation runs: (its context, its type, the coordinates it selects).
OperationHook = Callable[[Any, OperationType, Callable[[], frozenset[str]]], None]


class OperationRunner:
    def __init__(
        self,
        schema: GraphQLSchema,
        *,
        limits: QueryLimits,
        production: bool,
        compile_operation: Callable[[DocumentNode, str | None], Plan],
        on_errors: Callable[[list[GraphQLError]], None],
        observers: Sequence[Observer],
        dynamodb_budget: float | None = None,
        trace_documents: bool = False,
        on_operation: OperationHook | None = None,
    ) -> None:
        """`on_operation` is called before each operation runs, with its context, its type and
        a function that gives the schema coordinates its document selects (computed once)."""
        self._schema = schema
        self._on_operation = on_operation
        self._trace_documents = trace_documents
        self._limits = limits
        self._hide_suggestions = production
        self._compile = compile_operation
        self._on_errors = on_errors
        self._observers = tuple(observers)
        self._budget = dynamodb_budget
        self._rules: tuple[type[ASTValidationRule], ...] = (
            *specified_rules,
            *QueryDepthLimiter(max_depth=limits.max_depth).validation_rules,
            *MaxAliasesLimiter(max_alias_count=limits.max_aliases).validation_rules,
            MaybeNullValidationRule,
            OneOfInputValidationRule,
            *((NoSchemaIntrospectionCustomRule, NoSubgraphSdlRule) if production else ()),
        )
        self._recent = lru_cache(maxsize=CACHED_DOCUMENTS)(self._parse_and_validate)
        # Trusted documents (`pin`), prepared at start and never evicted.
        self._pinned: dict[str, _Prepared] = {}

    def _parse_and_validate(self, query: str) -> _Prepared:
        try:
            # An empty selection set (graphql-core 3.3 parses one by default) is refused as
            # before: Strawberry's depth limiter fails on it (the max of no depths), a 500.
            document = parse(
                query, max_tokens=self._limits.max_tokens, allow_empty_selection_sets=False
            )
        except GraphQLError as error:
            return _Prepared(None, [error])
        errors = validate(
            self._schema, document, self._rules, hide_suggestions=self._hide_suggestions
        )
        return _Prepared(document, errors)

    def _prepare(self, query: str) -> _Prepared:
        pinned = self._pinned.get(query)
        return pinned if pinned is not None else self._recent(query)

    def _operation(self, prepared: _Prepared, operation_name: str | None) -> _Operation:
        """The operation named (or the only one) of a parsed document, kept with it;
        `CannotGetOperationTypeError` (nothing kept) if there is no such operation, or no name
        where the document holds several."""
        operation = prepared.operations.get(operation_name)
        if operation is not None:
            return operation
        document = prepared.document
        assert document is not None  # typed only once parsed
        try:
            operation_type = get_operation_type(document, operation_name)
        except RuntimeError as error:
            raise CannotGetOperationTypeError(operation_name) from error
        cost = None if prepared.errors else fixed_cost(self._schema, document, operation_name)
        operation = prepared.operations[operation_name] = _Operation(operation_type, cost)
        return operation

    def _plan(self, query: str, operation_name: str | None) -> Plan:
        prepared = self._prepare(query)
        operation = self._operation(prepared, operation_name)
        if operation.plan is None:
            assert prepared.document is not None  # compiled only once parsed and valid
            operation.plan = self._compile(prepared.document, operation_name)
        return operation.plan

    def selected(self, query: str, operation_name: str | None) -> frozenset[str]:
        """The schema coordinates the operation `operation_name` of a valid `query` selects
        (`schema.usage`), computed once and kept with its plan."""
        prepared = self._prepare(query)
        operation = self._operation(prepared, operation_name)
        if operation.coordinates is None:
            assert prepared.document is not None  # executed, so parsed
            operation.coordinates = coordinates(self._schema, prepared.document, operation_name)
        return operation.coordinates

    def is_valid(self, query: str) -> bool:
        prepared = self._prepare(query)
        return prepared.document is not None and not prepared.errors

    def pin(self, query: str) -> list[GraphQLError]:
        """Prepare a trusted document once and for all: parsed, validated, and each of its
        operations typed, costed and compiled. Its problems (a request would be refused for
        them: parse, validation, a cost over the limit) are returned; it is kept only without."""
        if query in self._pinned:
            return []
        prepared = self._parse_and_validate(query)
        if prepared.errors or prepared.document is None:
            return prepared.errors
        definitions = [
            definition
            for definition in prepared.document.definitions
            if isinstance(definition, OperationDefinitionNode)
        ]
        names: list[str | None] = [None] if len(definitions) == 1 else []
        names += [definition.name.value for definition in definitions if definition.name]
        problems = []
        for name in names:
            operation = self._operation(prepared, name)
            refusal = None if operation.cost is None else cost_refusal(operation.cost, self._limits)
            if refusal is not None:
                problems.append(refusal)
        if problems:
            return problems
        self._pinned[query] = prepared
        for name in names:
            self._plan(query, name)
        return []

    async def run(
        self,
        query: str | None,
        *,
        variables: dict[str, Any] | None,
        context: Any,
        operation_name: str | None,
        allowed: Iterable[OperationType],
        operation_extensions: dict[str, Any] | None = None,
    ) -> ExecutionResult:
        """The result, or Strawberry's transport errors (no query, an operation type the
        transport does not allow), which its views answer with HTTP 400."""
        if not query:
            raise MissingQueryError
        started = time.perf_counter()
        document, errors = self._checked(query, variables, operation_name, allowed)
        trace = operation_trace(
            context, document, operation_name, query, self._trace_documents, started
        )
        data = None
        executed = False
        with count_calls() as calls, deadline.budget(self._budget), trace:
            if hasattr(context, "calls"):
                context.calls = calls
            if document is not None and not errors:
                if self._on_operation is not None:
                    operation = self._operation(self._prepare(query), operation_name)
                    selected = functools.partial(self.selected, query, operation_name)
                    self._on_operation(context, operation.type, selected)
                data, errors, executed = await self._execute(
                    query, variables, context, operation_name, operation_extensions
                )
        trace.end(errors)
        errors = self._public(errors)
        extensions = None
        if getattr(context, "debug_dynamodb", False):
            extensions = {"dynamodb": dynamodb_report(calls)}
        observed = Observed(
            operation=operation_name or _first_field(document),
            context=context,
            errors=errors,
            duration=time.perf_counter() - started,
            selected=(
                functools.partial(self.selected, query, operation_name) if executed else frozenset
            ),
        )
        for observe in self._observers:
            observe(observed)
        if not executed:  # a request error: the GraphQL response has no `data` entry
            return PreExecutionError(data=None, errors=errors or None, extensions=extensions)
        return ExecutionResult(data=data, errors=errors or None, extensions=extensions)

    async def stream(
        self,
        query: str | None,
        *,
        variables: dict[str, Any] | None,
        context: Any,
        operation_name: str | None,
        allowed: Iterable[OperationType],
    ) -> AsyncGenerator[ExecutionResult, None]:
        """A subscription's results, one per event; any other operation's one result. A refused
        document is one `PreExecutionError` (graphql-transport-ws answers it with `error`)."""
        if not query:
            raise MissingQueryError
        started = time.perf_counter()
        try:
            document, errors = self._checked(query, variables, operation_name, allowed)
        except CannotGetOperationTypeError as error:
            # Over HTTP a request error of the transport's; here the operation's own `error`.
            document, errors = None, [GraphQLError(error.as_http_error_reason())]
        if document is None or errors:
            operation_trace(
                context, document, operation_name, query, self._trace_documents, started
            ).end(errors)
            # A syntax error is answered like a validation error, as graphql-transport-ws's
            # `error` message says ("before execution starts"); Strawberry's handler would close
            # the socket on a GraphQLSyntaxError (4400), as if the message were malformed.
            refused = [
                GraphQLError(error.message, source=error.source, positions=error.positions)
                if isinstance(error, GraphQLSyntaxError)
                else error
                for error in self._public(errors)
            ]
            yield PreExecutionError(data=None, errors=refused)
            return
        operation = self._operation(self._prepare(query), operation_name)
        if operation.type is not OperationType.SUBSCRIPTION:
            yield await self.run(
                query,
                variables=variables,
                context=context,
                operation_name=operation_name,
                allowed=allowed,
            )
            return
        # The subscription's span ends once it is accepted; each event sent has its own.
        trace = operation_trace(
            context, document, operation_name, query, self._trace_documents, started
        )
        with trace:
            source = subscribe(
                self._schema,
                document,
                context_value=context,
                variable_values=variables,
                operation_name=operation_name,
                hide_suggestions=self._hide_suggestions,
            )
            if isawaitable(source):
                source = await source
        trace.end(source.errors or [] if isinstance(source, GraphQLExecutionResult) else [])
        if isinstance(source, GraphQLExecutionResult):  # refused before its first event
            yield PreExecutionError(data=None, errors=self._public(source.errors))
            return
        try:
            async for event in source:
                record_errors(event.errors)
                yield ExecutionResult(data=event.data, errors=self._public(event.errors) or None)
        except Exception as error:  # the source failed: one last answer, masked if unexpected
            yield ExecutionResult(
                data=None, errors=self._public([GraphQLError(str(error), original_error=error)])
            )
        finally:
            close = getattr(source, "aclose", None)
            if close is not None:
                await close()

    def _checked(
        self,
        query: str,
        variables: dict[str, Any] | None,
        operation_name: str | None,
        allowed: Iterable[OperationType],
    ) -> tuple[DocumentNode | None, list[GraphQLError]]:
        """The parsed document and why it is refused (parse, type, validation, cost)."""
        prepared = self._prepare(query)
        document = prepared.document
        errors = list(prepared.errors)
        if document is None:
            return None, errors
        operation = self._operation(prepared, operation_name)
        if operation.type not in allowed:
            raise InvalidOperationTypeError(operation.type)
        if not errors:
            cost = operation.cost
            if cost is None:
                cost = operation_cost(self._schema, document, operation_name, variables or {})
            refusal = cost_refusal(cost, self._limits)
            if refusal is not None:
                errors = [refusal]
        return document, errors

    def _public(self, errors: Sequence[GraphQLError] | None) -> list[GraphQLError]:
        """The unexpected logged and masked, every error in the words a caller may read."""
        if not errors:
            return []
        self._on_errors(list(errors))
        return [public_error(error) for error in errors]

    async def _execute(
        self,
        query: str,
        variables: dict[str, Any] | None,
        context: Any,
        operation_name: str | None,
        operation_extensions: dict[str, Any] | None,
    ) -> tuple[dict[str, Any] | None, list[GraphQLError], bool]:
        """The data and errors, and whether execution started: graphql-core answers a request
        error (variables it could not coerce) with no data and errors at no path."""
        try:
            result = self._plan(query, operation_name).execute(
                context=context,
                variables=variables,
                hide_suggestions=self._hide_suggestions,
                operation_extensions=operation_extensions,
            )
            if isawaitable(result):
                result = await result
        except Exception as error:  # masked as unexpected, like any resolver's
            return None, [GraphQLError(str(error), original_error=error)], True
        errors = list(result.errors or ())
        executed = result.data is not None or any(error.path for error in errors)
        return result.data, errors, executed


def dynamodb_report(calls: CallCount) -> dict[str, Any]:
    """`extensions.dynamodb` (SPEC §8, §11): the calls, and the capacity units they consumed in
    all and per table (`<table>`) and index (`<table>/<index>`), to the hundredth.

        {"requests": 2, "operations": {"Query": 1, "BatchGetItem": 1},
         "readCapacityUnits": 1.0, "writeCapacityUnits": 0.0,
         "capacity": {"payments": {"read": 0.5, "write": 0.0},
                      "payments/GSI2": {"read": 0.5, "write": 0.0}}}
    """
    return {
        "requests": calls.requests,
        "operations": dict(calls.operations),
        "readCapacityUnits": _units(calls.units.read),
        "writeCapacityUnits": _units(calls.units.write),
        "capacity": {
            name: {"read": _units(units.read), "write": _units(units.write)}
            for name, units in sorted(calls.units_by_index.items())
        },
    }


def _units(value: float) -> float:
    return round(value, 2)


def _first_field(document: DocumentNode | None) -> str:
    """An unnamed operation is known by its first root field (`createPayment`)."""
    for definition in document.definitions if document else ():
        if isinstance(definition, OperationDefinitionNode):
            if definition.name is not None:
                return definition.name.value
            for selection in definition.selection_set.selections:
                if isinstance(selection, FieldNode):
                    return selection.name.value
    return "anonymous"
