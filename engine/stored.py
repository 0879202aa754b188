"""Objects that carry the record they were read from, whose fields a plan may read from the
record itself: a source that can answer these fields directly.

    StoredSource(kind=ListedThing, record=attrgetter("item"),
                 fields={"amount": StoredField("amount_attr", decode=int)})

A service declares one `StoredSource` per GraphQL object type (`compile_operation(sources=)`).
Where a plan completes an object of `kind` at that type in one pass (`engine._completion`),
each field named in `fields` is read as `decode(record(obj)[attribute])` (`absent` when the
record lacks the attribute; without an attribute, `decode(record(obj))`) instead of from the
object, and completed as the value its resolver would have given (or, for a leaf declared
`printed`, taken as its answer: its value as the field's type prints it); the object's other
fields are read from the object as usual. Anything the one pass does not answer is answered
from the object, field by field, as if no source were declared: so the object must answer
every field the same way its record does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["StoredField", "StoredSource"]


@dataclass(frozen=True, slots=True)
class StoredField:
    """Where a field's value is in the record, and how it is read from what is stored there: the
    value the field's resolver would give (completed by the plan, as that value would be)."""

    # None: a field made of several attributes, `decode` given the whole record.
    attribute: str | None
    decode: Callable[[Any], Any]
    # The field's value when the record lacks the attribute (decode is not called).
    absent: Any = None
    # A leaf's `decode` gives its answer as its type prints it (`serialize`d), taken as it is:
    # for a scalar whose printing costs more than its check (a timestamp kept as text).
    printed: bool = False


@dataclass(frozen=True, slots=True)
class StoredSource:
    """Objects of one class (`kind`, exactly) that carry their `record`, and the fields of their
    GraphQL type that the record answers, by GraphQL field name."""

    kind: type
    record: Callable[[Any], Mapping[str, Any]]
    fields: Mapping[str, StoredField]
