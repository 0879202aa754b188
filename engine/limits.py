"""Query limits: each refuses an operation before any resolver or DynamoDB call runs
(`engine.operations` applies them).

depth     nesting of selections, through fragments (strawberry's QueryDepthLimiter's rule)
aliases   aliased fields, through fragment spreads (MaxAliasesLimiter's rule)
tokens    lexical tokens of the document (graphql-core's parser stops at the limit)
cost      every field costs 1; a field with a `first` argument (a connection) multiplies
          what it selects by `first` or `last` (`default_page_size` when neither is given, at
          most `max_page_size`), so nested pages multiply, and adds what its page reads beyond
          its items (`page_reads`); a field of many keys (`nodes(ids:)`,
          `_entities(representations:)`, `keyed_lists`) by the keys given; a list with no size
          by its cap (`list_caps`); `__schema` and `__type` by what they answer over the schema;
          variables as execution reads them (coerced, defaults applied)
actual    the same count over what it returned (`actual_cost`): each page by the items it
          returned, each list of keys or capped list by the objects found; never above the cost
"""

from __future__ import annotations

from collections.abc import Callable, Collection, ItemsView, Iterator, Mapping, ValuesView
from dataclasses import dataclass, field
from types import MappingProxyType, SimpleNamespace
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLArgument,
    GraphQLDirective,
    GraphQLEnumValue,
    GraphQLError,
    GraphQLField,
    GraphQLInputField,
    GraphQLNamedType,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLSchema,
    GraphQLType,
    InlineFragmentNode,
    IntValueNode,
    ListValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    VariableDefinitionNode,
    VariableNode,
    get_argument_values,
    get_named_type,
    get_variable_values,
    introspection_types,
    is_composite_type,
    is_list_type,
)
from graphql.type.introspection import SchemaMetaFieldDef, TypeMetaFieldDef

__all__ = [
    "KEYED_LISTS",
    "QueryLimits",
    "actual_cost",
    "cost_refusal",
    "fixed_cost",
    "operation_cost",
    "uncapped_lists",
]

# The fields that answer one object per key given, and the argument of their keys: Relay's
# `nodes` and federation's `_entities`.
KEYED_LISTS: Mapping[str, str] = MappingProxyType({"nodes": "ids", "_entities": "representations"})


@dataclass(frozen=True, slots=True)
class QueryLimits:
    """The limits of one schema's operations; the page sizes are those its connections use."""

    max_depth: int = 10
    max_aliases: int = 15
    max_tokens: int = 1000
    max_cost: int = 10_000
    default_page_size: int = 20
    max_page_size: int = 100
    keyed_lists: Mapping[str, str] = field(default_factory=lambda: KEYED_LISTS)
    # Lists with no size argument, by schema coordinate (`Payment.applications`): the most items
    # one holds, a bound the service enforces. Each costs that many items.
    list_caps: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    # Pages read from several partitions at once, by schema coordinate: the items a page of `n`
    # may read beyond the n + 1 a page of one partition reads, added to its cost.
    page_reads: Mapping[str, Callable[[int], int]] = field(
        default_factory=lambda: MappingProxyType({})
    )


def cost_refusal(cost: int, limits: QueryLimits) -> GraphQLError | None:
    """The refusal of an operation that costs more than `limits.max_cost`, or None."""
    if cost <= limits.max_cost:
        return None
    return GraphQLError(
        f"The query costs {cost}, more than the limit of {limits.max_cost}: "
        "ask for fewer items (`first`) or fewer nested lists.",
        extensions={"code": "QUERY_TOO_COSTLY", "cost": cost},
    )


class _VariablesRead(Exception):
    pass


class _NoVariables(Mapping[str, Any]):
    """Variables that cannot be read: costing with them says whether the cost depends on any."""

    def __getitem__(self, name: str) -> Any:
        raise _VariablesRead

    def __iter__(self) -> Iterator[str]:
        raise _VariablesRead

    def __len__(self) -> int:
        raise _VariablesRead


