"""Schema evolution (SPEC §19): what a change of the schema does to released clients.

    schema_changes(old, new)     every change, as graphql-core classifies it
                                 (`find_schema_changes`: breaking, dangerous, safe), and the
                                 deprecations it adds or lifts (safe), each with the schema
                                 coordinate it touches where it has one
    broken_documents(new, docs)  the trusted documents that no longer validate against `new`
    refusals(old, new, docs)     the breaking changes a deliberate change of the snapshot may not
                                 make: any, unless what it removes or changes was `@deprecated` in
                                 `old` and no document uses it (`engine.usage`)

`loc-payments schema diff` prints the first two; `loc-payments schema accept` (`make schema`)
and the test of the snapshot's history apply the third.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from graphql import (
    DocumentNode,
    GraphQLEnumType,
    GraphQLError,
    GraphQLInputObjectType,
    GraphQLInterfaceType,
    GraphQLObjectType,
    GraphQLSchema,
    build_schema,
    parse,
    validate,
)
from graphql.utilities import (
    BreakingChangeType,
    DangerousChangeType,
    find_schema_changes,
    resolve_schema_coordinate,
)

from engine import coordinates

__all__ = [
    "Change",
    "Document",
    "RefusedChange",
    "broken_documents",
    "parse_sdl",
    "refusals",
    "schema_changes",
]

Level = Literal["breaking", "dangerous", "safe"]
# The first schema coordinate a description of graphql-core's names: `Type.field`,
# `Type.field(argument:)`, `Enum.VALUE`; else the type it begins with.
_COORDINATE = re.compile(r"\b([A-Za-z_]\w*\.[A-Za-z_]\w*(?:\([A-Za-z_]\w*:\))?)")
_OPERATION_NAME = re.compile(r"\b(?:query|mutation|subscription)\s+([A-Za-z_]\w*)")
_LEADING_TYPE = re.compile(r"^(?:Standard scalar )?([A-Za-z_]\w*) ")


@dataclass(frozen=True, slots=True)
class Change:
    level: Level
    kind: str  # graphql-core's change type's name, or DEPRECATION_ADDED / DEPRECATION_REMOVED
    description: str
    coordinate: str | None

    def __str__(self) -> str:
        return f"{self.level:<9} {self.kind}: {self.description}"


@dataclass(frozen=True, slots=True)
class RefusedChange:
    change: Change
    why: str

    def __str__(self) -> str:
        return f"refused: {self.change.description} ({self.why})"


def parse_sdl(text: str) -> GraphQLSchema:
    """A schema from SDL; GraphQLError or TypeError (graphql-core's) when it is not one."""
    return build_schema(text)


def schema_changes(old: GraphQLSchema, new: GraphQLSchema) -> list[Change]:
    """Every change from `old` to `new`: breaking first, then dangerous, then safe."""
    found = []
    for change in find_schema_changes(old, new):
        if isinstance(change.type, BreakingChangeType):
            level: Level = "breaking"
        elif isinstance(change.type, DangerousChangeType):
            level = "dangerous"
        else:
            level = "safe"
        found.append(
            Change(level, change.type.name, change.description, _coordinate(change.description))
        )
    found += _deprecations(old, new)
    order = {"breaking": 0, "dangerous": 1, "safe": 2}
    return sorted(found, key=lambda change: order[change.level])


def _coordinate(description: str) -> str | None:
    found = _COORDINATE.search(description) or _LEADING_TYPE.search(description)
    return found.group(1) if found else None


def _deprecations(old: GraphQLSchema, new: GraphQLSchema) -> list[Change]:
    """Deprecations added or lifted on what both schemas have (graphql-core lists none)."""
    before, after = _deprecated(old), _deprecated(new)
    both = _elements(old) & _elements(new)
    changes = [
        Change("safe", "DEPRECATION_ADDED", f"{name} was deprecated: {after[name]}", name)
        for name in sorted(after.keys() - before.keys())
        if name in both
    ]
    changes += [
        Change("safe", "DEPRECATION_REMOVED", f"{name} is no longer deprecated.", name)
        for name in sorted(before.keys() - after.keys())
        if name in both
    ]
    return changes


def _elements(schema: GraphQLSchema) -> set[str]:
    return set(_walk(schema))


def _deprecated(schema: GraphQLSchema) -> dict[str, str]:
    return {name: reason for name, reason in _walk(schema).items() if reason is not None}


def _walk(schema: GraphQLSchema) -> dict[str, str | None]:
    """Each deprecatable element's coordinate and its deprecation reason (None: not)."""
    found: dict[str, str | None] = {}
    for named in schema.type_map.values():
        if named.name.startswith("__"):
            continue
        if isinstance(named, GraphQLObjectType | GraphQLInterfaceType):
            for name, field in named.fields.items():
                found[f"{named.name}.{name}"] = field.deprecation_reason
                for argument_name, argument in field.args.items():
                    coordinate = f"{named.name}.{name}({argument_name}:)"
                    found[coordinate] = argument.deprecation_reason
        elif isinstance(named, GraphQLInputObjectType):
            for name, input_field in named.fields.items():
                found[f"{named.name}.{name}"] = input_field.deprecation_reason
        elif isinstance(named, GraphQLEnumType):
            for name, value in named.values.items():
                found[f"{named.name}.{name}"] = value.deprecation_reason
    return found


@dataclass(frozen=True, slots=True)
class Document:
    """A trusted document, as a manifest names it."""

    source: str
    id: str
    name: str | None
    text: str

    @property
    def label(self) -> str:
        """Its name in the manifest, else its operation's, with its id and manifest."""
        found = _OPERATION_NAME.search(self.text)
        name = self.name or (found.group(1) if found else "an unnamed operation")
        return f"{name} ({self.id}, {self.source})"


def broken_documents(
    new: GraphQLSchema, documents: Iterable[Document]
) -> list[tuple[Document, GraphQLError]]:
    """The documents that do not validate against `new`, each with its first error."""
    broken = []
    for document in documents:
        errors = validate(new, parse(document.text))
        if errors:
            broken.append((document, errors[0]))
    return broken


def refusals(
    old: GraphQLSchema, new: GraphQLSchema, documents: Sequence[Document]
) -> list[RefusedChange]:
    """The breaking changes from `old` to `new` that a deliberate change may not make."""
    used: dict[str, list[Document]] = {}
    for document in documents:
        parsed: DocumentNode = parse(document.text)
        if validate(old, parsed):
            continue  # it never ran against `old`: nothing a change breaks
        for coordinate in coordinates(old, parsed):
            used.setdefault(coordinate, []).append(document)
    refused = []
    for change in schema_changes(old, new):
        if change.level != "breaking":
            continue
        touched = change.coordinate
        resolved = resolve_schema_coordinate(old, touched) if touched else None
        reason = getattr(
            getattr(resolved, "field_argument", None)
            or getattr(resolved, "enum_value", None)
            or getattr(resolved, "field", None)
            or getattr(resolved, "input_field", None),
            "deprecation_reason",
            None,
        )
        if reason is None:
            refused.append(RefusedChange(change, f"{touched or 'it'} was not @deprecated first"))
        elif touched in used:
            users = ", ".join(document.label for document in used[touched])
            refused.append(RefusedChange(change, f"{touched} is still used by {users}"))
    return refused
