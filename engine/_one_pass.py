"""The one pass of a plain object (`engine._completion`), written as one Python function per object
of the document, as graphql-jit writes JavaScript: each field read as an attribute, the usual
leaf values (a `str` for String and ID, an `int` in range for Int, a member of a Strawberry enum)
checked inline, anything else handed to the field's own one pass. It answers what the nodes'
one pass answers (the completed value, or SLOW), without a call or a loop per field.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from typing import Any

from graphql import GraphQLBoolean, GraphQLID, GraphQLInt, GraphQLString
from graphql.pyutils import Undefined

from engine import strawberry_adapter
from engine._completion import SLOW, Completer, LeafCompleter, NonNullCompleter, ObjectCompleter
from engine._completion import is_awaitable as awaitable

__all__: list[str] = []  # internal to the engine: its names are not its interface

_CHECKS = {
    id(GraphQLString): "{v}.__class__ is not str",
    id(GraphQLID): "{v}.__class__ is not str",
    id(GraphQLInt): "{v}.__class__ is not int or not -2147483648 <= {v} <= 2147483647",
    id(GraphQLBoolean): "{v} is not True and {v} is not False",
}


def generate(completer: ObjectCompleter) -> Callable[[Any], Any]:
    """The one pass of `completer`'s object, whose fields are all plain (`completer.plain`)."""
    assert completer.plain is not None
    names: dict[str, Any] = {
        "SLOW": SLOW,
        "Undefined": Undefined,
        "awaitable": awaitable,
        "is_type_of": completer.is_type_of,
    }
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
        if attribute.isidentifier() and not keyword.iskeyword(attribute):
            lines.append(f"        {value} = value.{attribute}")
        else:
            names[f"attribute{index}"] = attribute
            lines.append(f"        {value} = getattr(value, attribute{index})")
        lines += _leaf_check(field_completer, value, index, names)
        answer.append(f"{key!r}: {value}")
    lines += [
        "        pass",
        "    except Exception:",
        "        return SLOW",
        f"    return {{{', '.join(answer)}}}",
    ]
    namespace: dict[str, Any] = {}
    source = compile("\n".join(lines), f"<one pass of {completer.object_type.name}>", "exec")
    exec(source, names, namespace)
    function: Callable[[Any], Any] = namespace["one_pass"]
    return function


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
