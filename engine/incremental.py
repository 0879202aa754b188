"""Incremental delivery (`@defer`, `@stream`): the directives a schema serves, the rule graphql-core
leaves to execution, and the two formats of the parts.

An answer delivered incrementally is a first payload and then subsequent ones, `hasNext` false on
the last. The engine makes them in graphql-js 17's format (alpha 9, graphql-core 3.3's own:
`pending: [{id, path, label}]`, `incremental: [{id, data | items, subPath}]`, `completed: [{id,
errors}]`); `Defer20220824` rewrites them into the earlier one of Apollo Router and graphql-js 17
alpha 2 (`incremental: [{data | items, path, label, errors}]`). `Merged` applies either format's
parts to the first payload's data: what a client ends with.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from graphql import (
    DirectiveNode,
    GraphQLArgument,
    GraphQLBoolean,
    GraphQLDirective,
    GraphQLError,
    GraphQLInt,
    GraphQLNonNull,
    GraphQLString,
    IntValueNode,
    ValidationRule,
)
from graphql.language import DirectiveLocation

__all__ = [
    "DEFER",
    "DIRECTIVE_NAMES",
    "INCREMENTAL_DIRECTIVES",
    "STREAM",
    "Defer20220824",
    "Merged",
    "StreamInitialCountRule",
]

DEFER = GraphQLDirective(
    name="defer",
    description=(
        "Delivers this fragment's fields after the rest of the answer, in a later part of a"
        " multipart/mixed response (or a later `next` over WebSocket), when `if` is true."
        " Not on a mutation's or a subscription's root fields."
    ),
    locations=[DirectiveLocation.FRAGMENT_SPREAD, DirectiveLocation.INLINE_FRAGMENT],
    args={
        "if": GraphQLArgument(
            GraphQLNonNull(GraphQLBoolean),
            description="Deferred when true; false gives exactly the answer without it.",
            default_value=True,
        ),
        "label": GraphQLArgument(
            GraphQLString,
            description="Names the part that carries the fragment; unique in the document.",
        ),
    },
)
STREAM = GraphQLDirective(
    name="stream",
    description=(
        "Delivers this list's first `initialCount` items with the rest of the answer and the"
        " others in later parts, when `if` is true. On list fields only (a connection's"
        " `edges` included), not on a mutation's or a subscription's root fields."
    ),
    locations=[DirectiveLocation.FIELD],
    args={
        "if": GraphQLArgument(
            GraphQLNonNull(GraphQLBoolean),
            description="Streamed when true; false gives exactly the answer without it.",
            default_value=True,
        ),
        "label": GraphQLArgument(
            GraphQLString,
            description="Names the parts that carry the items; unique in the document.",
        ),
        "initialCount": GraphQLArgument(
            GraphQLInt,
            description="How many items come with the rest of the answer; not negative.",
            default_value=0,
        ),
    },
)
INCREMENTAL_DIRECTIVES = (DEFER, STREAM)
DIRECTIVE_NAMES = frozenset(directive.name for directive in INCREMENTAL_DIRECTIVES)


class StreamInitialCountRule(ValidationRule):
    """A negative `initialCount` written in the document is a validation error (graphql-core
    finds it only as it executes, a field error). A variable's value is checked as it runs."""

    def enter_directive(self, node: DirectiveNode, *_: object) -> None:
        if node.name.value != STREAM.name:
            return
        for argument in node.arguments or ():
            value = argument.value
            negative = isinstance(value, IntValueNode) and int(value.value) < 0
            if argument.name.value == "initialCount" and negative:
                self.report_error(
                    GraphQLError("@stream's initialCount must not be negative.", argument)
                )


Path = list[str | int]


