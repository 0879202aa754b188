"""Operations compiled once into plans that answer them, as graphql-jit does for graphql-js.

    compile_operation(schema, document, operation_name) -> Plan
    plan.execute(context=..., variables=...)             -> ExecutionResult, or an awaitable of one

The document must be parsed and valid (`engine.operations` caches a plan with its parse and
validation). A plan answers queries and mutations as graphql-core would; the fields a type's
stored source answers (`engine.stored`) are read from the records its objects carry. What a plan
does not cover (subscriptions, introspection, operation directives, fragment variables, a
document without the operation named, `@skip`/`@include` that cannot take the variables' values)
is executed by graphql-core's `execute`, `Plan.fallback_reason` saying why. A plan gives the
answer without `@defer` and `@stream` (a client reading one body); `Plan.incremental` says once
per document that one is there, and `execute_incrementally` answers in parts.

What a plan covers, and how it runs: docs/engine.md. The nodes are `engine._completion`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from math import isfinite
from typing import Any, cast

import strawberry
from graphql import (
    DirectiveNode,
    DocumentNode,
    ExecutionResult,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLBoolean,
    GraphQLEnumType,
    GraphQLError,
    GraphQLFloat,
    GraphQLID,
    GraphQLIncludeDirective,
    GraphQLInt,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
    GraphQLSkipDirective,
    GraphQLString,
    GraphQLUnionType,
    InlineFragmentNode,
    ListValueNode,
    ObjectValueNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    TypeNameMetaFieldDef,
    ValueNode,
    VariableNode,
    experimental_execute_incrementally,
    type_from_ast,
)
from graphql.execution import (
    ExperimentalIncrementalExecutionResults,
    VariableValues,
    default_field_resolver,
    get_argument_values,
    get_variable_values,
)
from graphql.pyutils import AwaitableOrValue
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from engine import _one_pass as one_pass
from engine import strawberry_adapter
from engine._completion import (
    SLOW,
    AbstractCompleter,
    Completer,
    FieldPlan,
    LeafCompleter,
    ListCompleter,
    NonNullCompleter,
    ObjectCompleter,
    Run,
    execute_fields,
    execute_fields_serially,
    is_awaitable,
)
from engine.incremental import DIRECTIVE_NAMES as INCREMENTAL
from engine.incremental import STREAM, Merged
from engine.stored import StoredSource

__all__ = ["MAX_VARIANTS", "Plan", "compile_operation"]

_NO_VARIABLES = VariableValues({}, {})
_CONDITIONS = (GraphQLSkipDirective.name, GraphQLIncludeDirective.name)
_INTROSPECTION = frozenset({"__schema", "__type"})
# Plans kept per document for the values of its variable `@skip`/`@include`; more are made
# per run without keeping them.
MAX_VARIANTS = 16


class _NotCovered(Exception):
    """Why graphql-core executes the operation."""


def compile_operation(
    schema: strawberry.Schema,
    document: DocumentNode,
    operation_name: str | None,
    *,
    served: GraphQLSchema | None = None,
    sources: Mapping[str, StoredSource] | None = None,
) -> Plan:
    """The plan of the operation `operation_name` (or the only one) of a valid `document`,
    against `served` (by default the graphql-core schema `schema` built; the public schema
    is a view of it, `schema.federation.public_schema`). `sources`: by GraphQL object type,
    the objects whose fields the plan may read from their records (`engine.stored`)."""
    graphql = served or strawberry_adapter.graphql_schema(schema)
    operation, fragments = _definitions(document, operation_name)
    incremental = operation is not None and _is_incremental(operation, fragments)
    counts = _variable_counts(operation, fragments) if operation is not None and incremental else ()
    try:
        if operation is None:
            raise _NotCovered("no single operation by that name")
        conditions = _check(graphql, operation, fragments)
    except _NotCovered as reason:
        return Plan(
            schema,
            graphql,
            document,
            operation_name,
            operation,
            fragments,
            str(reason),
            incremental=incremental,
            stream_counts=counts,
        )
    plan = Plan(
        schema,
        graphql,
        document,
        operation_name,
        operation,
        fragments,
        conditions=conditions,
        sources=sources or {},
        incremental=incremental,
        stream_counts=counts,
    )
    if not conditions:
        plan.variant(())
    return plan


@dataclass(frozen=True, eq=False)
class Plan:
    """How one operation is answered: `execute` runs it. `covered` when the plan answers it,
    else `fallback_reason` says why graphql-core's `execute` does."""

    strawberry_schema: strawberry.Schema
    schema: GraphQLSchema
    document: DocumentNode
    operation_name: str | None
    operation: OperationDefinitionNode | None
    fragments: dict[str, FragmentDefinitionNode]
    # Why graphql-core's `execute` runs the operation; None when the plan does.
    fallback_reason: str | None = None
    # The `@skip`/`@include` whose `if` is a variable, in document order.
    conditions: tuple[DirectiveNode, ...] = ()
    # The stored sources of object types (`engine.stored`), by type name.
    sources: Mapping[str, StoredSource] = field(default_factory=dict)
    # Whether the operation or its fragments hold `@defer` or `@stream` (whatever their `if`).
    incremental: bool = False
    # The `@stream`s whose `initialCount` is a variable: a negative value is refused per run.
    stream_counts: tuple[DirectiveNode, ...] = ()
    _variants: dict[tuple[bool, ...], _Variant] = field(default_factory=dict)

    @property
    def covered(self) -> bool:
        return self.fallback_reason is None

    def execute(
        self,
        *,
        context: Any,
        variables: dict[str, Any] | None,
        root_value: Any = None,
        hide_suggestions: bool = False,
        operation_extensions: dict[str, Any] | None = None,
    ) -> AwaitableOrValue[ExecutionResult]:
        """graphql-core's `execute` of the operation, answered by the plan where it covers it."""
        if self.operation is None or self.fallback_reason is not None:
            return self.execute_by_graphql_core(
                context=context,
                variables=variables,
                root_value=root_value,
                hide_suggestions=hide_suggestions,
                operation_extensions=operation_extensions,
            )
        operation = self.operation
        coerced = get_variable_values(
            self.schema,
            operation.variable_definitions or (),
            variables or {},
            max_errors=50,
            hide_suggestions=hide_suggestions,
        )
        if isinstance(coerced, list):
            return ExecutionResult(data=None, errors=coerced)
        if self.stream_counts:
            refused = _negative_count(self.stream_counts, coerced)
            if refused is not None:
                return ExecutionResult(data=None, errors=[refused])
        try:
            key = tuple(
                _condition(directive, coerced, hide_suggestions) for directive in self.conditions
            )
        except GraphQLError:
            return self.execute_by_graphql_core(
                context=context,
                variables=variables,
                root_value=root_value,
                hide_suggestions=hide_suggestions,
                operation_extensions=operation_extensions,
            )
        run = Run(
            self.schema, self.fragments, operation, coerced, context, root_value, hide_suggestions
        )
        return self.variant(key).run(run)

    def variant(self, key: tuple[bool, ...]) -> _Variant:
        """The plan for these values of the variable conditions, made on first use."""
        found = self._variants.get(key)
        if found is None:
            assert self.operation is not None
            included = dict(zip(map(id, self.conditions), key, strict=True))
            found = _Compiler(
                self.strawberry_schema, self.schema, self.fragments, included, self.sources
            ).root(self.operation)
            if len(self._variants) < MAX_VARIANTS:
                self._variants[key] = found
        return found

    def execute_by_graphql_core(
        self,
        *,
        context: Any,
        variables: dict[str, Any] | None,
        root_value: Any = None,
        hide_suggestions: bool = False,
        operation_extensions: dict[str, Any] | None = None,
    ) -> AwaitableOrValue[ExecutionResult]:
        """What the plan answers, by graphql-core's `execute` (with Strawberry's execution
        context, as Strawberry runs it): the path for what the plan does not cover. graphql-core
        runs a schema that declares `@defer` and `@stream` incrementally only: an answer in parts
        here is made whole, as a plan gives it."""
        result = experimental_execute_incrementally(
            self.schema,
            self.document,
            root_value=root_value,
            context_value=context,
            variable_values=variables,
            operation_name=self.operation_name,
            executor_class=StrawberryGraphQLCoreExecutionContext,
            is_awaitable=is_awaitable,
            hide_suggestions=hide_suggestions,
            operation_extensions=operation_extensions,
        )
        if isinstance(result, ExecutionResult):
            return result
        return _whole(result)

    def execute_incrementally(
        self,
        *,
        context: Any,
        variables: dict[str, Any] | None,
        hide_suggestions: bool = False,
        operation_extensions: dict[str, Any] | None = None,
    ) -> AwaitableOrValue[ExecutionResult | ExperimentalIncrementalExecutionResults]:
        """The operation's answer in parts where its `@defer` and `@stream` ask for them
        (graphql-core's incremental execution; one `ExecutionResult` where none applies). A
        negative `initialCount` from a variable is refused before it runs, as a literal one is
        by validation."""
        if self.stream_counts and self.operation is not None:
            coerced = get_variable_values(
                self.schema,
                self.operation.variable_definitions or (),
                variables or {},
                max_errors=50,
                hide_suggestions=hide_suggestions,
            )
            if not isinstance(coerced, list):
                refused = _negative_count(self.stream_counts, coerced)
                if refused is not None:
                    return ExecutionResult(data=None, errors=[refused])
        return experimental_execute_incrementally(
            self.schema,
            self.document,
            context_value=context,
            variable_values=variables,
            operation_name=self.operation_name,
            executor_class=StrawberryGraphQLCoreExecutionContext,
            is_awaitable=is_awaitable,
            hide_suggestions=hide_suggestions,
            operation_extensions=operation_extensions,
        )


