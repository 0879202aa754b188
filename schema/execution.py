"""Shorter paths through graphql-core: for leaves that are plain attributes, and for resolvers
whose arguments are all leaves.

Most of a list response is leaves: a payment's id, status, amount... Strawberry resolves each
through a wrapper that builds an info object and calls `getattr`, and graphql-core then checks
for awaitables and completes the value. For a leaf that Strawberry itself marks as basic (no
resolver, no arguments, no field extensions), the answer is exactly
`type.coerce_output_value(getattr(source, python_name))`; this execution context computes that
directly. Anything else, and any leaf whose value is null where it must not be or fails to
coerce, takes graphql-core's ordinary path, which reports the error as it always does. An
object whose selected fields are all such leaves (every payment of a page, `__typename` too)
goes further: its fields are read and coerced in one pass, without the path, the call and the
awaitable check graphql-core spends on each field (`PaymentsExecutionContext.execute_fields`).
So does an object whose fields are such leaves or plain attributes holding such objects, or a
list of them (a page: its edges, each edge's payment, its page info): the whole tree is
completed in one pass. Where any part of it needs the ordinary path (a null where it must not
be, a value that fails to coerce or is not of the field's type), the whole object takes it.

A field with a resolver runs through Strawberry's wrapper, which converts its arguments on every
call: each argument's GraphQL name computed again from its Python name, each value passed
through a chain of type checks. For arguments that are scalars, enums or lists of them,
graphql-core's coerced values are already what the resolver gets (Strawberry returns them as
they are, lists copied), so `shorten_resolvers` gives such a field a resolver that maps the
names, copies the lists and calls the function with Strawberry's `Info`, exactly as the wrapper
would (`self`, `root` and `strawberry.Parent` get the source). Fields with input objects, field
extensions (permissions among them), or `Maybe` or `GlobalID` arguments keep Strawberry's
wrapper, as do subscriptions.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from graphql import (
    GraphQLArgument,
    GraphQLEnumType,
    GraphQLField,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLResolveInfo,
    GraphQLResolveInfoHelpers,
    GraphQLScalarType,
    GraphQLSchema,
    Undefined,
)
from graphql.execution import Executor
from strawberry.relay.types import GlobalID
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.types.base import StrawberryList, StrawberryMaybe, StrawberryOptional
from strawberry.types.field import StrawberryField

_BACKREF = "strawberry-definition"
# A leaf's or object's value that only graphql-core's ordinary path may answer (it reports the
# error, at the field's path).
_ORDINARY: Any = object()


@dataclass(frozen=True, slots=True)
class _Leaf:
    attribute: str
    coerce: Callable[[Any], Any]  # the leaf type's `coerce_output_value`, or as good
    non_null: bool

    def value(self, source: Any) -> Any:
        """The coerced value on `source`, or `_ORDINARY` when it is missing, null where it must
        not be, or fails to coerce."""
        try:
            value = getattr(source, self.attribute)
            if value is None:
                return _ORDINARY if self.non_null else None
            coerced = self.coerce(value)
        except Exception:  # a missing attribute, a property that fails, a value that does
            return _ORDINARY
        return _ORDINARY if coerced is None or coerced is Undefined else coerced


# An object's selected fields, each a leaf or a field of objects: (response name, plan) in
# selection order.
_ObjectPlan = tuple[tuple[str, "_Leaf | _Objects"], ...]


@dataclass(frozen=True, slots=True)
class _Objects:
    """A plain attribute holding an object, or a list of objects (one level), of an object type
    whose selected fields all have plans."""

    attribute: str
    non_null: bool
    is_list: bool
    item_non_null: bool
    # The object type's own check (graphql-core calls it before completing each object).
    is_type_of: Callable[[Any, Any], Any] | None
    is_awaitable: Callable[[Any], bool]
    plan: _ObjectPlan

    def value(self, source: Any) -> Any:
        try:
            value = getattr(source, self.attribute)
        except Exception:  # a missing attribute, a property that fails
            return _ORDINARY
        if value is None:
            return _ORDINARY if self.non_null else None
        if not self.is_list:
            return self._object(value)
        if not isinstance(value, list | tuple):
            return _ORDINARY  # another iterable, or none: the ordinary path decides
        completed: list[Any] = []
        for item in value:
            if item is None:
                if self.item_non_null:
                    return _ORDINARY
                completed.append(None)
                continue
            answer = self._object(item)
            if answer is _ORDINARY:
                return _ORDINARY
            completed.append(answer)
        return completed

    def _object(self, value: Any) -> Any:
        if self.is_awaitable(value):
            return _ORDINARY
        if self.is_type_of is not None:
            try:
                if self.is_type_of(value, None) is not True:
                    return _ORDINARY
            except Exception:
                return _ORDINARY
        results = _complete_object(self.plan, value)
        return _ORDINARY if results is None else results


def _complete_object(plan: _ObjectPlan, source: Any) -> dict[str, Any] | None:
    """Each selected field's completed value, or None when one needs the ordinary path."""
    results: dict[str, Any] = {}
    for response_name, part in plan:
        value = part.value(source)
        if value is _ORDINARY:
            return None
        results[response_name] = value
    return results


