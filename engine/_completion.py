"""The nodes of a compiled operation (`engine.compiler`), and how they run: graphql-core's
execution (`graphql.execution.Executor`: execute_fields, execute_field, complete_value and its
kinds) step for step, with everything that depends only on the document decided once.

What runs per request keeps graphql-core's order, its awaitables and their gathering (so
DataLoaders batch the same loads), its error messages, the paths and locations of its errors,
and its null propagation. An object of plain leaves, or of its type's stored source, is first
completed in one pass (`fast`); anything unusual in it and it is completed again by the ordinary
nodes, which report it where graphql-core does.

What is decided at compile time, and why the one pass may run twice: docs/engine.md#how-a-plan-runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeGuard, cast

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    GraphQLAbstractType,
    GraphQLError,
    GraphQLField,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLResolveInfo,
    GraphQLResolveInfoHelpers,
    GraphQLSchema,
    OperationDefinitionNode,
    located_error,
)
from graphql.execution import VariableValues, default_type_resolver, get_argument_values
from graphql.pyutils import Path, Undefined, gather_with_cancel, inspect, is_iterable
from strawberry.execution import optimized_is_awaitable

from engine.stored import StoredField, StoredSource

__all__: list[str] = []  # internal to the engine: its names are not its interface

is_awaitable = cast("Callable[[Any], TypeGuard[Awaitable[Any]]]", optimized_is_awaitable)
# A one-pass answer that only the ordinary nodes may give.
SLOW: Any = object()

_background: set[asyncio.Future[Any]] = set()


def _settle_in_background(awaitables: Sequence[Awaitable[Any]]) -> None:
    """graphql-core's `settle_in_background`: pending work still runs, and its errors are seen,
    after an error left it behind."""
    future = asyncio.gather(*awaitables, return_exceptions=True)
    _background.add(future)
    future.add_done_callback(_background.discard)


def _track(values: Sequence[Any]) -> None:
    awaitables = [value for value in values if is_awaitable(value)]
    if awaitables:
        _settle_in_background(awaitables)


def _gather(values: Sequence[Awaitable[Any]]) -> Awaitable[list[Any]]:
    return gather_with_cancel(*values)


# graphql-core's helpers for resolvers, without state of a run: none of a request's objects
# holds a bound method of another, so what a request made is freed when it ends.
HELPERS = GraphQLResolveInfoHelpers(gather=_gather, track=_track)


class Run:
    """One execution of a plan: what its resolvers are given, and the errors collected
    (graphql-core's `CollectedErrors`: none is kept below a position already nulled)."""

    __slots__ = (
        "context",
        "errors",
        "fragments",
        "hide_suggestions",
        "operation",
        "positions",
        "root_value",
        "schema",
        "variable_values",
    )

    def __init__(
        self,
        schema: GraphQLSchema,
        fragments: dict[str, FragmentDefinitionNode],
        operation: OperationDefinitionNode,
        variable_values: VariableValues,
        context: Any,
        root_value: Any,
        hide_suggestions: bool,
    ) -> None:
        self.schema = schema
        self.fragments = fragments
        self.operation = operation
        self.variable_values = variable_values
        self.context = context
        self.root_value = root_value
        self.hide_suggestions = hide_suggestions
        self.errors: list[GraphQLError] = []
        self.positions: set[Path | None] = set()

    def add_error(self, error: GraphQLError, path: Path | None) -> None:
        positions = self.positions
        position = path
        while position is not None:
            if position in positions:
                return
            position = position.prev
        if None in positions:
            return
        positions.add(path)
        self.errors.append(error)

    def field_error(
        self, raw_error: Exception, return_type: Any, field: FieldPlan, path: Path
    ) -> None:
        error = located_error(raw_error, field.nodes, path.as_list())
        if isinstance(return_type, GraphQLNonNull):
            raise error
        self.add_error(error, path)

    def info(self, field: FieldPlan, path: Path) -> GraphQLResolveInfo[Any]:
        return GraphQLResolveInfo(
            field.name,
            field.nodes,
            field.return_type,
            field.parent_type,
            path,
            self.schema,
            self.fragments,
            self.root_value,
            self.operation,
            self.variable_values,
            self.context,
            is_awaitable,
            None,
            HELPERS,
        )


Resolve = Callable[..., Any]


class FieldPlan:
    """One response key of an object's selection: graphql-core's `execute_field`."""

    __slots__ = (
        "arguments",
        "attribute",
        "complete",
        "definition",
        "key",
        "name",
        "needs_info",
        "nodes",
        "parent_name",
        "parent_type",
        "resolve",
        "return_type",
        "static_arguments",
        "typename",
    )

    def __init__(
        self,
        *,
        key: str,
        parent_type: GraphQLObjectType,
        definition: GraphQLField,
        nodes: list[FieldNode],
        attribute: str | None,
        resolve: Resolve | None,
        static_arguments: dict[str, Any] | None,
        typename: bool = False,
    ) -> None:
        self.key = key
        self.name = nodes[0].name.value
        self.parent_type = parent_type
        self.parent_name = parent_type.name
        self.definition = definition
        self.return_type = definition.type
        self.nodes = nodes
        self.attribute = attribute
        self.resolve = resolve
        self.typename = typename
        # Arguments with no variable in them are coerced once; the rest on every run.
        self.static_arguments = static_arguments
        self.arguments = bool(definition.args or nodes[0].arguments)
        self.complete: Completer = _UNSET  # set once the completer is built
        self.needs_info = resolve is not None

    def execute(self, run: Run, source: Any, parent_path: Path | None) -> Any:
        path = Path(parent_path, self.key, self.parent_name)
        info = run.info(self, path) if self.needs_info else None
        try:
            if self.typename:
                result: Any = self.parent_name
            elif self.attribute is not None:
                result = getattr(source, self.attribute)
            else:
                assert self.resolve is not None
                arguments = self.static_arguments
                if arguments is None:
                    arguments = (
                        get_argument_values(
                            self.definition,
                            self.nodes[0],
                            run.variable_values,
                            None,
                            run.hide_suggestions,
                        )
                        if self.arguments
                        else {}
                    )
                result = self.resolve(source, info, **arguments)
            if is_awaitable(result):
                return self._complete_awaitable(run, info, path, result)
            completed = self.complete.complete(run, info, path, result)
            if is_awaitable(completed):
                return self._await_completed(run, path, completed)
        except Exception as raw_error:
            run.field_error(raw_error, self.return_type, self, path)
            return None
        return completed

    async def _complete_awaitable(
        self, run: Run, info: GraphQLResolveInfo[Any] | None, path: Path, result: Any
    ) -> Any:
        try:
            resolved = await result
            completed = self.complete.complete(run, info, path, resolved)
            if is_awaitable(completed):
                completed = await completed
        except Exception as raw_error:
            run.field_error(raw_error, self.return_type, self, path)
            completed = None
        return completed

    async def _await_completed(self, run: Run, path: Path, completed: Awaitable[Any]) -> Any:
        try:
            return await completed
        except Exception as raw_error:
            run.field_error(raw_error, self.return_type, self, path)
            return None


def execute_fields(
    run: Run, fields: Sequence[FieldPlan], source: Any, path: Path | None
) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    """graphql-core's `execute_fields`: every field, their awaitables gathered."""
    results: dict[str, Any] = {}
    awaitable_keys: list[str] = []
    try:
        for field in fields:
            result = field.execute(run, source, path)
            results[field.key] = result
            if is_awaitable(result):
                awaitable_keys.append(field.key)
    except Exception:
        if awaitable_keys:
            _settle_in_background([results[key] for key in awaitable_keys])
        raise
    if not awaitable_keys:
        return results

    async def get_results() -> dict[str, Any]:
        if len(awaitable_keys) == 1:
            key = awaitable_keys[0]
            results[key] = await results[key]
        else:
            awaited = await gather_with_cancel(*(results[key] for key in awaitable_keys))
            results.update(zip(awaitable_keys, awaited, strict=True))
        return results

    return get_results()


def execute_fields_serially(
    run: Run, fields: Sequence[FieldPlan], source: Any, path: Path | None
) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    """graphql-core's `execute_fields_serially` (a mutation's root fields), one after another."""
    results: dict[str, Any] = {}
    for index, field in enumerate(fields):
        result = field.execute(run, source, path)
        if is_awaitable(result):
            return _serially(run, fields, index, result, results, source, path)
        results[field.key] = result
    return results


async def _serially(
    run: Run,
    fields: Sequence[FieldPlan],
    index: int,
    pending: Awaitable[Any],
    results: dict[str, Any],
    source: Any,
    path: Path | None,
) -> dict[str, Any]:
    results[fields[index].key] = await pending
    for field in fields[index + 1 :]:
        result = field.execute(run, source, path)
        results[field.key] = await result if is_awaitable(result) else result
    return results


class Completer:
    """graphql-core's `complete_value` for one type at one field of the document."""

    __slots__ = ("field",)

    def __init__(self, field: FieldPlan) -> None:
        self.field = field

    def complete(self, run: Run, info: Any, path: Path, result: Any) -> Any:
        raise NotImplementedError

    def fast(self, value: Any) -> Any:
        """The completed value in one pass, or SLOW."""
        return SLOW

    @property
    def has_fast(self) -> bool:
        return False


_UNSET: Any = Completer.__new__(Completer)


class NonNullCompleter(Completer):
    __slots__ = ("inner",)

    def __init__(self, field: FieldPlan, inner: Completer) -> None:
        super().__init__(field)
        self.inner = inner

    def complete(self, run: Run, info: Any, path: Path, result: Any) -> Any:
        if isinstance(result, Exception):
            raise result
        completed = self.inner.complete(run, info, path, result)
        if completed is None:
            field = self.field
            raise TypeError(
                f"Cannot return null for non-nullable field {field.parent_name}.{field.name}."
            )
        return completed

    def fast(self, value: Any) -> Any:
        if value is None:
            return SLOW
        return self.inner.fast(value)

    @property
    def has_fast(self) -> bool:
        return self.inner.has_fast


class LeafCompleter(Completer):
    __slots__ = ("coerce", "leaf_type", "quick")

    def __init__(
        self,
        field: FieldPlan,
        leaf_type: Any,
        quick: Callable[[Any], Any] | None,
    ) -> None:
        super().__init__(field)
        self.leaf_type = leaf_type
        self.coerce = leaf_type.coerce_output_value
        # The coerced value for the usual values (a str for String), SLOW for others.
        self.quick = quick

    def complete(self, run: Run, info: Any, path: Path, result: Any) -> Any:
        if isinstance(result, Exception):
            raise result
        if result is None or result is Undefined:
            return None
        coerced = self.coerce(result)
        if coerced is Undefined or coerced is None:
            raise TypeError(
                f"Expected `{inspect(self.leaf_type)}.coerce_output_value("
                f"{inspect(result)})` to return non-nullable value, returned:"
                f" {inspect(coerced)}"
            )
        return coerced

    def fast(self, value: Any) -> Any:
        if value is None:
            return None
        quick = self.quick
        if quick is not None:
            coerced = quick(value)
            if coerced is not SLOW:
                return coerced
        if isinstance(value, Exception) or value is Undefined:
            return SLOW
        try:
            coerced = self.coerce(value)
        except Exception:
            return SLOW
        return SLOW if coerced is None or coerced is Undefined else coerced

    @property
    def has_fast(self) -> bool:
        return True


class ListCompleter(Completer):
    __slots__ = ("item", "item_type")

    def __init__(self, field: FieldPlan, item_type: Any, item: Completer) -> None:
        super().__init__(field)
        self.item_type = item_type
        self.item = item

    def complete(self, run: Run, info: Any, path: Path, result: Any) -> Any:
        if isinstance(result, Exception):
            raise result
        if result is None or result is Undefined:
            return None
        if isinstance(result, AsyncIterable):
            return self._complete_async(run, info, path, result.__aiter__())
        if not is_iterable(result):
            field = self.field
            raise GraphQLError(
                "Expected Iterable, but did not find one for field"
                f" '{field.parent_name}.{field.name}'."
            )
        return self._complete_iterable(run, info, path, result)

    def _complete_iterable(self, run: Run, info: Any, path: Path, items: Iterable[Any]) -> Any:
        item_completer = self.item
        fast = item_completer.fast if item_completer.has_fast else None
        completed_results: list[Any] = []
        append = completed_results.append
        awaitable_indices: list[int] = []
        iterator = iter(items)
        index = 0
        try:
            for item in iterator:
                if fast is not None:
                    completed = fast(item)
                    if completed is not SLOW:
                        append(completed)
                        index += 1
                        continue
                item_path = Path(path, index, None)
                if is_awaitable(item):
                    append(self._complete_awaitable_item(run, info, item_path, item))
                    awaitable_indices.append(index)
                elif self._complete_item(run, info, item_path, item, completed_results):
                    awaitable_indices.append(index)
                index += 1
        except Exception:
            pending = [completed_results[i] for i in awaitable_indices]
            # The iterator may fail too: what it gave is all there is.
            with contextlib.suppress(Exception):
                pending.extend(item for item in iterator if is_awaitable(item))
            if pending:
                _settle_in_background(pending)
            raise
        if not awaitable_indices:
            return completed_results

        async def get_completed_results() -> list[Any]:
            if len(awaitable_indices) == 1:
                index = awaitable_indices[0]
                completed_results[index] = await completed_results[index]
            else:
                awaited = await gather_with_cancel(
                    *(completed_results[index] for index in awaitable_indices)
                )
                for index, value in zip(awaitable_indices, awaited, strict=True):
                    completed_results[index] = value
            return completed_results

        return get_completed_results()

    def _complete_item(
        self, run: Run, info: Any, item_path: Path, item: Any, results: list[Any]
    ) -> bool:
        item_type = self.item_type
        try:
            completed = self.item.complete(run, info, item_path, item)
            if is_awaitable(completed):

                async def await_completed() -> Any:
                    try:
                        return await completed
                    except Exception as raw_error:
                        run.field_error(raw_error, item_type, self.field, item_path)
                        return None

                results.append(await_completed())
                return True
            results.append(completed)
        except Exception as raw_error:
            run.field_error(raw_error, item_type, self.field, item_path)
            results.append(None)
        return False

    async def _complete_awaitable_item(
        self, run: Run, info: Any, item_path: Path, item: Any
    ) -> Any:
        try:
            resolved = await item
            completed = self.item.complete(run, info, item_path, resolved)
            if is_awaitable(completed):
                completed = await completed
        except Exception as raw_error:
            run.field_error(raw_error, self.item_type, self.field, item_path)
            return None
        return completed

    async def _complete_async(self, run: Run, info: Any, path: Path, iterator: Any) -> list[Any]:
        completed_results: list[Any] = []
        awaitable_indices: list[int] = []
        index = 0
        while True:
            item_path = Path(path, index, None)
            try:
                item = await anext(iterator)
            except StopAsyncIteration:
                break
            except Exception as raw_error:
                raise located_error(raw_error, self.field.nodes, path.as_list()) from raw_error
            if is_awaitable(item):
                completed_results.append(self._complete_awaitable_item(run, info, item_path, item))
                awaitable_indices.append(index)
            elif self._complete_item(run, info, item_path, item, completed_results):
                awaitable_indices.append(index)
            index += 1
        if awaitable_indices:
            awaited = await gather_with_cancel(*(completed_results[i] for i in awaitable_indices))
            for i, value in zip(awaitable_indices, awaited, strict=True):
                completed_results[i] = value
        return completed_results

    def fast(self, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, list | tuple):
            return SLOW
        fast = self.item.fast
        completed = []
        for item in value:
            answer = fast(item)
            if answer is SLOW:
                return SLOW
            completed.append(answer)
        return completed

    @property
    def has_fast(self) -> bool:
        return self.item.has_fast


def _no_pass(value: Any) -> Any:
    return SLOW


class ObjectCompleter(Completer):
    __slots__ = (
        "fields",
        "from_record",
        "generated",
        "is_type_of",
        "object_type",
        "plain",
        "source",
        "stored",
        "stored_kind",
    )

    def __init__(self, field: FieldPlan, object_type: GraphQLObjectType) -> None:
        super().__init__(field)
        self.object_type = object_type
        self.is_type_of = object_type.is_type_of
        self.fields: tuple[FieldPlan, ...] = ()
        # (response key, attribute or None for __typename, completer) when every field is
        # plain: the one pass.
        self.plain: tuple[tuple[str, str | None, Completer], ...] | None = None
        # The one pass of a plain object, written for it (`engine._one_pass`).
        self.generated: Callable[[Any], Any] = _no_pass
        # The type's stored source (`engine.stored`), and when every field is __typename, a
        # plain attribute or one the source answers: (response key, attribute, the source's
        # field or None, completer), and the one pass over an object of the source's kind.
        self.source: StoredSource | None = None
        self.stored: tuple[tuple[str, str | None, StoredField | None, Completer], ...] | None
        self.stored = None
        self.stored_kind: type | None = None
        self.from_record: Callable[[Any], Any] = _no_pass

    def set_fields(self, fields: tuple[FieldPlan, ...], source: StoredSource | None = None) -> None:
        self.fields = fields
        self.source = source
        plain: list[tuple[str, str | None, Completer]] = []
        stored: list[tuple[str, str | None, StoredField | None, Completer]] = []
        all_plain, all_stored = True, source is not None
        for field in fields:
            complete = field.complete
            if field.typename:
                plain.append((field.key, None, complete))
                stored.append((field.key, None, None, complete))
                continue
            found = None
            if source is not None and not field.arguments:
                found = source.fields.get(field.name)
            readable = field.attribute is not None and complete.has_fast
            all_plain = all_plain and readable
            all_stored = all_stored and (readable or (found is not None and complete.has_fast))
            plain.append((field.key, field.attribute, complete))
            stored.append((field.key, field.attribute, found, complete))
        self.plain = tuple(plain) if all_plain else None
        if source is not None and all_stored:
            self.stored = tuple(stored)
            self.stored_kind = source.kind

    def complete(self, run: Run, info: Any, path: Path, result: Any) -> Any:
        if isinstance(result, Exception):
            raise result
        if result is None or result is Undefined:
            return None
        if self.plain is not None or self.stored is not None:
            completed = self.fast(result)
            if completed is not SLOW:
                return completed
        return self.complete_object(run, info, path, result)

    def complete_object(self, run: Run, info: Any, path: Path, result: Any) -> Any:
        is_type_of = self.is_type_of
        if is_type_of is not None:
            found = is_type_of(result, info)
            if is_awaitable(found):
                return self._complete_after(run, path, result, found)
            if not found:
                raise self._invalid(result)
        return execute_fields(run, self.fields, result, path)

    async def _complete_after(
        self, run: Run, path: Path, result: Any, found: Awaitable[Any]
    ) -> dict[str, Any]:
        if not await found:
            raise self._invalid(result)
        completed = execute_fields(run, self.fields, result, path)
        if is_awaitable(completed):
            completed = await completed
        return cast("dict[str, Any]", completed)

    def _invalid(self, result: Any) -> GraphQLError:
        return GraphQLError(
            f"Expected value of type '{self.object_type}' but got: {inspect(result)}.",
            self.field.nodes,
        )

    def fast(self, value: Any) -> Any:
        if value.__class__ is self.stored_kind:
            return self.from_record(value)
        return self.generated(value)

    @property
    def has_fast(self) -> bool:
        return self.plain is not None or self.stored is not None


class AbstractCompleter(Completer):
    __slots__ = ("abstract_type", "by_type")

    def __init__(
        self,
        field: FieldPlan,
        abstract_type: GraphQLAbstractType,
        by_type: dict[str, ObjectCompleter],
    ) -> None:
        super().__init__(field)
        self.abstract_type = abstract_type
        # Each possible type's completion of this field's selection.
        self.by_type = by_type

    def complete(self, run: Run, info: Any, path: Path, result: Any) -> Any:
        if isinstance(result, Exception):
            raise result
        if result is None or result is Undefined:
            return None
        resolve_type = self.abstract_type.resolve_type or default_type_resolver
        runtime_type = resolve_type(result, info, self.abstract_type)
        if is_awaitable(runtime_type):
            return self._complete_after(run, info, path, result, runtime_type)
        return self._runtime(run, runtime_type, info, result).complete(run, info, path, result)

    async def _complete_after(
        self, run: Run, info: Any, path: Path, result: Any, runtime_type: Awaitable[Any]
    ) -> Any:
        completer = self._runtime(run, await runtime_type, info, result)
        value = completer.complete(run, info, path, result)
        if is_awaitable(value):
            return await value
        return value

    def _runtime(self, run: Run, name: Any, info: Any, result: Any) -> ObjectCompleter:
        """graphql-core's `ensure_valid_runtime_type`, in its words."""
        abstract = self.abstract_type
        field = self.field
        where = f"{field.parent_name}.{field.name}"
        if name is None:
            raise GraphQLError(
                f"Abstract type '{abstract}' must resolve to an Object type at runtime"
                f" for field '{where}'. Either the '{abstract}' type should provide"
                " a 'resolve_type' function or each possible type should provide"
                " an 'is_type_of' function.",
                field.nodes,
            )
        if not isinstance(name, str):
            raise GraphQLError(
                f"Abstract type '{abstract}' must resolve to an Object type at runtime"
                f" for field '{where}' with value {inspect(result)}, received"
                f" '{inspect(name)}', which is not a valid Object type name.",
                field.nodes,
            )
        runtime_type = run.schema.get_type(name)
        if runtime_type is None:
            raise GraphQLError(
                f"Abstract type '{abstract}' was resolved to a type '{name}'"
                " that does not exist inside the schema.",
                field.nodes,
            )
        if not isinstance(runtime_type, GraphQLObjectType):
            raise GraphQLError(
                f"Abstract type '{abstract}' was resolved to a non-object type '{name}'.",
                field.nodes,
            )
        completer = self.by_type.get(name)
        if completer is None or not run.schema.is_sub_type(abstract, runtime_type):
            raise GraphQLError(
                f"Runtime Object type '{runtime_type}' is not a possible type for '{abstract}'.",
                field.nodes,
            )
        return completer