async def _whole(
    answer: AwaitableOrValue[ExecutionResult | ExperimentalIncrementalExecutionResults],
) -> ExecutionResult:
    """An answer in parts merged into one (`engine.incremental.Merged`), with every error."""
    if is_awaitable(answer):
        answer = await answer
    if isinstance(answer, ExecutionResult):
        return answer
    assert isinstance(answer, ExperimentalIncrementalExecutionResults)
    initial = answer.initial_result
    errors = list(initial.errors or ())
    merged = Merged(cast("dict[str, Any]", initial.formatted))
    async for later in answer.subsequent_results:
        merged.apply(cast("dict[str, Any]", later.formatted))
        for part in (*(later.incremental or ()), *(later.completed or ())):
            errors += part.errors or ()
    return ExecutionResult(merged.data, errors or None)


@dataclass(frozen=True, slots=True)
class _Variant:
    fields: tuple[FieldPlan, ...]
    serially: bool

    def run(self, run: Run) -> AwaitableOrValue[ExecutionResult]:
        """graphql-core's `execute_operation`: an error that reaches the root nulls the data."""
        execute = execute_fields_serially if self.serially else execute_fields
        try:
            data = execute(run, self.fields, run.root_value, None)
        except GraphQLError as error:
            run.add_error(error, None)
            return ExecutionResult(None, run.errors or None)
        if is_awaitable(data):
            return _awaited(run, data)
        return ExecutionResult(cast("dict[str, Any]", data), run.errors or None)