class _LeafPlans:
    """One schema's leaf plans: per object type (by identity, which the schema's own types keep
    for its whole life), field name -> plan, made on first use."""

    def __init__(self) -> None:
        self._by_type: dict[int, dict[str, _Leaf | None]] = {}

    def leaf(self, parent_type: GraphQLObjectType, field_name: str) -> _Leaf | None:
        plans = self._by_type.get(id(parent_type))
        if plans is None:
            plans = self._by_type[id(parent_type)] = {}
        if field_name not in plans:
            plans[field_name] = _plan(parent_type, field_name)
        return plans[field_name]


_PLANS_KEY = "payments-leaf-plans"


def _leaf_plans(schema: GraphQLSchema) -> _LeafPlans:
    """The plans kept with `schema` (in its extensions), so they go when it goes: a table kept
    by this module held every schema ever built, and the app each one's resolvers reach, for the
    life of the process."""
    plans = schema.extensions.get(_PLANS_KEY)
    if plans is None:
        plans = schema.extensions[_PLANS_KEY] = _LeafPlans()
    return cast(_LeafPlans, plans)


def _plain_attribute(field: GraphQLField | None) -> str | None:
    """The attribute a field reads, when Strawberry answers it with the attribute as it is: no
    resolver, no arguments, no field extensions."""
    if field is None or field.args or not getattr(field.resolve, "_is_default", False):
        return None
    definition = field.extensions.get(_BACKREF)
    if not isinstance(definition, StrawberryField) or not definition.is_basic_field:
        return None
    return definition.python_name


def _plan(parent_type: GraphQLObjectType, field_name: str) -> _Leaf | None:
    field = parent_type.fields.get(field_name)
    attribute = _plain_attribute(field)
    if field is None or attribute is None:
        return None
    non_null = isinstance(field.type, GraphQLNonNull)
    leaf_type = _without_non_null(field.type)
    if isinstance(leaf_type, GraphQLEnumType):
        return _Leaf(attribute, _enum_output(leaf_type), non_null)
    if isinstance(leaf_type, GraphQLScalarType):
        return _Leaf(attribute, leaf_type.coerce_output_value, non_null)
    return None


def _enum_output(enum_type: GraphQLEnumType) -> Callable[[Any], Any]:
    """Strawberry's enum type finds a member's name by comparing it with each value in turn
    (a status, of ten, on every payment of a page); this finds the same name in a dict."""
    members: Any = getattr(enum_type, "wrapped_cls", None)
    if members is None:
        return enum_type.coerce_output_value
    names: dict[Any, str] = {}
    for name, enum_value in enum_type.values.items():
        for member in members:
            if member.value == enum_value.value:
                names.setdefault(member, name)  # the first name, as Strawberry's loop finds

    def coerce(value: Any) -> Any:
        if value.__class__ is members:
            name = names.get(value)
            if name is not None:
                return name
        return enum_type.coerce_output_value(value)

    return coerce


def _typename_leaf(parent_type: GraphQLObjectType) -> _Leaf:
    """`__typename` as a leaf: the object type's name, whatever the source."""
    name = parent_type.name
    return _Leaf("__class__", lambda _: name, non_null=True)


# Directives the collection of fields has already applied; any other on a field (`@stream`)
# is the ordinary path's.
_COLLECTED = frozenset({"skip", "include"})


