"""Documents as clients write them, made from those `hypothesis-graphql` draws (which have no
variables and no named fragments): each argument lifted into a variable whose default is its
value, and selection sets moved into named fragments, the arguments that name stored things
(users, loans, payments, global ids, cursors, page sizes, event types) first given values a
store holds, so that a document reads something. `lift` answers the document, the variables'
values (as a request would send them) and the document with its literals left in place."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from graphql import (
    ArgumentNode,
    ConstValueNode,
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLInputType,
    GraphQLList,
    GraphQLNamedType,
    GraphQLNonNull,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    ListTypeNode,
    ListValueNode,
    NamedTypeNode,
    NameNode,
    NonNullTypeNode,
    NullValueNode,
    OperationDefinitionNode,
    SelectionNode,
    SelectionSetNode,
    StringValueNode,
    TypeNode,
    ValueNode,
    VariableDefinitionNode,
    VariableNode,
    get_named_type,
    print_ast,
    value_from_ast_untyped,
)
from hypothesis import strategies as st

__all__ = ["Lifted", "Stored", "lift"]


@dataclass(frozen=True, slots=True)
class Stored:
    """What the store holds, by the argument names that look it up."""

    users: Sequence[str]
    loans: Sequence[str]
    payments: Sequence[str]
    confirmations: Sequence[str]
    node_ids: Sequence[str]
    event_types: Sequence[str]


@dataclass(frozen=True, slots=True)
class Lifted:
    text: str  # arguments as variables with defaults, selections in named fragments
    values: dict[str, Any]  # each variable's value, as a request sends it
    literal: str  # the same document with its arguments in place


@dataclass(slots=True)
class _Lifting:
    schema: GraphQLSchema
    stored: Stored
    draw: Callable[[st.SearchStrategy[Any]], Any]
    variables: list[VariableDefinitionNode] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    fragments: list[FragmentDefinitionNode] = field(default_factory=list)

    def selections(
        self, selections: SelectionSetNode, parent: GraphQLNamedType, *, lift: bool
    ) -> SelectionSetNode:
        inner: list[SelectionNode] = []
        for selection in selections.selections:
            if isinstance(selection, FieldNode):
                inner.append(self.field(selection, parent, lift=lift))
            elif isinstance(selection, InlineFragmentNode):
                condition = selection.type_condition
                narrowed = self.schema.get_type(condition.name.value) if condition else parent
                assert narrowed is not None
                inner.append(
                    InlineFragmentNode(
                        type_condition=condition,
                        directives=selection.directives,
                        selection_set=self.selections(selection.selection_set, narrowed, lift=lift),
                    )
                )
            else:
                inner.append(selection)
        made = SelectionSetNode(selections=tuple(inner))
        if not lift or not self.draw(st.booleans()):
            return made
        name = f"F{len(self.fragments)}"
        self.fragments.append(
            FragmentDefinitionNode(
                name=NameNode(value=name),
                type_condition=NamedTypeNode(name=NameNode(value=parent.name)),
                selection_set=made,
                directives=(),
            )
        )
        return SelectionSetNode(
            selections=(FragmentSpreadNode(name=NameNode(value=name), directives=()),)
        )

    def field(self, node: FieldNode, parent: GraphQLNamedType, *, lift: bool) -> FieldNode:
        definition = getattr(parent, "fields", {}).get(node.name.value)
        if definition is None:  # __typename
            return node
        arguments = []
        for argument in node.arguments or ():
            kind = definition.args[argument.name.value].type
            value = argument.value
            if lift:
                name = f"v{len(self.variables)}"
                self.variables.append(
                    VariableDefinitionNode(
                        variable=VariableNode(name=NameNode(value=name)),
                        type=_type_node(kind),
                        default_value=cast(ConstValueNode, value),  # drawn literals
                        directives=(),
                    )
                )
                self.values[name] = value_from_ast_untyped(value)
                value = VariableNode(name=NameNode(value=name))
            arguments.append(ArgumentNode(name=argument.name, value=value))
        selections = node.selection_set
        if selections is not None:
            named = get_named_type(definition.type)
            selections = self.selections(selections, named, lift=lift)
        return FieldNode(
            alias=node.alias,
            name=node.name,
            arguments=tuple(arguments),
            directives=node.directives,
            selection_set=selections,
        )

    def stored_values(self, node: FieldNode, parent: GraphQLNamedType) -> FieldNode:
        """`node` with the arguments that name stored things drawn from what is stored."""
        definition = getattr(parent, "fields", {}).get(node.name.value)
        if definition is None:
            return node
        arguments = tuple(
            ArgumentNode(name=argument.name, value=self.stored_value(argument))
            for argument in node.arguments or ()
        )
        selections = node.selection_set
        if selections is not None:
            selections = self.stored_selections(selections, get_named_type(definition.type))
        return FieldNode(
            alias=node.alias,
            name=node.name,
            arguments=arguments,
            directives=node.directives,
            selection_set=selections,
        )

    def stored_selections(
        self, selections: SelectionSetNode, parent: GraphQLNamedType
    ) -> SelectionSetNode:
        inner: list[SelectionNode] = []
        for selection in selections.selections:
            if isinstance(selection, FieldNode):
                inner.append(self.stored_values(selection, parent))
            elif isinstance(selection, InlineFragmentNode):
                condition = selection.type_condition
                narrowed = self.schema.get_type(condition.name.value) if condition else parent
                assert narrowed is not None
                inner.append(
                    InlineFragmentNode(
                        type_condition=condition,
                        directives=selection.directives,
                        selection_set=self.stored_selections(selection.selection_set, narrowed),
                    )
                )
            else:
                inner.append(selection)
        return SelectionSetNode(selections=tuple(inner))

    def stored_value(self, argument: ArgumentNode) -> ValueNode:
        stored, draw, value = self.stored, self.draw, argument.value
        strings: Mapping[str, Sequence[str]] = {
            "userId": stored.users,
            "loanId": stored.loans,
            "paymentId": stored.payments,
            "confirmationId": stored.confirmations,
            "id": stored.node_ids,
        }
        name = argument.name.value
        if name in strings:
            return StringValueNode(value=draw(st.sampled_from(strings[name])))
        if name == "ids":
            ids = draw(st.lists(st.sampled_from(stored.node_ids), min_size=1, max_size=20))
            return ListValueNode(values=tuple(StringValueNode(value=i) for i in ids))
        if name == "types" and not isinstance(value, NullValueNode):
            types = draw(st.lists(st.sampled_from(stored.event_types), min_size=1, unique=True))
            return ListValueNode(values=tuple(StringValueNode(value=t) for t in types))
        if name in ("first", "last") and draw(st.integers(0, 3)):
            # Mostly a size a page takes; now and then the drawn one (0, negative, too large).
            return IntValueNode(value=str(draw(st.integers(1, 100))))
        if name in ("after", "before"):
            return NullValueNode()
        return value


def _type_node(kind: GraphQLInputType) -> TypeNode:
    if isinstance(kind, GraphQLNonNull):
        inner = _type_node(kind.of_type)
        assert isinstance(inner, NamedTypeNode | ListTypeNode)
        return NonNullTypeNode(type=inner)
    if isinstance(kind, GraphQLList):
        return ListTypeNode(type=_type_node(kind.of_type))
    return NamedTypeNode(name=NameNode(value=kind.name))


def lift(
    schema: GraphQLSchema,
    document: DocumentNode,
    stored: Stored,
    draw: Callable[[st.SearchStrategy[Any]], Any],
) -> Lifted:
    """The document's operation (a query) lifted, with its values drawn as the module says."""
    [operation] = document.definitions
    assert isinstance(operation, OperationDefinitionNode)
    root = schema.query_type
    assert root is not None
    lifting = _Lifting(schema, stored, draw)
    selections = lifting.stored_selections(operation.selection_set, root)
    literal = DocumentNode(
        definitions=(
            OperationDefinitionNode(
                operation=operation.operation,
                variable_definitions=(),
                directives=(),
                selection_set=selections,
            ),
        )
    )
    lifted = lifting.selections(selections, root, lift=True)
    text = DocumentNode(
        definitions=(
            OperationDefinitionNode(
                operation=operation.operation,
                variable_definitions=tuple(lifting.variables),
                directives=(),
                selection_set=lifted,
            ),
            *lifting.fragments,
        )
    )
    return Lifted(print_ast(text), lifting.values, print_ast(literal))
