"""What the compiler of operations (`engine.compiler`) needs of Strawberry that Strawberry does not
offer as public API, in one place, checked against the version it was tested with at start.

`graphql_schema` (the graphql-core schema a Strawberry schema built), `plain_attribute` (a field
Strawberry answers with `getattr` and nothing else), `direct_resolver` (a field of scalar or enum
arguments, its function called as Strawberry's wrapper would call it, without the wrapper's
conversion of each argument), `enum_names` (each member's GraphQL name) and `describe_values` (a
description on each value of an enum declared outside the schema). Everything else the compiler
reads is graphql-core's. `check_version` refuses a Strawberry this module was not tested with:
these are Strawberry's internals and may move in any release.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from enum import Enum
from importlib.metadata import version
from typing import Any, TypeVar

import strawberry
from graphql import (
    GraphQLArgument,
    GraphQLEnumType,
    GraphQLField,
    GraphQLList,
    GraphQLNonNull,
    GraphQLResolveInfo,
    GraphQLScalarType,
    GraphQLSchema,
)
from strawberry.relay.types import GlobalID
from strawberry.types.base import StrawberryList, StrawberryMaybe, StrawberryOptional
from strawberry.types.enum import has_enum_definition
from strawberry.types.field import StrawberryField

from engine.errors import UntestedStrawberry

__all__ = [
    "TESTED_VERSIONS",
    "check_version",
    "describe_values",
    "direct_resolver",
    "enum_names",
    "graphql_schema",
    "plain_attribute",
    "resolve_info",
]

E = TypeVar("E", bound=Enum)

# The releases this module was tested with (the lock file's).
TESTED_VERSIONS = frozenset({"0.341.2"})
_BACKREF = "strawberry-definition"


def check_version(installed: str | None = None) -> None:
    installed = installed or version("strawberry-graphql")
    if installed not in TESTED_VERSIONS:
        raise UntestedStrawberry(
            f"strawberry-graphql {installed} is not one engine/strawberry_adapter.py was tested "
            f"with ({', '.join(sorted(TESTED_VERSIONS))}): check the names it reads, then add it"
        )


def graphql_schema(schema: strawberry.Schema) -> GraphQLSchema:
    return schema._schema


def resolve_info(info: strawberry.Info) -> GraphQLResolveInfo[Any]:
    """graphql-core's info behind Strawberry's, for what only it has (`async_helpers`)."""
    return info._raw_info


def _definition(graphql_field: GraphQLField) -> StrawberryField | None:
    definition = graphql_field.extensions.get(_BACKREF)
    return definition if isinstance(definition, StrawberryField) else None


def plain_attribute(schema: strawberry.Schema, graphql_field: GraphQLField) -> str | None:
    """The attribute `graphql_field` reads, when Strawberry answers it with the attribute as it
    is (its default resolver is `getattr`)."""
    definition = _definition(graphql_field)
    if (
        definition is None
        or graphql_field.args
        or not getattr(graphql_field.resolve, "_is_default", False)
        or not definition.is_basic_field
        or schema.config.default_resolver is not getattr
    ):
        return None
    return definition.python_name


DirectResolver = Callable[..., Any]


def direct_resolver(
    schema: strawberry.Schema, graphql_field: GraphQLField
) -> DirectResolver | None:
    """`resolve(source, info, **arguments)` calling the field's function as Strawberry's wrapper
    would, for a field whose arguments Strawberry passes on as graphql-core coerced them (lists
    copied); None for any other field (input objects, `Maybe`, `GlobalID`, field extensions,
    exception handlers, static or class methods), which keeps Strawberry's wrapper."""
    field = _definition(graphql_field)
    if field is None or field.base_resolver is None or field.extensions:
        return None
    if schema.schema_converter._exception_handler_specs:
        return None
    resolver = field.base_resolver
    names: dict[str, str] = {}
    lists: set[str] = set()
    for argument in field.arguments:
        graphql_name = schema.config.name_converter.from_argument(argument)
        graphql_argument = graphql_field.args.get(graphql_name)
        if graphql_argument is None or not _leaf_argument(graphql_argument, argument.type):
            return None
        names[graphql_name] = argument.python_name
        if isinstance(_without_non_null(graphql_argument.type), GraphQLList):
            lists.add(graphql_name)
    if isinstance(resolver.wrapped_func, staticmethod | classmethod):
        return None
    function: Callable[..., Any] = resolver.wrapped_func
    takes_self = resolver.self_parameter is not None
    info_name = resolver.info_parameter.name if resolver.info_parameter else None
    # `root` and `strawberry.Parent` parameters both get the source.
    source_names = [
        parameter.name
        for parameter in (resolver.root_parameter, resolver.parent_parameter)
        if parameter is not None
    ]
    info_class = schema.config.info_class

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


@functools.lru_cache(maxsize=256)
def enum_names(enum_type: GraphQLEnumType) -> tuple[type, dict[Any, str]] | None:
    """A Strawberry enum's Python enum, and each of its members' GraphQL name (the first name
    with its value, as Strawberry's own loop finds it); None for an enum Strawberry did not
    make. Worked out once per enum (each of a new document's enum fields asks; the dict is
    shared: read it only)."""
    members: Any = getattr(enum_type, "wrapped_cls", None)
    if members is None:
        return None
    names: dict[Any, str] = {}
    for name, enum_value in enum_type.values.items():
        for member in members:
            if member.value == enum_value.value:
                names.setdefault(member, name)
    return members, names


def describe_values(enum: type[E], descriptions: Mapping[E, str]) -> None:
    """Each value of the Strawberry enum `enum` (made by `strawberry.enum`) described by
    `descriptions`, which must hold every member (KeyError otherwise, at import)."""
    assert has_enum_definition(enum)
    for value in enum.__strawberry_definition__.values:
        value.description = descriptions[enum[value.name]]  # type: ignore[index]


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