async def _awaited(run: Run, data: Any) -> ExecutionResult:
    try:
        completed = await data
    except GraphQLError as error:
        run.add_error(error, None)
        return ExecutionResult(None, run.errors or None)
    return ExecutionResult(completed, run.errors or None)


def _definitions(
    document: DocumentNode, operation_name: str | None
) -> tuple[OperationDefinitionNode | None, dict[str, FragmentDefinitionNode]]:
    """The operation graphql-core would run (None where it would refuse) and the fragments."""
    operation: OperationDefinitionNode | None = None
    several = False
    fragments: dict[str, FragmentDefinitionNode] = {}
    for definition in document.definitions:
        if isinstance(definition, OperationDefinitionNode):
            if operation_name is None:
                several = several or operation is not None
                operation = definition
            elif definition.name and definition.name.value == operation_name:
                operation = definition
        elif isinstance(definition, FragmentDefinitionNode):
            fragments[definition.name.value] = definition
    return (None if several else operation), fragments


def _check(
    schema: GraphQLSchema,
    operation: OperationDefinitionNode,
    fragments: dict[str, FragmentDefinitionNode],
) -> tuple[DirectiveNode, ...]:
    """What the plan does not cover (raised), and the variable `@skip`/`@include` of the
    operation and its fragments, in document order."""
    if operation.operation is OperationType.SUBSCRIPTION:
        raise _NotCovered("a subscription")
    if operation.directives:
        raise _NotCovered("operation directives")
    if schema.get_root_type(operation.operation) is None:
        raise _NotCovered("no root type")
    for fragment in fragments.values():
        if fragment.variable_definitions:
            raise _NotCovered("fragment variables")
    conditions: list[DirectiveNode] = []
    sets = [operation.selection_set, *(f.selection_set for f in fragments.values())]
    for selection_set in sets:
        for node in _selections(selection_set):
            if isinstance(node, FieldNode) and node.name.value in _INTROSPECTION:
                raise _NotCovered("introspection")
            for directive in node.directives or ():
                if directive.name.value in INCREMENTAL:
                    continue  # the plan's answer is the one without parts
                if directive.name.value not in _CONDITIONS:
                    raise _NotCovered(f"@{directive.name.value}")
                if any(_has_variable(argument.value) for argument in directive.arguments or ()):
                    conditions.append(directive)
    return tuple(conditions)