class _Coerced(Mapping[str, Any]):
    """The variables as execution reads them: coerced, defaults applied (graphql-core's own
    coercion), worked out when first read, so a cost that reads none stays fixed. Values that
    do not coerce are the request's own: execution refuses them before any resolver runs."""

    def __init__(
        self,
        schema: GraphQLSchema,
        definitions: Collection[VariableDefinitionNode],
        given: Mapping[str, Any],
    ) -> None:
        self._schema, self._definitions, self._given = schema, definitions, given
        self._values: Mapping[str, Any] | None = None

    def _coerced(self) -> Mapping[str, Any]:
        if self._values is None:
            given = dict(self._given)
            result = get_variable_values(self._schema, self._definitions, given)
            self._values = given if isinstance(result, list) else result.coerced
        return self._values

    def __getitem__(self, name: str) -> Any:
        return self._coerced()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._coerced())

    def __len__(self) -> int:
        return len(self._coerced())


def fixed_cost(
    schema: GraphQLSchema, document: DocumentNode, operation_name: str | None, limits: QueryLimits
) -> int | None:
    """The operation's cost if no `first` in it is a variable (so it can be kept with the
    document), else None: then it is costed per request, with the request's variables."""
    try:
        return operation_cost(schema, document, operation_name, _NoVariables(), limits)
    except _VariablesRead:
        return None


def operation_cost(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation_name: str | None,
    variables: Mapping[str, Any],
    limits: QueryLimits,
) -> int:
    """The cost of the operation `operation_name` (each operation's, without a name: the
    largest) of a valid `document`, with the values execution gives these variables."""
    fragments = _fragments(document)
    costs = [0]
    for definition in _operations(document, operation_name):
        root = schema.get_root_type(definition.operation)
        values = _Coerced(schema, definition.variable_definitions or (), variables)
        costing = _Costing(schema, fragments, values, limits)
        costs.append(costing.cost(definition.selection_set, root))
    return max(costs)


@dataclass(frozen=True, slots=True)
class _Costing:
    schema: GraphQLSchema
    fragments: Mapping[str, FragmentDefinitionNode]
    variables: Mapping[str, Any]
    limits: QueryLimits

    def cost(
        self,
        selections: SelectionSetNode | None,
        parent: GraphQLNamedType | None,
        spread: frozenset[str] = frozenset(),
    ) -> int:
        """`spread`: the fragments on the way here, so a cycle ends instead of recursing."""
        if selections is None:
            return 0
        total = 0
        for selection in selections.selections:
            if isinstance(selection, FieldNode):
                total += self._field(selection, parent, spread)
            elif isinstance(selection, InlineFragmentNode):
                condition = selection.type_condition
                narrowed = self.schema.get_type(condition.name.value) if condition else parent
                total += self.cost(selection.selection_set, narrowed, spread)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = self.fragments.get(name)
                if fragment is None or name in spread:
                    continue
                narrowed = self.schema.get_type(fragment.type_condition.name.value)
                total += self.cost(fragment.selection_set, narrowed, spread | {name})
        return total

    def _field(
        self, node: FieldNode, parent: GraphQLNamedType | None, spread: frozenset[str]
    ) -> int:
        name = node.name.value
        if parent is self.schema.query_type and name in _META_FIELDS:
            return self._introspection(node, _META_FIELDS[name])
        fields = getattr(parent, "fields", {})
        definition = fields.get(name)
        if definition is None:  # __typename, or a field validation will refuse
            return 1
        inner = self.cost(node.selection_set, get_named_type(definition.type), spread)
        keys = self.limits.keyed_lists.get(name)
        if keys is not None and parent is self.schema.query_type:
            return 1 + self._count(node, keys) * inner
        coordinate = f"{getattr(parent, 'name', '')}.{name}"
        if "first" not in definition.args:
            return 1 + self.limits.list_caps.get(coordinate, 1) * inner
        first = self._first(node)
        reads = self.limits.page_reads.get(coordinate)
        return 1 + first * inner + (0 if reads is None else reads(first))

    def _introspection(self, node: FieldNode, definition: GraphQLField) -> int:
        """`__schema` or `__type`: counted over what it answers (`_Introspected`)."""
        arguments = _arguments(definition, node, self.variables)
        answer = definition.resolve(None, _info(self.schema), **arguments)  # type: ignore[misc]
        return 1 + _Introspected(self.schema, self.fragments, self.variables).value(node, answer)

    def _count(self, node: FieldNode, name: str) -> int:
        """How many keys the argument `name` gives (a single value is a list of one)."""
        for argument in node.arguments or ():
            if argument.name.value != name:
                continue
            value = argument.value
            if isinstance(value, ListValueNode):
                return max(1, len(value.values))
            if isinstance(value, VariableNode):
                given = self.variables.get(value.name.value)
                if isinstance(given, list):
                    return max(1, len(given))
        return 1

    def _first(self, node: FieldNode) -> int:
        """The page size a connection asks for; `first` and `last` together are refused when
        the list runs, so the larger costs."""
        sizes = [self._size(node, name) for name in ("first", "last")]
        given = [size for size in sizes if size is not None]
        # What a connection without `first` or `last` returns.
        return max(given) if given else self.limits.default_page_size

    def _size(self, node: FieldNode, name: str) -> int | None:
        for argument in node.arguments or ():
            if argument.name.value != name:
                continue
            value = argument.value
            if isinstance(value, IntValueNode):
                return self._page(int(value.value))
            if isinstance(value, VariableNode):
                given = self.variables.get(value.name.value)
                if isinstance(given, int):
                    return self._page(given)
        return None

    def _page(self, first: int) -> int:
        # A larger `first` is refused when the list runs: it costs no more than the largest page.
        return min(max(1, first), self.limits.max_page_size)


