"""One GraphQL operation, from its text to its result: `OperationRunner.run` (a query or a
mutation), `run_in_parts` (one whose `@defer`/`@stream` a client reads in parts) and `stream`
(a subscription, or any operation over WebSocket).

The steps run in order: parse (cached per text; a trusted document's for good, `pin`), the
operation's type, validation with the query limits, cost, `Hooks.admit`, execution of its
compiled plan inside `Hooks.scope`, its errors given to `Hooks.on_errors` and worded by
`Hooks.public_error`, `Hooks.observers`, all under `Hooks.trace`. A request refused before
execution is a `PreExecutionError` (its GraphQL response has no `data` entry); an operation
`admit` refused is a `Refusal`, raised by `run` once observed and answered by `stream` as the
operation's error; a subscription is `Hooks.hold`'s, its start and each event paid for. The
runner knows nothing of what its context is: the hooks receive it.

Each step, and why one function rather than Strawberry's extensions:
docs/engine.md#the-steps-of-an-operation.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from inspect import isawaitable
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

from graphql import (
    DocumentNode,
    Executor,
    FieldNode,
    GraphQLError,
    GraphQLSchema,
    GraphQLSyntaxError,
    OperationDefinitionNode,
    create_source_event_stream,
    execute_subscription_event,
    map_source_to_response_event,
    parse,
    specified_rules,
    validate,
)
from graphql import ExecutionResult as GraphQLExecutionResult
from graphql.execution import ExperimentalIncrementalExecutionResults
from graphql.execution.executor_throwing_on_incremental import ExecutorThrowingOnIncremental
from graphql.validation import (
    ASTValidationRule,
    NoSchemaIntrospectionCustomRule,
    NoUndefinedVariablesRule,
    NoUnusedVariablesRule,
    VariablesInAllowedPositionRule,
)
from strawberry.extensions import MaxAliasesLimiter, QueryDepthLimiter
from strawberry.schema.validation_rules.maybe_null import MaybeNullValidationRule
from strawberry.schema.validation_rules.one_of import OneOfInputValidationRule
from strawberry.types import ExecutionResult
from strawberry.types.execution import PreExecutionError
from strawberry.types.graphql import OperationType
from strawberry.utils.operation import get_operation_type

from engine.compiler import Plan
from engine.errors import MissingQuery, NoSuchOperation, OperationTypeNotAllowed, Refusal
from engine.incremental import StreamInitialCountRule
from engine.limits import QueryLimits, actual_cost, cost_refusal, fixed_cost, operation_cost
from engine.parts import Part, PartErrors, Parts, handing_over_failure, send_parts
from engine.usage import coordinates

__all__ = [
    "CACHED_DOCUMENTS",
    "UNTRACED",
    "Admission",
    "Charge",
    "Extensions",
    "FirstParse",
    "Held",
    "Holding",
    "Hooks",
    "Observed",
    "Observer",
    "OperationHook",
    "OperationRunner",
    "Trace",
]

# Distinct query texts kept parsed and validated; clients send a handful of fixed operations.
CACHED_DOCUMENTS = 512
# What these rules check needs a variable, which needs a `$` in the text.
_VARIABLE_RULES = frozenset(
    {NoUndefinedVariablesRule, NoUnusedVariablesRule, VariablesInAllowedPositionRule}
)

# A text that may hold `@defer` or `@stream`, looked at before it is parsed.
_INCREMENTAL_TEXT = re.compile(r"@\s*(?:defer|stream)\b")

ContextT = TypeVar("ContextT")


@dataclass(frozen=True, slots=True)
class Observed(Generic[ContextT]):
    """A finished operation, as the `Hooks.observers` see it."""

    operation: str  # its name, or its first root field
    context: ContextT
    errors: Sequence[GraphQLError]
    duration: float
    # The schema coordinates it selected (`engine.usage`), looked up only when an observer asks
    # (`fields`): empty when it did not run.
    selected: Callable[[], frozenset[str]] = frozenset

    @property
    def fields(self) -> frozenset[str]:
        return self.selected()


Observer = Callable[[Observed[ContextT]], None]


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


# Called before an admitted operation runs: (its context, its type, the coordinates it selects).
OperationHook = Callable[[ContextT, OperationType, Callable[[], frozenset[str]]], None]
# What a scope adds to the result's `extensions` once the operation has run (None: nothing).
Extensions = Callable[[], dict[str, Any] | None]


class Charge(Protocol):
    """An operation admitted (`Hooks.admit`): settled once it has run with its actual cost
    (`engine.limits.actual_cost`; a subscription's: its requested cost), giving what to add to
    the result's `extensions`. One that also has `admitted()` gives what the first part of an
    answer in parts adds to its `extensions`, before it is settled."""

    def settle(self, actual: int) -> dict[str, Any]: ...


# Called with (the context, the operation's type, its cost) just before it runs: a `Charge`, None
# (not charged), or raises `Refusal`.
Admission = Callable[[ContextT, OperationType, int], Awaitable[Charge | None]]
# Called with the context before a text this instance has not prepared is parsed: None, or
# raises `Refusal` (a caller who cannot pay for that work).
FirstParse = Callable[[ContextT], Awaitable[None]]


class Held(Protocol):
    """A subscription held open (`Hooks.hold`): each of its events paid for before it runs,
    `pay` waiting until its caller can; the `Charge` is settled with the event's actual cost."""

    async def pay(self) -> Charge: ...


# Entered with (the context, its cost) around a subscription, from before it starts to its end:
# charges its start and gives what pays its events (None: not charged), or raises `Refusal`.
Holding = Callable[[ContextT, int], AbstractAsyncContextManager[Held | None]]


class Trace(Protocol):
    """One operation's trace: current inside `with`, ended by `end` with its errors (before they
    are made public)."""

    def __enter__(self) -> object: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> object: ...

    def end(self, errors: Sequence[GraphQLError]) -> None: ...


class _Untraced:
    """The trace of an operation nobody traces: nothing to do (`UNTRACED`)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None

    def end(self, errors: Sequence[GraphQLError]) -> None:
        return None


UNTRACED: Trace = _Untraced()


def _untraced(
    context: object, document: DocumentNode | None, name: str | None, query: str, started: float
) -> Trace:
    return UNTRACED


def _no_scope(context: object) -> AbstractContextManager[Extensions]:
    return nullcontext(_no_extensions)


def _no_extensions() -> None:
    return None


def _ignore(errors: Sequence[GraphQLError]) -> None:
    return None


def _as_is(error: GraphQLError) -> GraphQLError:
    return error


@dataclass(frozen=True, slots=True)
class Hooks(Generic[ContextT]):
    """What a service adds to each operation; each does nothing by default.

    scope            entered around an operation's execution with its context (a time budget,
                     counting the calls it makes); gives what to add to the result's extensions
    trace            the operation's trace: (context, document or None, operation name, query
                     text, `time.perf_counter()` when it began)
    event_errors     a subscription event's errors, while its trace is current
    on_errors        every error, before it is worded for the caller (to log the unexpected)
    public_error     the error as the caller reads it (masking the unexpected); not a refusal's
    admit            charges an operation's cost, or refuses it (`Admission`): a query's or a
                     mutation's; a refused one enters no scope
    before           called before an admitted operation runs (`OperationHook`)
    hold             entered around a subscription: charges its start and each event (`Holding`)
    first_parse      before a text not yet prepared here is parsed (`FirstParse`)
    observers        each finished operation (`Observed`)
    production_rules validation rules added in production, after introspection's refusal
    """

    scope: Callable[[ContextT], AbstractContextManager[Extensions]] = _no_scope
    trace: Callable[[ContextT, DocumentNode | None, str | None, str, float], Trace] = _untraced
    event_errors: Callable[[Sequence[GraphQLError]], None] = _ignore
    on_errors: Callable[[Sequence[GraphQLError]], None] = _ignore
    public_error: Callable[[GraphQLError], GraphQLError] = _as_is
    before: OperationHook[ContextT] | None = None
    admit: Admission[ContextT] | None = None
    first_parse: FirstParse[ContextT] | None = None
    hold: Holding[ContextT] | None = None
    observers: Sequence[Observer[ContextT]] = ()
    production_rules: Sequence[type[ASTValidationRule]] = ()


class OperationRunner(Generic[ContextT]):
    """Runs the operations of one schema: `run` (a query or a mutation, or any operation the
    transport allows), `stream` (a subscription's results), `pin` (a trusted document, prepared
    for good)."""

    def __init__(
        self,
        schema: GraphQLSchema,
        *,
        compile_operation: Callable[[DocumentNode, str | None], Plan],
        limits: QueryLimits | None = None,
        production: bool = False,
        hooks: Hooks[ContextT] | None = None,
    ) -> None:
        """`compile_operation` makes the plan of a valid document's operation
        (`engine.compiler.compile_operation`); `production` refuses introspection and leaves
        graphql-core's "Did you mean ...?" hints out of its messages."""
        limits = limits or QueryLimits()
        hooks = hooks or Hooks()
        self._schema = schema
        self._hooks = hooks
        self._limits = limits
        self._hide_suggestions = production
        self._compile = compile_operation
        production_rules: tuple[type[ASTValidationRule], ...] = ()
        if production:
            production_rules = (NoSchemaIntrospectionCustomRule, *hooks.production_rules)
        self._rules: tuple[type[ASTValidationRule], ...] = (
            *specified_rules,
            *QueryDepthLimiter(max_depth=limits.max_depth).validation_rules,
            *MaxAliasesLimiter(max_alias_count=limits.max_aliases).validation_rules,
            MaybeNullValidationRule,
            OneOfInputValidationRule,
            StreamInitialCountRule,
            *production_rules,
        )
        # A text without a `$` has no variable: the rules about variables, which walk its
        # operation once more (graphql-core's variable usages), have nothing to find there. A
        # fifth of validating a new document of 15 aliases, which a caller may send at its
        # budget's rate (`Hooks.first_parse`).
        self._rules_without_variables = tuple(
            rule for rule in self._rules if rule not in _VARIABLE_RULES
        )
        # The texts prepared last, least recently used first.
        self._recent: OrderedDict[str, _Prepared] = OrderedDict()
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
        rules = self._rules if "$" in query else self._rules_without_variables
        errors = validate(self._schema, document, rules, hide_suggestions=self._hide_suggestions)
        return _Prepared(document, errors)

    def _prepare(self, query: str) -> _Prepared:
        pinned = self._pinned.get(query)
        if pinned is not None:
            return pinned
        recent = self._recent
        prepared = recent.get(query)
        if prepared is not None:
            recent.move_to_end(query)
            return prepared
        prepared = recent[query] = self._parse_and_validate(query)
        if len(recent) > CACHED_DOCUMENTS:
            recent.popitem(last=False)
        return prepared

    def is_prepared(self, query: str) -> bool:
        """Whether `query` is kept parsed and validated here (pinned or recent)."""
        return query in self._pinned or query in self._recent

    async def _first_parse(self, query: str, context: ContextT) -> Refusal | None:
        """`Hooks.first_parse`'s refusal of a text not prepared here, or None."""
        hook = self._hooks.first_parse
        if hook is None or self.is_prepared(query):
            return None
        try:
            await hook(context)
        except Refusal as refusal:
            return refusal
        return None

    def _operation(self, prepared: _Prepared, operation_name: str | None) -> _Operation:
        """The operation named (or the only one) of a parsed document, kept with it;
        `NoSuchOperation` (nothing kept) if there is no such operation, or no name
        where the document holds several."""
        operation = prepared.operations.get(operation_name)
        if operation is not None:
            return operation
        document = prepared.document
        assert document is not None  # typed only once parsed
        try:
            operation_type = get_operation_type(document, operation_name)
        except RuntimeError as error:
            raise NoSuchOperation(operation_name) from error
        cost = (
            None
            if prepared.errors
            else fixed_cost(self._schema, document, operation_name, self._limits)
        )
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
        (`engine.usage`), computed once and kept with its plan."""
        prepared = self._prepare(query)
        operation = self._operation(prepared, operation_name)
        if operation.coordinates is None:
            assert prepared.document is not None  # executed, so parsed
            operation.coordinates = coordinates(self._schema, prepared.document, operation_name)
        return operation.coordinates

    def is_valid(self, query: str) -> bool:
        """Whether `query` parses and validates, as a request would find it (kept cached)."""
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
        context: ContextT,
        operation_name: str | None,
        allowed: Iterable[OperationType],
        operation_extensions: dict[str, Any] | None = None,
    ) -> ExecutionResult:
        """The operation's result: a `PreExecutionError` (no `data`) when it is refused before
        it runs (parse, validation, limits, variables). Raises `MissingQuery` without a query,
        `OperationTypeNotAllowed` for an operation type not in `allowed`, and `NoSuchOperation`
        when the document has no such operation (`engine.errors`: request errors, which the
        transport answers), and `Refusal` when `Hooks.admit` refuses it."""
        if not query:
            raise MissingQuery
        started = time.perf_counter()
        hooks = self._hooks
        # Refused before its text is parsed, or parsed, checked and costed.
        refused = await self._first_parse(query, context)
        document: DocumentNode | None = None
        errors: list[GraphQLError] = []
        cost = 0
        if refused is None:
            document, errors, cost = self._checked(query, variables, operation_name, allowed)
        trace = hooks.trace(context, document, operation_name, query, started)
        data = None
        executed = False
        charge: Charge | None = None
        extensions_of: Extensions = _no_extensions
        with trace:
            runs = refused is None and document is not None and not errors
            operation = self._operation(self._prepare(query), operation_name) if runs else None
            if operation is not None and hooks.admit is not None:
                try:
                    charge = await hooks.admit(context, operation.type, cost)
                except Refusal as refusal:
                    refused, operation = refusal, None
            # A refusal is answered without entering the scope (it has nothing to count there):
            # a flood of refusals is what budgets are for, and each is to cost little.
            if refused is None:
                with hooks.scope(context) as extensions_of:
                    if operation is not None:
                        if hooks.before is not None:
                            selected = functools.partial(self.selected, query, operation_name)
                            hooks.before(context, operation.type, selected)
                        data, errors, executed = await self._execute(
                            query, variables, context, operation_name, operation_extensions
                        )
        if refused is not None:
            errors = [refused.error]
        trace.end(errors)
        if refused is None:  # a refusal's error is answered (and observed) as the service made it
            errors = self._public(errors)
        extensions = extensions_of()
        if charge is not None:
            assert document is not None  # admitted, so parsed
            used = actual_cost(self._schema, document, operation_name, self._limits, data)
            extensions = {**(extensions or {}), **charge.settle(used)}
        observed = Observed(
            operation=operation_name or _first_field(document),
            context=context,
            errors=errors,
            duration=time.perf_counter() - started,
            selected=(
                functools.partial(self.selected, query, operation_name) if executed else frozenset
            ),
        )
        for observe in hooks.observers:
            observe(observed)
        if refused is not None:
            try:
                raise refused
            finally:
                # Its traceback holds this frame: with no reference back, the refusal and all
                # it reaches are freed by reference counting, not left for the collector.
                del refused
        if not executed:  # a request error: the GraphQL response has no `data` entry
            return PreExecutionError(data=None, errors=errors or None, extensions=extensions)
        return ExecutionResult(data=data, errors=errors or None, extensions=extensions)

    async def run_in_parts(
        self,
        query: str | None,
        *,
        variables: dict[str, Any] | None,
        context: ContextT,
        operation_name: str | None,
        allowed: Iterable[OperationType],
        operation_extensions: dict[str, Any] | None = None,
    ) -> ExecutionResult | Parts:
        """`run`, for a client that reads an answer in parts: an operation whose `@defer` or
        `@stream` applies is answered as `Parts`, any other as `run` answers it; it raises what
        `run` raises, before any part. Whether a document holds them is known once per document
        (`Plan.incremental`), so an operation without them goes to `run` at once."""
        if not query:
            raise MissingQuery
        if not self._may_come_in_parts(query, operation_name):
            return await self.run(
                query,
                variables=variables,
                context=context,
                operation_name=operation_name,
                allowed=allowed,
                operation_extensions=operation_extensions,
            )
        # One task makes every part, inside the operation's scope and trace from the first part
        # to the last (their context variables are set and reset by the same task); the queue
        # holds one part, so the next is worked on while one is sent.
        queue: asyncio.Queue[object] = asyncio.Queue(maxsize=1)
        task = asyncio.create_task(
            handing_over_failure(
                self._produce(
                    query, variables, context, operation_name, allowed, operation_extensions, queue
                ),
                queue,
            )
        )
        try:
            first = await queue.get()
        except BaseException:
            task.cancel()
            raise
        queue.task_done()
        if isinstance(first, dict):
            return Parts(first, queue, task)
        await task
        if isinstance(first, BaseException):
            try:
                raise first
            finally:
                del first  # no reference back from its traceback (`run`)
        assert isinstance(first, ExecutionResult)
        return first

    def _may_come_in_parts(self, query: str, operation_name: str | None) -> bool:
        """Whether the operation holds `@defer` or `@stream`: its plan says so once it is
        prepared; a text not prepared yet is only looked at (`Hooks.first_parse` comes before
        its parse)."""
        if not self.is_prepared(query):
            return _INCREMENTAL_TEXT.search(query) is not None
        prepared = self._prepare(query)
        if prepared.document is None or prepared.errors:
            return False
        try:
            return self._plan(query, operation_name).incremental
        except NoSuchOperation:
            return False

    async def _produce(
        self,
        query: str,
        variables: dict[str, Any] | None,
        context: ContextT,
        operation_name: str | None,
        allowed: Iterable[OperationType],
        operation_extensions: dict[str, Any] | None,
        out: asyncio.Queue[object],
    ) -> None:
        """`run`'s steps, what they give put in `out`: an `ExecutionResult` or an exception
        (what `run` returns or raises) alone, or the payloads of its parts, the last with
        `hasNext: false` and the operation's extensions. An operation in parts is observed when
        its last part is sent (`Parts.rest`), or when its client went away."""
        started = time.perf_counter()
        hooks = self._hooks
        try:
            refused = await self._first_parse(query, context)
            document: DocumentNode | None = None
            errors: list[GraphQLError] = []
            cost = 0
            if refused is None:
                document, errors, cost = self._checked(query, variables, operation_name, allowed)
        except Exception as error:  # a request error, raised by `run_in_parts`
            await out.put(error)
            return
        trace = hooks.trace(context, document, operation_name, query, started)
        data = None
        executed = False
        charge: Charge | None = None
        extensions_of: Extensions = _no_extensions
        sent: PartErrors | None = None
        try:
            with trace:
                runs = refused is None and document is not None and not errors
                operation = self._operation(self._prepare(query), operation_name) if runs else None
                if operation is not None and hooks.admit is not None:
                    try:
                        charge = await hooks.admit(context, operation.type, cost)
                    except Refusal as refusal:
                        refused, operation = refusal, None
                if refused is None:
                    with hooks.scope(context) as extensions_of:
                        if operation is not None:
                            if hooks.before is not None:
                                selected = functools.partial(self.selected, query, operation_name)
                                hooks.before(context, operation.type, selected)
                            answered = await self._execute_in_parts(
                                query, variables, context, operation_name, operation_extensions
                            )
                            if isinstance(answered, ExperimentalIncrementalExecutionResults):
                                assert document is not None  # it ran
                                sent = PartErrors(self._public)
                                cost_of = functools.partial(
                                    actual_cost,
                                    self._schema,
                                    document,
                                    operation_name,
                                    self._limits,
                                )
                                closing = _Closing(cost_of, charge, extensions_of)
                                await send_parts(
                                    answered, closing.opening(), closing.extensions, sent, out
                                )
                            else:
                                data, errors, executed = answered
        finally:
            if sent is not None:
                trace.end(sent.errors)
                self._observe(
                    query, operation_name, document, context, sent.public, started, executed=True
                )
        if sent is not None:
            return
        if refused is not None:
            errors = [refused.error]
        trace.end(errors)
        if refused is None:
            errors = self._public(errors)
        extensions = extensions_of()
        if charge is not None:
            assert document is not None  # admitted, so parsed
            used = actual_cost(self._schema, document, operation_name, self._limits, data)
            extensions = {**(extensions or {}), **charge.settle(used)}
        self._observe(query, operation_name, document, context, errors, started, executed)
        if refused is not None:
            await out.put(refused)
        elif not executed:
            await out.put(
                PreExecutionError(data=None, errors=errors or None, extensions=extensions)
            )
        else:
            await out.put(ExecutionResult(data=data, errors=errors or None, extensions=extensions))

    def _observe(
        self,
        query: str,
        operation_name: str | None,
        document: DocumentNode | None,
        context: ContextT,
        errors: Sequence[GraphQLError],
        started: float,
        executed: bool,
    ) -> None:
        observed = Observed(
            operation=operation_name or _first_field(document),
            context=context,
            errors=errors,
            duration=time.perf_counter() - started,
            selected=(
                functools.partial(self.selected, query, operation_name) if executed else frozenset
            ),
        )
        for observe in self._hooks.observers:
            observe(observed)

    async def _execute_in_parts(
        self,
        query: str,
        variables: dict[str, Any] | None,
        context: Any,
        operation_name: str | None,
        operation_extensions: dict[str, Any] | None,
    ) -> (
        tuple[dict[str, Any] | None, list[GraphQLError], bool]
        | ExperimentalIncrementalExecutionResults
    ):
        """`_execute`, by graphql-core's incremental execution when the plan holds `@defer`
        or `@stream`: its parts, or (none applying) what `_execute` gives."""
        plan = self._plan(query, operation_name)
        if not plan.incremental:
            return await self._execute(
                query, variables, context, operation_name, operation_extensions
            )
        try:
            result = plan.execute_incrementally(
                context=context,
                variables=variables,
                hide_suggestions=self._hide_suggestions,
                operation_extensions=operation_extensions,
            )
            if isawaitable(result):
                result = await result
        except Exception as error:  # masked as unexpected, like any resolver's
            return None, [GraphQLError(str(error), original_error=error)], True
        if isinstance(result, ExperimentalIncrementalExecutionResults):
            return result
        errors = list(result.errors or ())
        executed = result.data is not None or any(error.path for error in errors)
        return result.data, errors, executed

    async def stream(
        self,
        query: str | None,
        *,
        variables: dict[str, Any] | None,
        context: ContextT,
        operation_name: str | None,
        allowed: Iterable[OperationType],
    ) -> AsyncGenerator[ExecutionResult, None]:
        """A subscription's results, one per event; any other operation's one result. A refused
        document is one `PreExecutionError` (graphql-transport-ws answers it with `error`)."""
        if not query:
            raise MissingQuery
        started = time.perf_counter()
        unpaid = await self._first_parse(query, context)
        if unpaid is not None:
            self._hooks.trace(context, None, operation_name, query, started).end([unpaid.error])
            yield PreExecutionError(data=None, errors=[unpaid.error], extensions=unpaid.extensions)
            return
        try:
            document, errors, cost = self._checked(query, variables, operation_name, allowed)
        except NoSuchOperation as error:
            # Over HTTP a request error of the transport's; here the operation's own `error`.
            document, errors, cost = None, [GraphQLError(error.as_http_error_reason())], 0
        except OperationTypeNotAllowed as error:
            # A protocol that runs subscriptions alone (the legacy graphql-ws): unanswered, the
            # client would wait on it for ever.
            reason = error.as_http_error_reason("this protocol")
            document, errors, cost = None, [GraphQLError(reason)], 0
        if document is None or errors:
            self._hooks.trace(context, document, operation_name, query, started).end(errors)
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
            try:
                answered = await self.run_in_parts(
                    query,
                    variables=variables,
                    context=context,
                    operation_name=operation_name,
                    allowed=allowed,
                )
            except Refusal as refusal:
                yield PreExecutionError(
                    data=None, errors=[refusal.error], extensions=refusal.extensions
                )
                return
            if not isinstance(answered, Parts):
                yield answered
                return
            # An answer in parts: each a result of its own (`Part`), in graphql-js 17's format.
            try:
                yield Part(data=answered.first.get("data"), errors=None, payload=answered.first)
                async for payload in answered.rest():
                    yield Part(data=None, errors=None, payload=payload)
            finally:
                await answered.aclose()
            return
        # Held open (`Hooks.hold`): its start charged, then each event paid for before it runs.
        async with contextlib.AsyncExitStack() as holding:
            held: Held | None = None
            if self._hooks.hold is not None:
                try:
                    held = await holding.enter_async_context(self._hooks.hold(context, cost))
                except Refusal as refusal:
                    self._hooks.trace(context, document, operation_name, query, started).end(
                        [refusal.error]
                    )
                    yield PreExecutionError(
                        data=None, errors=[refusal.error], extensions=refusal.extensions
                    )
                    return
            # The subscription's span ends once it is accepted; each event sent has its own.
            trace = self._hooks.trace(context, document, operation_name, query, started)
            with trace:
                source = await self._subscribe(document, context, variables, operation_name, held)
            trace.end(source.errors or [] if isinstance(source, GraphQLExecutionResult) else [])
            if isinstance(source, GraphQLExecutionResult):  # refused before its first event
                await holding.aclose()  # what it held given back before it is answered
                yield PreExecutionError(data=None, errors=self._public(source.errors))
                return
            try:
                async for event in source:
                    if event.errors:
                        self._hooks.event_errors(event.errors)
                    yield ExecutionResult(
                        data=event.data,
                        errors=self._public(event.errors) or None,
                        extensions=event.extensions,
                    )
            except Exception as error:  # the source failed: one last answer, masked if unexpected
                yield ExecutionResult(
                    data=None,
                    errors=self._public([GraphQLError(str(error), original_error=error)]),
                )
            finally:
                await source.aclose()

    async def _subscribe(
        self,
        document: DocumentNode,
        context: ContextT,
        variables: dict[str, Any] | None,
        operation_name: str | None,
        held: Held | None,
    ) -> AsyncGenerator[GraphQLExecutionResult, None] | GraphQLExecutionResult:
        """graphql-core's `subscribe`, with each event paid for (`Held.pay`) before its answer
        is worked out, and its charge settled with that answer's actual cost, which its
        `extensions` then hold; or why it could not start."""
        executor = ExecutorThrowingOnIncremental.build(
            self._schema,
            document,
            context_value=context,
            raw_variable_values=variables,
            operation_name=operation_name,
            hide_suggestions=self._hide_suggestions,
        )
        if isinstance(executor, list):  # its variables could not be coerced
            return GraphQLExecutionResult(None, errors=executor)
        events = create_source_event_stream(executor)
        if isawaitable(events):
            events = await events
        if isinstance(events, GraphQLExecutionResult):
            return events
        if held is None:
            return map_source_to_response_event(executor, events)

        async def paid(event: Executor[Any]) -> GraphQLExecutionResult:
            assert held is not None
            charge = await held.pay()
            result = execute_subscription_event(event)
            if isawaitable(result):
                result = await result
            used = actual_cost(self._schema, document, operation_name, self._limits, result.data)
            result.extensions = charge.settle(used)
            return result

        return map_source_to_response_event(executor, events, paid)

    def _checked(
        self,
        query: str,
        variables: dict[str, Any] | None,
        operation_name: str | None,
        allowed: Iterable[OperationType],
    ) -> tuple[DocumentNode | None, list[GraphQLError], int]:
        """The parsed document, why it is refused (parse, type, validation, cost), and its cost
        (0 when not valid)."""
        prepared = self._prepare(query)
        document = prepared.document
        errors = list(prepared.errors)
        if document is None:
            return None, errors, 0
        operation = self._operation(prepared, operation_name)
        if operation.type not in allowed:
            raise OperationTypeNotAllowed(operation.type)
        cost = 0
        if not errors:
            cost = operation.cost if operation.cost is not None else 0
            if operation.cost is None:
                cost = operation_cost(
                    self._schema, document, operation_name, variables or {}, self._limits
                )
            refusal = cost_refusal(cost, self._limits)
            if refusal is not None:
                errors = [refusal]
        return document, errors, cost

    def _public(self, errors: Sequence[GraphQLError] | None) -> list[GraphQLError]:
        """The unexpected logged and masked, every error in the words a caller may read."""
        if not errors:
            return []
        self._hooks.on_errors(errors)
        public = self._hooks.public_error
        return [public(error) for error in errors]

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


@dataclass(frozen=True, slots=True)
class _Closing:
    """What an operation in parts adds to its first payload's extensions (its admitted cost)
    and to its last's (the scope's, its settled cost on the data the parts gave)."""

    used: Callable[[Any], int]  # the actual cost of the data the parts gave
    charge: Charge | None
    extensions_of: Extensions

    def opening(self) -> dict[str, Any] | None:
        admitted = getattr(self.charge, "admitted", None)
        return None if admitted is None else dict(admitted())

    def extensions(self, data: Any) -> dict[str, Any]:
        extensions = self.extensions_of() or {}
        if self.charge is not None:
            extensions = {**extensions, **self.charge.settle(self.used(data))}
        return extensions


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
