"""A shorter path through graphql-core for leaves that are plain attributes.

Most of a list response is leaves: a payment's id, status, amount... Strawberry resolves each
through a wrapper that builds an info object and calls `getattr`, and graphql-core then checks
for awaitables and completes the value. For a leaf that Strawberry itself marks as basic (no
resolver, no arguments, no field extensions), the answer is exactly
`type.coerce_output_value(getattr(source, python_name))`; this execution context computes that
directly. Anything else, and any leaf whose value is null where it must not be or fails to
coerce, takes graphql-core's ordinary path, which reports the error as it always does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphql import (
    GraphQLEnumType,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    Undefined,
)
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

_BACKREF = "strawberry-definition"


@dataclass(frozen=True, slots=True)
class _Leaf:
    attribute: str
    leaf_type: GraphQLScalarType | GraphQLEnumType
    non_null: bool


# Per parent type (kept alive with its plans, so its id is never reused): field name -> plan.
_PLANS: dict[int, tuple[GraphQLObjectType, dict[str, _Leaf | None]]] = {}


def _leaf_plan(parent_type: GraphQLObjectType, field_name: str) -> _Leaf | None:
    entry = _PLANS.get(id(parent_type))
    if entry is None:
        entry = _PLANS[id(parent_type)] = (parent_type, {})
    plans = entry[1]
    if field_name not in plans:
        plans[field_name] = _plan(parent_type, field_name)
    return plans[field_name]


def _plan(parent_type: GraphQLObjectType, field_name: str) -> _Leaf | None:
    field = parent_type.fields.get(field_name)
    if field is None or field.args or not getattr(field.resolve, "_is_default", False):
        return None
    definition = field.extensions.get(_BACKREF)
    attribute = getattr(definition, "python_name", None)
    if attribute is None:
        return None
    non_null = isinstance(field.type, GraphQLNonNull)
    leaf_type = field.type.of_type if non_null else field.type
    if not isinstance(leaf_type, GraphQLScalarType | GraphQLEnumType):
        return None
    return _Leaf(attribute, leaf_type, non_null)


class PaymentsExecutionContext(StrawberryGraphQLCoreExecutionContext):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A middleware (a schema extension with a `resolve` hook) must see every field.
        manager = self.middleware_manager
        self._shortcut = manager is None or not manager.middlewares

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
            leaf = _leaf_plan(parent_type, node.name.value)
        if leaf is not None:
            value = getattr(source, leaf.attribute, None)
            if value is None:
                if not leaf.non_null:
                    return None
            else:
                try:
                    coerced = leaf.leaf_type.coerce_output_value(value)
                except Exception:  # the ordinary path reports it, with its path
                    coerced = None
                if coerced is not None and coerced is not Undefined:
                    return coerced
        return super().execute_field(
            parent_type, source, field_details_list, path, position_context
        )