# The introspection fields of the query type, which no schema type lists.
_META_FIELDS: Mapping[str, GraphQLField] = MappingProxyType(
    {"__schema": SchemaMetaFieldDef, "__type": TypeMetaFieldDef}
)


def _arguments(
    definition: GraphQLField, node: FieldNode, variables: Mapping[str, Any]
) -> dict[str, Any]:
    """The field's arguments as execution coerces them (graphql-core's own), its variables'
    values read from `variables`."""
    values: Any = SimpleNamespace(coerced=variables, sources={})
    return get_argument_values(definition, node, values)


def _info(schema: GraphQLSchema) -> Any:
    """What graphql-core's introspection resolvers read of their `info`: the schema."""
    return SimpleNamespace(schema=schema)


@dataclass(frozen=True, slots=True)
class _Introspected:
    """The cost of an introspection selection, counted as `_Costing` counts (a field 1, an
    object its fields, a list each of its items) over what graphql-core's own introspection
    resolvers answer for this schema: exactly what the answer holds, `@skip` aside. Counted
    once per selection and schema element, so `type { fields { type { ... } } }` does not
    walk the schema again at every level."""

    schema: GraphQLSchema
    fragments: Mapping[str, FragmentDefinitionNode]
    variables: Mapping[str, Any]
    counted: dict[tuple[int, tuple[int, ...]], int] = field(default_factory=dict)

    def value(self, node: FieldNode, answer: Any) -> int:
        """What `node` selects of its `answer` (an introspection object, a list of them, or
        None), its own 1 aside."""
        if answer is None or node.selection_set is None:
            return 0
        if isinstance(answer, list | ItemsView | ValuesView) or (
            isinstance(answer, tuple) and not _is_pair(answer)
        ):
            return sum(self.object(node.selection_set, item) for item in answer)
        return self.object(node.selection_set, answer)

    def object(self, selections: SelectionSetNode, answer: Any) -> int:
        key = (id(selections), _identity(answer))
        counted = self.counted.get(key)
        if counted is None:
            counted = self.counted[key] = self._count(selections, answer)
        return counted

    def _count(self, selections: SelectionSetNode, answer: Any) -> int:
        kind = _introspection_type(answer)
        total = 0
        for node in _fields(selections, self.fragments, frozenset()):
            definition = kind.fields.get(node.name.value)
            if definition is None:  # __typename
                total += 1
                continue
            arguments = _arguments(definition, node, self.variables)
            resolved = definition.resolve(answer, _info(self.schema), **arguments)
            total += 1 + self.value(node, resolved)
        return total


def _is_pair(answer: Any) -> bool:
    """A (name, definition) pair: how graphql-core's resolvers answer a field, an argument, an
    input field or an enum value."""
    return isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], str)


def _identity(answer: Any) -> tuple[int, ...]:
    # A pair is made anew at each call; what it holds is the schema's own.
    return (id(answer[1]),) if _is_pair(answer) else (id(answer),)