def _weak_helpers(executor: Executor[Any]) -> GraphQLResolveInfoHelpers:
    """graphql-core's helpers for `executor`'s resolvers, holding it weakly."""
    reference = weakref.ref(executor)
    return GraphQLResolveInfoHelpers(
        gather=functools.partial(_gather, reference), track=functools.partial(_track, reference)
    )


def _alive(reference: weakref.ref[Executor[Any]]) -> Executor[Any]:
    executor = reference()
    if executor is None:
        raise RuntimeError("the execution has ended")
    return executor


def _gather(reference: weakref.ref[Executor[Any]], values: Sequence[Awaitable[Any]]) -> Any:
    return _alive(reference).gather_async_work(values)


def _track(reference: weakref.ref[Executor[Any]], values: Sequence[Any]) -> None:
    _alive(reference).track_async_work(values)


class PaymentsExecutionContext(StrawberryGraphQLCoreExecutionContext):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # graphql-core keeps its helpers for resolvers (`info.async_helpers`) on the executor as
        # bound methods of the executor: a cycle, so every request's executor, and everything it
        # holds, waited for the garbage collector. Held weakly they make none; they are called
        # while a field runs, and the running field holds the executor.
        self.async_helpers = _weak_helpers(self)
        # A middleware (a schema extension with a `resolve` hook) must see every field.
        manager = self.middleware_manager
        self._shortcut = manager is None or not manager.middlewares
        self._leaf_plans = _leaf_plans(self.schema)
        # By the identity of a grouped field set, which graphql-core keeps for the whole
        # execution (`collect_subfields` memoizes it), so every payment of a page finds the plan
        # made for the first; the set is held here too, so its id is never reused meanwhile.
        self._object_plans: dict[int, tuple[Any, _ObjectPlan | None]] = {}

    def execute_fields(
        self,
        parent_type: GraphQLObjectType,
        source_value: Any,
        path: Any,
        grouped_field_set: Any,
        position_context: Any,
    ) -> Any:
        """An object whose selected fields all have plans (plain leaves, with `__typename` if
        asked, and plain attributes holding such objects) is answered in one pass, without the
        path, the field call and the awaitable check each field costs; a value that needs the
        ordinary path anywhere in it sends the whole object down that path, which reports it."""
        if self._shortcut:
            plan = self._object_plan(parent_type, grouped_field_set)
            if plan is not None:
                results = _complete_object(plan, source_value)
                if results is not None:
                    return results
        return super().execute_fields(
            parent_type, source_value, path, grouped_field_set, position_context
        )

    def _object_plan(
        self, parent_type: GraphQLObjectType, grouped_field_set: Any
    ) -> _ObjectPlan | None:
        entry = self._object_plans.get(id(grouped_field_set))
        if entry is not None:
            return entry[1]
        plan: _ObjectPlan | None = None
        parts: list[tuple[str, _Leaf | _Objects]] = []
        for response_name, field_details_list in grouped_field_set.items():
            node = field_details_list[0].node
            field_name = node.name.value
            part: _Leaf | _Objects | None = None
            if field_name == "__typename":
                part = _typename_leaf(parent_type)
            elif not node.arguments:
                part = self._leaf_plans.leaf(parent_type, field_name) or self._objects_plan(
                    parent_type, field_name, field_details_list
                )
            if part is None:
                break
            parts.append((response_name, part))
        else:
            plan = tuple(parts)
        self._object_plans[id(grouped_field_set)] = (grouped_field_set, plan)
        return plan

    def _objects_plan(
        self, parent_type: GraphQLObjectType, field_name: str, field_details_list: Any
    ) -> _Objects | None:
        """The plan of a plain attribute holding an object, or a list of them, of one object
        type (not an interface or union), whose selected fields all have plans."""
        field = parent_type.fields.get(field_name)
        attribute = _plain_attribute(field)
        if field is None or attribute is None:
            return None
        for details in field_details_list:
            if details.defer_usage is not None or any(
                directive.name.value not in _COLLECTED
                for directive in details.node.directives or ()
            ):
                return None
        field_type = _without_non_null(field.type)
        is_list = isinstance(field_type, GraphQLList)
        item_non_null = is_list and isinstance(field_type.of_type, GraphQLNonNull)
        if is_list:
            field_type = _without_non_null(field_type.of_type)
        if not isinstance(field_type, GraphQLObjectType):
            return None
        grouped_field_set, new_defer_usages, _ = self.collect_subfields(
            field_type, field_details_list
        )
        if new_defer_usages:
            return None
        plan = self._object_plan(field_type, grouped_field_set)
        if plan is None:
            return None
        return _Objects(
            attribute,
            isinstance(field.type, GraphQLNonNull),
            is_list,
            item_non_null,
            field_type.is_type_of,
            self.is_awaitable,
            plan,
        )

    def execute_field(
        self,
        parent_type: GraphQLObjectType,
        source: Any,
        field_details_list: Any,
        path: Any,
        position_context: Any,
    ) -> Any:
        node = field_details_list[0].node
        leaf = None
        if self._shortcut and not node.arguments:
            leaf = self._leaf_plans.leaf(parent_type, node.name.value)
        if leaf is not None:
            value = leaf.value(source)
            if value is not _ORDINARY:
                return value
        return super().execute_field(
            parent_type, source, field_details_list, path, position_context
        )