def _is_incremental(
    operation: OperationDefinitionNode, fragments: dict[str, FragmentDefinitionNode]
) -> bool:
    sets = [operation.selection_set, *(f.selection_set for f in fragments.values())]
    return any(
        directive.name.value in INCREMENTAL
        for selection_set in sets
        for node in _selections(selection_set)
        for directive in node.directives or ()
    )


def _variable_counts(
    operation: OperationDefinitionNode, fragments: dict[str, FragmentDefinitionNode]
) -> tuple[DirectiveNode, ...]:
    sets = [operation.selection_set, *(f.selection_set for f in fragments.values())]
    return tuple(
        directive
        for selection_set in sets
        for node in _selections(selection_set)
        for directive in node.directives or ()
        if directive.name.value == STREAM.name
        and any(
            argument.name.value == "initialCount" and isinstance(argument.value, VariableNode)
            for argument in directive.arguments or ()
        )
    )


def _negative_count(
    streams: tuple[DirectiveNode, ...], variables: VariableValues
) -> GraphQLError | None:
    """A request error for a `@stream` whose `initialCount` the variables make negative."""
    for directive in streams:
        count = get_argument_values(STREAM, directive, variables).get("initialCount")
        if isinstance(count, int) and count < 0:
            return GraphQLError("@stream's initialCount must not be negative.", directive)
    return None


def _selections(selection_set: SelectionSetNode) -> Iterator[Any]:
    for selection in selection_set.selections:
        yield selection
        inner = getattr(selection, "selection_set", None)
        if inner is not None:
            yield from _selections(inner)


def _has_variable(value: ValueNode) -> bool:
    if isinstance(value, VariableNode):
        return True
    if isinstance(value, ListValueNode):
        return any(_has_variable(item) for item in value.values)
    if isinstance(value, ObjectValueNode):
        return any(_has_variable(item.value) for item in value.fields)
    return False


def _condition(directive: DirectiveNode, variables: VariableValues, hide: bool) -> bool:
    definition = GraphQLSkipDirective if directive.name.value == "skip" else GraphQLIncludeDirective
    return bool(get_argument_values(definition, directive, variables, None, hide)["if"])