def _introspection_type(answer: Any) -> GraphQLObjectType:
    """The introspection type that answers for a schema element."""
    if isinstance(answer, GraphQLSchema):
        name = "__Schema"
    elif isinstance(answer, GraphQLDirective):
        name = "__Directive"
    elif _is_pair(answer) and isinstance(answer[1], GraphQLField):
        name = "__Field"
    elif _is_pair(answer) and isinstance(answer[1], GraphQLArgument | GraphQLInputField):
        name = "__InputValue"
    elif _is_pair(answer) and isinstance(answer[1], GraphQLEnumValue):
        name = "__EnumValue"
    else:
        name = "__Type"
    kind = introspection_types[name]
    assert isinstance(kind, GraphQLObjectType)
    return kind


def uncapped_lists(schema: GraphQLSchema, limits: QueryLimits) -> list[str]:
    """The schema coordinates of the lists of objects that nothing bounds: no size argument
    (`first`), no keys (`keyed_lists`), no cap (`limits.list_caps`). Each costs as one item
    whatever it answers; a schema served under a budget should have none."""
    objects = [
        named
        for named in schema.type_map.values()
        if isinstance(named, GraphQLObjectType) and not named.name.startswith("__")
    ]
    # A connection's lists (`edges`) are its page: the field that answers it has a size.
    pages = {
        get_named_type(definition.type)
        for named in objects
        for definition in named.fields.values()
        if "first" in definition.args
    }
    found = []
    for named in objects:
        for name, definition in named.fields.items():
            coordinate = f"{named.name}.{name}"
            if (
                _is_object_list(definition.type)
                and named not in pages
                and "first" not in definition.args
                and not (name in limits.keyed_lists and named is schema.query_type)
                and coordinate not in limits.list_caps
            ):
                found.append(coordinate)
    return found


def _is_object_list(kind: GraphQLType) -> bool:
    nullable = kind.of_type if isinstance(kind, GraphQLNonNull) else kind
    return is_list_type(nullable) and is_composite_type(get_named_type(nullable))


def actual_cost(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation_name: str | None,
    limits: QueryLimits,
    data: Mapping[str, Any] | None,
) -> int:
    """The cost of what the operation returned in `data`: `operation_cost`'s count, with each
    page (a field with `first`) counted once per item it returned instead of `first` times, each
    list of keys (`nodes`, `_entities`) once per object found, and each other list by its
    costliest item; a field that is null costs 1 (nothing below it was read), one absent from
    the answer (`@skip`, another type's fragment) nothing. Never above `operation_cost` of the
    same operation; no data, 0."""
    if data is None:
        return 0
    for definition in _operations(document, operation_name):
        root = schema.get_root_type(definition.operation)
        actual = _Actual(schema, _fragments(document), limits)
        return actual.cost(definition.selection_set, root, data)
    return 0


def _fragments(document: DocumentNode) -> dict[str, FragmentDefinitionNode]:
    return {
        definition.name.value: definition
        for definition in document.definitions
        if isinstance(definition, FragmentDefinitionNode)
    }


def _operations(
    document: DocumentNode, operation_name: str | None
) -> Iterator[OperationDefinitionNode]:
    """The operations of `document` named `operation_name`, or all of them without a name."""
    for definition in document.definitions:
        if isinstance(definition, OperationDefinitionNode) and (
            operation_name is None
            or (definition.name is not None and definition.name.value == operation_name)
        ):
            yield definition


_LEAF, _KEYED, _PAGE, _OTHER, _META = "leaf", "keyed", "page", "other", "meta"
# A selection set as `_Actual` reads it: the fields always answered and costing 1 each (leaves
# without a directive), and the rest, each with the type it is selected on.
_Shape = tuple[int, list[tuple[FieldNode, GraphQLNamedType | None]]]