def shorten_resolvers(schema: GraphQLSchema, config: StrawberryConfig) -> list[str]:
    """Give every field that qualifies (see the module's text) the short resolver; answers the
    fields changed, as `Type.field`."""
    shortened = []
    for graphql_type in schema.type_map.values():
        if not isinstance(graphql_type, GraphQLObjectType):
            continue
        if graphql_type is schema.subscription_type or graphql_type.name.startswith("__"):
            continue
        for name, graphql_field in graphql_type.fields.items():
            resolver = _short_resolver(graphql_field, config)
            if resolver is not None:
                graphql_field.resolve = resolver
                shortened.append(f"{graphql_type.name}.{name}")
    return shortened


def _short_resolver(graphql_field: GraphQLField, config: StrawberryConfig) -> Any:
    field = graphql_field.extensions.get(_BACKREF)
    if not isinstance(field, StrawberryField) or field.base_resolver is None:
        return None
    resolver = field.base_resolver
    if field.extensions:
        return None
    names: dict[str, str] = {}
    lists: set[str] = set()
    for argument in field.arguments:
        graphql_name = config.name_converter.from_argument(argument)
        graphql_argument = graphql_field.args.get(graphql_name)
        if graphql_argument is None or not _leaf_argument(graphql_argument, argument.type):
            return None
        names[graphql_name] = argument.python_name
        if isinstance(_without_non_null(graphql_argument.type), GraphQLList):
            lists.add(graphql_name)
    if isinstance(resolver.wrapped_func, staticmethod | classmethod):
        return None  # unbound: Strawberry's own wrapper says what is wrong
    function: Callable[..., Any] = resolver.wrapped_func
    takes_self = resolver.self_parameter is not None
    info_name = resolver.info_parameter.name if resolver.info_parameter else None
    # `root` and `strawberry.Parent` parameters both get the source.
    source_names = [
        parameter.name
        for parameter in (resolver.root_parameter, resolver.parent_parameter)
        if parameter is not None
    ]
    info_class = config.info_class

    def resolve(source: Any, info: GraphQLResolveInfo[Any], **arguments: Any) -> Any:
        kwargs = {
            names[name]: list(value) if name in lists and value is not None else value
            for name, value in arguments.items()
        }
        for source_name in source_names:
            kwargs[source_name] = source
        if info_name is not None:
            kwargs[info_name] = info_class(_raw_info=info, _field=field)
        return function(source, **kwargs) if takes_self else function(**kwargs)

    return resolve


def _without_non_null(graphql_type: Any) -> Any:
    return graphql_type.of_type if isinstance(graphql_type, GraphQLNonNull) else graphql_type


def _leaf_argument(graphql_argument: GraphQLArgument, strawberry_type: Any) -> bool:
    """A scalar or enum, or a list of them (one level), that Strawberry passes on unconverted."""
    graphql_type = _without_non_null(graphql_argument.type)
    if isinstance(graphql_type, GraphQLList):
        graphql_type = _without_non_null(graphql_type.of_type)
    if not isinstance(graphql_type, GraphQLScalarType | GraphQLEnumType):
        return False
    while isinstance(strawberry_type, StrawberryOptional | StrawberryList):
        if isinstance(strawberry_type, StrawberryMaybe):
            return False
        strawberry_type = strawberry_type.of_type
    return strawberry_type is not GlobalID