class _Compiler:
    """One variant's plan: the nodes of `engine._completion` for every field of the operation."""

    def __init__(
        self,
        schema: strawberry.Schema,
        graphql: GraphQLSchema,
        fragments: dict[str, FragmentDefinitionNode],
        included: dict[int, bool],
        sources: Mapping[str, StoredSource],
    ) -> None:
        self.strawberry = schema
        self.schema = graphql
        self.fragments = fragments
        self.included = included
        self.sources = sources

    def root(self, operation: OperationDefinitionNode) -> _Variant:
        root_type = self.schema.get_root_type(operation.operation)
        assert root_type is not None  # checked by `_check`
        grouped: dict[str, list[FieldNode]] = {}
        self._collect(root_type, operation.selection_set, grouped, set())
        return _Variant(
            self._fields(root_type, grouped), operation.operation is OperationType.MUTATION
        )

    def _fields(
        self, parent_type: GraphQLObjectType, grouped: dict[str, list[FieldNode]]
    ) -> tuple[FieldPlan, ...]:
        return tuple(self._field(parent_type, key, nodes) for key, nodes in grouped.items())

    def _field(self, parent_type: GraphQLObjectType, key: str, nodes: list[FieldNode]) -> FieldPlan:
        name = nodes[0].name.value
        if name == "__typename":
            plan = FieldPlan(
                key=key,
                parent_type=parent_type,
                definition=TypeNameMetaFieldDef,
                nodes=nodes,
                attribute=None,
                resolve=None,
                static_arguments={},
                typename=True,
            )
        else:
            definition = parent_type.fields[name]
            attribute = strawberry_adapter.plain_attribute(self.strawberry, definition)
            resolve = None
            if attribute is None:
                resolve = strawberry_adapter.direct_resolver(self.strawberry, definition)
                resolve = resolve or definition.resolve or default_field_resolver
            plan = FieldPlan(
                key=key,
                parent_type=parent_type,
                definition=definition,
                nodes=nodes,
                attribute=attribute,
                resolve=resolve,
                static_arguments=_static_arguments(definition, nodes[0]),
            )
        plan.complete = self._completer(plan, plan.return_type)
        plan.needs_info = plan.resolve is not None or _uses_info(plan.complete)
        return plan

    def _completer(self, field: FieldPlan, graphql_type: Any) -> Completer:
        if isinstance(graphql_type, GraphQLNonNull):
            return NonNullCompleter(field, self._completer(field, graphql_type.of_type))
        if isinstance(graphql_type, GraphQLList):
            item_type = graphql_type.of_type
            return ListCompleter(field, item_type, self._completer(field, item_type))
        if isinstance(graphql_type, GraphQLScalarType | GraphQLEnumType):
            return LeafCompleter(field, graphql_type, _quick(graphql_type))
        if isinstance(graphql_type, GraphQLObjectType):
            return self._object(field, graphql_type)
        assert isinstance(graphql_type, GraphQLInterfaceType | GraphQLUnionType)
        by_type = {
            possible.name: self._object(field, possible)
            for possible in self.schema.get_possible_types(graphql_type)
        }
        return AbstractCompleter(field, graphql_type, by_type)

    def _object(self, field: FieldPlan, object_type: GraphQLObjectType) -> ObjectCompleter:
        """graphql-core's `collect_subfields`: the selections of every node of the field."""
        completer = ObjectCompleter(field, object_type)
        grouped: dict[str, list[FieldNode]] = {}
        visited: set[str] = set()
        for node in field.nodes:
            if node.selection_set:
                self._collect(object_type, node.selection_set, grouped, visited)
        completer.set_fields(self._fields(object_type, grouped), self.sources.get(object_type.name))
        if completer.plain is not None:
            completer.generated = one_pass.generate(completer)
        if completer.stored is not None:
            completer.from_record = one_pass.generate_stored(completer)
        return completer

    def _collect(
        self,
        runtime_type: GraphQLObjectType,
        selection_set: SelectionSetNode,
        grouped: dict[str, list[FieldNode]],
        visited: set[str],
    ) -> None:
        """graphql-core's `collect_fields` (without `@defer`): response keys in the order first
        met, each with its field nodes."""
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                if self._included(selection.directives):
                    key = selection.alias.value if selection.alias else selection.name.value
                    grouped.setdefault(key, []).append(selection)
            elif isinstance(selection, InlineFragmentNode):
                if self._included(selection.directives) and self._matches(selection, runtime_type):
                    self._collect(runtime_type, selection.selection_set, grouped, visited)
            elif isinstance(selection, FragmentSpreadNode):
                if not self._included(selection.directives):
                    continue
                name = selection.name.value
                fragment = self.fragments.get(name)
                if fragment is None or not self._matches(fragment, runtime_type):
                    continue
                if name in visited:
                    continue
                visited.add(name)
                self._collect(runtime_type, fragment.selection_set, grouped, visited)

    def _included(self, directives: Iterable[DirectiveNode] | None) -> bool:
        """`@skip` first, then `@include`, as graphql-core's `should_include_node` reads them."""
        skip = include = None
        for directive in directives or ():
            if directive.name.value == "skip" and skip is None:
                skip = directive
            elif directive.name.value == "include" and include is None:
                include = directive
        if skip is not None and self._value(skip):
            return False
        return include is None or self._value(include)

    def _value(self, directive: DirectiveNode) -> bool:
        found = self.included.get(id(directive))
        if found is not None:
            return found
        return _condition(directive, _NO_VARIABLES, False)

    def _matches(
        self, fragment: InlineFragmentNode | FragmentDefinitionNode, runtime_type: GraphQLObjectType
    ) -> bool:
        condition = fragment.type_condition
        if condition is None:
            return True
        conditional = type_from_ast(self.schema, condition)
        if conditional is runtime_type:
            return True
        if isinstance(conditional, GraphQLInterfaceType | GraphQLUnionType):
            return self.schema.is_sub_type(conditional, runtime_type)
        return False