@dataclass(frozen=True, slots=True)
class _Actual:
    """One count over one answer; each selection set's shape is worked out once (`_shape`), so
    a page of a hundred items costs a few steps each, not a visit to every field."""

    schema: GraphQLSchema
    fragments: Mapping[str, FragmentDefinitionNode]
    limits: QueryLimits
    shapes: dict[tuple[int, str | None], _Shape] = field(default_factory=dict)
    kinds: dict[int, tuple[str, GraphQLNamedType | None]] = field(default_factory=dict)
    constants: dict[tuple[int, str | None], int | None] = field(default_factory=dict)

    def cost(
        self,
        selections: SelectionSetNode | None,
        parent: GraphQLNamedType | None,
        value: Mapping[str, Any],
        skip: frozenset[str] = frozenset(),
    ) -> int:
        """What `selections` cost over the object `value`, the response keys in `skip` left out
        (a page's items, counted one by one)."""
        if selections is None:
            return 0
        leaves, others = self._shape(selections, parent)
        total = leaves
        for node, on in others:
            key = (node.alias or node.name).value
            if key in value and key not in skip:
                total += self._field(node, on, value[key])
        return total

    def _shape(self, selections: SelectionSetNode, parent: GraphQLNamedType | None) -> _Shape:
        key = (id(selections), getattr(parent, "name", None))
        shape = self.shapes.get(key)
        if shape is None:
            shape = self.shapes[key] = self._flatten(selections, parent, frozenset())
        return shape

    def _flatten(
        self, selections: SelectionSetNode, parent: GraphQLNamedType | None, spread: frozenset[str]
    ) -> _Shape:
        """`spread`: the fragments on the way here, so a cycle ends instead of recursing."""
        leaves, others = 0, []
        for selection in selections.selections:
            if isinstance(selection, FieldNode):
                if selection.selection_set is None and not selection.directives:
                    leaves += 1
                else:
                    others.append((selection, parent))
                continue
            if isinstance(selection, InlineFragmentNode):
                condition = selection.type_condition
                narrowed = self.schema.get_type(condition.name.value) if condition else parent
                inner = selection.selection_set
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = self.fragments.get(name)
                if fragment is None or name in spread:
                    continue
                narrowed = self.schema.get_type(fragment.type_condition.name.value)
                inner, spread = fragment.selection_set, spread | {name}
            else:
                continue
            if selection.directives or narrowed is not parent:
                # Answered or not by the object's type or a directive: each field is looked for.
                for node in _fields(inner, self.fragments, spread):
                    others.append((node, narrowed))
                continue
            more_leaves, more = self._flatten(inner, narrowed, spread)
            leaves, others = leaves + more_leaves, others + more
        return leaves, others

    def _constant(self, selections: SelectionSetNode, parent: GraphQLNamedType) -> int | None:
        """What `selections` cost over any object of `parent` that an answer holds, when that
        does not depend on the object: its fields are leaves, or objects that may not be null
        whose own selections cost a constant (no directive, no list, no other type's fragment);
        None otherwise."""
        key = (id(selections), parent.name)
        if key in self.constants:
            return self.constants[key]
        self.constants[key] = None  # a cycle of fragments is not constant
        leaves, others = self._shape(selections, parent)
        total: int | None = leaves
        for node, on in others:
            definition = getattr(parent, "fields", {}).get(node.name.value)
            inner = None
            if (
                on is parent
                and not node.directives
                and node.selection_set is not None
                and definition is not None
                and isinstance(definition.type, GraphQLNonNull)
                and isinstance(definition.type.of_type, GraphQLObjectType)
            ):
                inner = self._constant(node.selection_set, definition.type.of_type)
            if inner is None or total is None:
                total = None
                break
            total += 1 + inner
        self.constants[key] = total
        return total

    def _kind_of(self, node: FieldNode, parent: GraphQLNamedType | None) -> tuple[str, Any]:
        kind = self.kinds.get(id(node))
        if kind is None:
            kind = self.kinds[id(node)] = self._kind(node, parent)
        return kind

    def _each(self, node: FieldNode, parent: GraphQLNamedType | None, items: list[Any]) -> int:
        """`_field` of `node` over each item as a list of one (a page's items), summed: for a
        selection of constant cost, counted without a visit to each item."""
        how, named = self._kind_of(node, parent)
        constant = None
        if how is not _LEAF and named is not None and node.selection_set is not None:
            constant = self._constant(node.selection_set, named)
        if constant is None:
            return sum(self._field(node, parent, [item]) for item in items)
        if all(item.__class__ is dict for item in items):  # a list of objects, none null
            found = len(items)
        else:
            found = sum(1 for item in items for _ in _items([item]))
            if how is _OTHER:  # each item costs its costliest object, or nothing
                found = sum(1 for item in items if any(True for _ in _items([item])))
        return len(items) + constant * found

    def _field(self, node: FieldNode, parent: GraphQLNamedType | None, value: Any) -> int:
        if value is None:
            return 1
        how, named = self._kind_of(node, parent)
        if how is _META:
            return _answered(value)
        if how is _LEAF or named is None:
            return 1
        if how is _KEYED or (how is _PAGE and isinstance(value, list)):
            found = list(_items(value))
            reads = self._reads(node, parent, len(found)) if how is _PAGE else 0
            return 1 + sum(self.cost(node.selection_set, named, item) for item in found) + reads
        if how is _PAGE:
            return 1 + self._page(node, named, value) + self._reads(node, parent, _size(value))
        if isinstance(value, list):
            items = (self.cost(node.selection_set, named, item) for item in _items(value))
            return 1 + max(items, default=0)
        return 1 + self.cost(node.selection_set, named, value)

    def _kind(
        self, node: FieldNode, parent: GraphQLNamedType | None
    ) -> tuple[str, GraphQLNamedType | None]:
        """How a field counts: a leaf (or unknown), a list of keys, a page, or any other."""
        name = node.name.value
        if name in _META_FIELDS and parent is self.schema.query_type:
            return _META, None
        definition = getattr(parent, "fields", {}).get(name)
        if definition is None or node.selection_set is None:
            return _LEAF, None
        named = get_named_type(definition.type)
        if name in self.limits.keyed_lists and parent is self.schema.query_type:
            return _KEYED, named
        if "first" in definition.args:
            return _PAGE, named
        if f"{getattr(parent, 'name', '')}.{name}" in self.limits.list_caps:
            return _KEYED, named  # each item it holds counted
        return _OTHER, named

    def _reads(self, node: FieldNode, parent: GraphQLNamedType | None, returned: int) -> int:
        """What a page that returned `returned` items read beyond them, as `page_reads` counts
        a page of that size (of one at least: an empty page asked every partition too)."""
        reads = self.limits.page_reads.get(f"{getattr(parent, 'name', '')}.{node.name.value}")
        return 0 if reads is None else reads(max(1, returned))

    def _inner(self, node: FieldNode, named: GraphQLNamedType, value: Any) -> int:
        return self.cost(node.selection_set, named, value) if value is not None else 0

    def _page(self, node: FieldNode, named: GraphQLNamedType, page: Mapping[str, Any]) -> int:
        """A connection: what it selects, counted as if each item it returned had been a page
        of one (`operation_cost` counts `first` such pages): what is not a list of items
        (`pageInfo`) once per item, and each list of items (`edges`) by its item."""
        lists = frozenset(key for key, value in page.items() if isinstance(value, list))
        if not lists:
            return self._inner(node, named, page)
        size = max(len(page[key]) for key in lists)
        total = size * self.cost(node.selection_set, named, page, skip=lists)
        _, others = self._shape(node.selection_set, named)  # type: ignore[arg-type]
        for field_node, on in others:
            key = (field_node.alias or field_node.name).value
            if key in lists:
                total += self._each(field_node, on, page[key])
        return total