class Merged:
    """The data a client holds after the parts so far: `apply` each subsequent payload, in
    graphql-js 17's format or the 2022-08-24 one. It holds copies: the payloads, which may not
    be written out yet, are left as they are."""

    def __init__(self, initial: dict[str, Any]) -> None:
        self.data: Any = copy.deepcopy(initial.get("data"))
        self.errors: list[Any] = list(initial.get("errors") or ())
        self.pending: dict[str, dict[str, Any]] = {}
        self.add_pending(initial)

    def add_pending(self, payload: dict[str, Any]) -> None:
        for pending in payload.get("pending") or ():
            self.pending[pending["id"]] = pending

    def apply(self, payload: dict[str, Any]) -> None:
        self.add_pending(payload)
        for entry in payload.get("incremental") or ():
            self.errors += entry.get("errors") or ()
            if "id" in entry:
                path = [*self.pending[entry["id"]]["path"], *entry.get("subPath", ())]
            else:
                path = list(entry["path"])
            if "items" in entry:
                if entry["items"] is None:
                    continue
                if "id" not in entry:  # 2022-08-24: the path names the first item's index
                    path = path[:-1]
                target = self.at(path)
                if isinstance(target, list):
                    target.extend(copy.deepcopy(entry["items"]))
            elif entry.get("data") is not None:
                self._merge(path, copy.deepcopy(entry["data"]))
        for completed in payload.get("completed") or ():
            self.errors += completed.get("errors") or ()

    def at(self, path: Path) -> Any:
        value = self.data
        for key in path:
            try:
                value = value[key]
            except (KeyError, IndexError, TypeError):  # nulled above the part
                return None
        return value

    def _merge(self, path: Path, data: dict[str, Any]) -> None:
        target = self.at(path)
        if isinstance(target, dict):
            _deep_merge(target, data)


def _deep_merge(target: dict[str, Any], data: dict[str, Any]) -> None:
    for key, value in data.items():
        found = target.get(key)
        if isinstance(found, dict) and isinstance(value, dict):
            _deep_merge(found, value)
        elif isinstance(found, list) and isinstance(value, list) and len(found) == len(value):
            for index, (old, new) in enumerate(zip(found, value, strict=True)):
                if isinstance(old, dict) and isinstance(new, dict):
                    _deep_merge(old, new)
                else:
                    found[index] = new
        else:
            target[key] = value


class Defer20220824:
    """graphql-js 17's payloads (alpha 9) rewritten, one by one, into the 2022-08-24 format:
    each part names its path and label, a streamed part the index of its first item, and a
    deferred fragment or stream that failed is `data: null` / `items: null` with its errors."""

    def __init__(self) -> None:
        self._merged: Merged | None = None

    def rewrite(self, payload: dict[str, Any]) -> dict[str, Any]:
        merged = self._merged
        if merged is None:  # the first payload
            self._merged = Merged(payload)
            return {key: value for key, value in payload.items() if key != "pending"}
        merged.add_pending(payload)
        incremental = list(self._parts(merged, payload))
        merged.apply(payload)
        rewritten: dict[str, Any] = {}
        if incremental:
            rewritten["incremental"] = incremental
        rewritten["hasNext"] = payload["hasNext"]
        if "extensions" in payload:
            rewritten["extensions"] = payload["extensions"]
        return rewritten

    @staticmethod
    def _parts(merged: Merged, payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
        for entry in payload.get("incremental") or ():
            pending = merged.pending[entry["id"]]
            path = [*pending["path"], *entry.get("subPath", ())]
            if "items" in entry:
                listed = merged.at(pending["path"])
                part: dict[str, Any] = {
                    "items": entry["items"],
                    "path": [*path, len(listed) if isinstance(listed, list) else 0],
                }
            else:
                part = {"data": entry["data"], "path": path}
            yield _labelled(part, pending, entry.get("errors"))
        for completed in payload.get("completed") or ():
            if completed.get("errors"):
                pending = merged.pending[completed["id"]]
                listed = merged.at(pending["path"])
                part = (
                    {"items": None, "path": [*pending["path"], len(listed)]}
                    if isinstance(listed, list)
                    else {"data": None, "path": list(pending["path"])}
                )
                yield _labelled(part, pending, completed["errors"])


def _labelled(
    part: dict[str, Any], pending: dict[str, Any], errors: list[Any] | None
) -> dict[str, Any]:
    if "label" in pending:
        part["label"] = pending["label"]
    if errors:
        part["errors"] = errors
    return part
