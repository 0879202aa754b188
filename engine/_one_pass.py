"""The one pass of a plain object (`engine._completion`), written as one Python function per object
of the document, as graphql-jit writes JavaScript: each field read as an attribute, the usual
leaf values (a `str` for String and ID, an `int` in range for Int, a member of a Strawberry enum)
checked inline, anything else handed to the field's own one pass. It answers what the nodes'
one pass answers (the completed value, or SLOW), without a call or a loop per field.

An object of a type's stored source (`engine.stored`) has a one pass of its own
(`generate_stored`): the fields its source answers are read from its record and decoded there.
"""

from __future__ import annotations

import functools
import keyword
from collections.abc import Callable
from types import CodeType
from typing import Any

from graphql import GraphQLBoolean, GraphQLID, GraphQLInt, GraphQLString
from graphql.pyutils import Undefined

from engine import strawberry_adapter
from engine._completion import SLOW, Completer, LeafCompleter, NonNullCompleter, ObjectCompleter
from engine._completion import is_awaitable as awaitable

__all__: list[str] = []  # internal to the engine: its names are not its interface

# One passes kept compiled, by their source: a schema's types have a few selections each in use.
_COMPILED_SOURCES = 1024

_CHECKS = {
    id(GraphQLString): "{v}.__class__ is not str",
    id(GraphQLID): "{v}.__class__ is not str",
    id(GraphQLInt): "{v}.__class__ is not int or not -2147483648 <= {v} <= 2147483647",
    id(GraphQLBoolean): "{v} is not True and {v} is not False",
}


def generate(completer: ObjectCompleter) -> Callable[[Any], Any]:
    """The one pass of `completer`'s object, whose fields are all plain (`completer.plain`)."""
    assert completer.plain is not None
    names = _names(completer)
    lines = [
        "def one_pass(value):",
        "    if value is None:",
        "        return None",
        "    if value is Undefined or isinstance(value, Exception):",
        "        return SLOW",
        "    try:",
    ]
    if completer.is_type_of is not None:
        lines += [
            "        if awaitable(value) or not is_type_of(value, None):",
            "            return SLOW",
        ]
    answer = []
    for index, (key, attribute, field_completer) in enumerate(completer.plain):
        if attribute is None:
            answer.append(f"{key!r}: {completer.object_type.name!r}")
            continue
        value = f"v{index}"
        names[f"fast{index}"] = field_completer.fast
        lines.append(_read(value, attribute, index, names))
        lines += _leaf_check(field_completer, value, index, names)
        answer.append(f"{key!r}: {value}")
    return _function(completer, "", lines, answer, names)


def generate_stored(completer: ObjectCompleter) -> Callable[[Any], Any]:
    """The one pass of an object of `completer`'s stored source (`completer.stored`): what the
    source answers read from the object's record, the other fields as `generate` reads them."""
    assert completer.stored is not None and completer.source is not None
    names = _names(completer)
    names["record"] = completer.source.record
    lines = ["def one_pass(value):", "    try:"]
    if completer.is_type_of is not None:
        lines += ["        if not is_type_of(value, None):", "            return SLOW"]
    lines.append("        stored = record(value)")
    answer = []
    for index, (key, attribute, found, field_completer) in enumerate(completer.stored):
        if attribute is None and found is None:
            answer.append(f"{key!r}: {completer.object_type.name!r}")
            continue
        value = f"v{index}"
        names[f"fast{index}"] = field_completer.fast
        if found is not None and found.attribute is None:
            names[f"decode{index}"] = found.decode
            lines.append(f"        {value} = decode{index}(stored)")
        elif found is not None:
            names[f"stored{index}"] = found.attribute
            names[f"decode{index}"] = found.decode
            names[f"absent{index}"] = found.absent
            lines += [
                f"        {value} = stored.get(stored{index})",
                f"        {value} = absent{index} if {value} is None else decode{index}({value})",
            ]
        else:
            assert attribute is not None
            lines.append(_read(value, attribute, index, names))
        if found is not None and found.printed and _is_leaf(field_completer):
            if isinstance(field_completer, NonNullCompleter):
                lines += [f"        if {value} is None:", "            return SLOW"]
        else:
            lines += _leaf_check(field_completer, value, index, names)
        answer.append(f"{key!r}: {value}")
    return _function(completer, ", stored", lines, answer, names)


def _is_leaf(completer: Completer) -> bool:
    leaf = completer.inner if isinstance(completer, NonNullCompleter) else completer
    return isinstance(leaf, LeafCompleter)


def _names(completer: ObjectCompleter) -> dict[str, Any]:
    return {
        "SLOW": SLOW,
        "Undefined": Undefined,
        "awaitable": awaitable,
        "is_type_of": completer.is_type_of,
    }


def _read(value: str, attribute: str, index: int, names: dict[str, Any]) -> str:
    if attribute.isidentifier() and not keyword.iskeyword(attribute):
        return f"        {value} = value.{attribute}"
    names[f"attribute{index}"] = attribute
    return f"        {value} = getattr(value, attribute{index})"


def _function(
    completer: ObjectCompleter,
    suffix: str,
    lines: list[str],
    answer: list[str],
    names: dict[str, Any],
) -> Callable[[Any], Any]:
    lines += [
        "        pass",
        "    except Exception:",
        "        return SLOW",
        f"    return {{{', '.join(answer)}}}",
    ]
    namespace: dict[str, Any] = {}
    code = _compiled("\n".join(lines), f"<one pass of {completer.object_type.name}{suffix}>")
    exec(code, names, namespace)
    function: Callable[[Any], Any] = namespace["one_pass"]
    return function


@functools.lru_cache(maxsize=_COMPILED_SOURCES)
def _compiled(source: str, filename: str) -> CodeType:
    """`source` compiled once: the same selection of a type reads the same (the values it names
    are the `exec`'s), in a document's aliases and in every new document that selects it again;
    compiling was most of planning a new document of 15 aliases."""
    return compile(source, filename, "exec")


def _leaf_check(completer: Completer, value: str, index: int, names: dict[str, Any]) -> list[str]:
    """The lines that keep `value` when it is a usual value of its leaf type, and otherwise
    replace it by the field's one pass (SLOW ending this one)."""
    leaf = completer.inner if isinstance(completer, NonNullCompleter) else completer
    otherwise = [
        f"{value} = fast{index}({value})",
        f"if {value} is SLOW:",
        "    return SLOW",
    ]
    if isinstance(leaf, LeafCompleter):
        check = _CHECKS.get(id(leaf.leaf_type))
        if check is not None:
            return [f"        if {check.format(v=value)}:", *_indented(otherwise, 12)]
        found = strawberry_adapter.enum_names(leaf.leaf_type)
        if found is not None:
            names[f"members{index}"], names[f"names{index}"] = found
            return [
                f"        if {value}.__class__ is members{index}:",
                f"            {value} = names{index}.get({value}, SLOW)",
                f"            if {value} is SLOW:",
                "                return SLOW",
                "        else:",
                *_indented(otherwise, 12),
            ]
    return _indented(otherwise, 8)


def _indented(lines: list[str], spaces: int) -> list[str]:
    return [" " * spaces + line for line in lines]