def _size(page: Mapping[str, Any]) -> int:
    """The items a connection returned: its longest list (`edges`)."""
    return max((len(value) for value in page.values() if isinstance(value, list)), default=0)


def _answered(value: Any) -> int:
    """An introspection field's actual cost, counted over its answer as `_Introspected`
    counts over the schema: the field 1, and each field of each object in it."""
    if isinstance(value, dict):
        return 1 + sum(_answered(inner) for inner in value.values())
    if isinstance(value, list):
        return 1 + sum(_answered(item) - 1 for item in value if isinstance(item, dict))
    return 1


def _fields(
    selections: SelectionSetNode,
    fragments: Mapping[str, FragmentDefinitionNode],
    spread: frozenset[str],
) -> Iterator[FieldNode]:
    """The fields of a selection set, through its fragments."""
    for selection in selections.selections:
        if isinstance(selection, FieldNode):
            yield selection
        elif isinstance(selection, InlineFragmentNode):
            yield from _fields(selection.selection_set, fragments, spread)
        elif isinstance(selection, FragmentSpreadNode):
            name = selection.name.value
            fragment = fragments.get(name)
            if fragment is not None and name not in spread:
                yield from _fields(fragment.selection_set, fragments, spread | {name})


def _items(value: list[Any]) -> Iterator[Any]:
    """The objects of a list, through lists of lists, nulls left out."""
    for item in value:
        if isinstance(item, list):
            yield from _items(item)
        elif item is not None:
            yield item