def _static_arguments(definition: Any, node: FieldNode) -> dict[str, Any] | None:
    """The coerced arguments of a field whose arguments hold no variable; None for the rest
    (coerced on every run) and for any whose coercion fails (it fails at run time, as a field
    error)."""
    if not (definition.args or node.arguments):
        return {}
    if any(_has_variable(argument.value) for argument in node.arguments or ()):
        return None
    try:
        return get_argument_values(definition, node, _NO_VARIABLES)
    except Exception:
        return None


def _uses_info(completer: Completer) -> bool:
    """Whether completing the field's value calls something given its info (an object type's
    `is_type_of`, an abstract type's `resolve_type`)."""
    while isinstance(completer, NonNullCompleter | ListCompleter):
        completer = completer.inner if isinstance(completer, NonNullCompleter) else completer.item
    if isinstance(completer, AbstractCompleter):
        return True
    return isinstance(completer, ObjectCompleter) and completer.is_type_of is not None


_MIN_INT, _MAX_INT = -(2**31), 2**31 - 1


def _quick(leaf_type: GraphQLScalarType | GraphQLEnumType) -> Any:
    """The coercion of the usual values of a leaf type, which are their own GraphQL values
    (graphql-core's `coerce_output_value` answers them unchanged), SLOW for any other."""
    if leaf_type is GraphQLString or leaf_type is GraphQLID:
        return lambda value: value if value.__class__ is str else SLOW
    if leaf_type is GraphQLInt:
        return lambda value: (
            value if value.__class__ is int and _MIN_INT <= value <= _MAX_INT else SLOW
        )
    if leaf_type is GraphQLBoolean:
        return lambda value: value if value is True or value is False else SLOW
    if leaf_type is GraphQLFloat:
        return lambda value: value if value.__class__ is float and isfinite(value) else SLOW
    if isinstance(leaf_type, GraphQLEnumType):
        found = strawberry_adapter.enum_names(leaf_type)
        if found is not None:
            members, names = found
            return lambda value: names.get(value, SLOW) if value.__class__ is members else SLOW
    return None
