"""The schema coordinates an operation uses (SPEC §19): `Type.field` for every field it selects,
`Type.field(argument:)` for every argument it passes, `Enum.VALUE` for every enum value it
writes in its text, as the GraphQL schema-coordinates RFC names them. Introspection fields and
`__typename` are not the schema's. Computed from the document alone, once per operation
(`engine.operations` keeps it beside the plan), for the field-usage metric and for the checks of
`schema.evolution` (which committed document a change would break)."""

from __future__ import annotations

from graphql import (
    ArgumentNode,
    DocumentNode,
    EnumValueNode,
    FieldNode,
    GraphQLEnumType,
    GraphQLSchema,
    OperationDefinitionNode,
    TypeInfo,
    TypeInfoVisitor,
    Visitor,
    get_named_type,
    visit,
)

__all__ = ["coordinates"]


class _Used(Visitor):
    def __init__(self, type_info: TypeInfo) -> None:
        super().__init__()
        self.type_info = type_info
        self.found: set[str] = set()

    def enter_field(self, node: FieldNode, *_: object) -> None:
        parent = self.type_info.get_parent_type()
        name = node.name.value
        if parent is not None and not name.startswith("__"):
            self.found.add(f"{parent.name}.{name}")

    def enter_argument(
        self,
        node: ArgumentNode,
        _key: object,
        _parent: object,
        _path: object,
        ancestors: list[object],
    ) -> None:
        # A field's argument (a directive's has no field): its field is the nearest FieldNode.
        parent = self.type_info.get_parent_type()
        field = ancestors[-1] if ancestors else None
        if parent is not None and isinstance(field, FieldNode) and self.type_info.get_field_def():
            self.found.add(f"{parent.name}.{field.name.value}({node.name.value}:)")

    def enter_enum_value(self, node: EnumValueNode, *_: object) -> None:
        named = get_named_type(self.type_info.get_input_type())
        if isinstance(named, GraphQLEnumType):
            self.found.add(f"{named.name}.{node.value}")


def coordinates(
    schema: GraphQLSchema, document: DocumentNode, operation_name: str | None = None
) -> frozenset[str]:
    """The coordinates the operation `operation_name` (every operation, when None) of a valid
    `document` uses, with the fragments it spreads (all of the document's fragments)."""
    type_info = TypeInfo(schema)
    used = _Used(type_info)
    definitions = [
        definition
        for definition in document.definitions
        if not isinstance(definition, OperationDefinitionNode)
        or operation_name is None
        or (definition.name is not None and definition.name.value == operation_name)
    ]
    visit(DocumentNode(definitions=tuple(definitions)), TypeInfoVisitor(type_info, used))
    return frozenset(used.found)
