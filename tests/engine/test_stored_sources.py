"""Stored sources (`engine.StoredSource`) through the engine's public API, on a tiny schema of
their own: a plan reads the fields a source answers from each object's record, never from the
object, and answers exactly what it answers without the source, errors included."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from operator import attrgetter
from typing import Any

import pytest
import strawberry
from strawberry.types.graphql import OperationType

from engine import (
    OperationRunner,
    StoredField,
    StoredSource,
    compile_operation,
    graphql_schema,
)


@strawberry.enum
class Shade(Enum):
    LIGHT = "light"
    DARK = "dark"


DECODERS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "name": ("n", lambda value: value["S"]),
    "count": ("c", lambda value: int(value["N"])),
    "shade": ("s", lambda value: Shade(value["S"])),
    "note": ("t", lambda value: value["S"]),
    "made": ("m", lambda value: datetime.fromisoformat(value["S"])),
}


def _printed_made(value: Any) -> str:
    """`made` as `DateTime` prints it (`isoformat`), from its stored text."""
    text: str = value["S"]
    datetime.fromisoformat(text)  # refused as the object refuses it
    return text


class RecordedPart:
    """A part as its record holds it: each attribute decoded from the record when read, every
    read noted (what the plan asked of the object)."""

    def __init__(self, record: Mapping[str, Any], reads: list[str]) -> None:
        self.record = record
        self._reads = reads

    def __getattr__(self, name: str) -> Any:
        if name not in DECODERS:
            raise AttributeError(name)
        self._reads.append(name)
        attribute, decode = DECODERS[name]
        found = self.record.get(attribute)
        return None if found is None else decode(found)


@strawberry.type
class Part:
    name: str
    count: int
    shade: Shade
    note: str | None
    made: datetime

    @strawberry.field
    def label(self, root: strawberry.Parent[Any]) -> str:
        return f"{root.name} x{root.count}"

    @strawberry.field
    def twice(self, root: strawberry.Parent[Any]) -> int:
        return 2 * root.count  # type: ignore[no-any-return]


RECORDS: list[dict[str, Any]] = []
READS: list[str] = []


@strawberry.type
class Query:
    @strawberry.field
    def parts(self) -> list[Part]:
        return [RecordedPart(record, READS) for record in RECORDS]  # type: ignore[misc]


SCHEMA = strawberry.Schema(query=Query)
SOURCES = {
    "Part": StoredSource(
        RecordedPart,
        attrgetter("record"),
        {name: StoredField(attribute, decode) for name, (attribute, decode) in DECODERS.items()}
        | {
            "made": StoredField("m", _printed_made, printed=True),
            # Made of several attributes, as the object's resolver makes it.
            "label": StoredField(None, lambda record: f"{record['n']['S']} x{record['c']['N']}"),
        },
    )
}


def _runner(sources: dict[str, StoredSource] | None) -> OperationRunner[Any]:
    return OperationRunner(
        graphql_schema(SCHEMA),
        compile_operation=functools.partial(compile_operation, SCHEMA, sources=sources),
    )


async def _answer(sources: dict[str, StoredSource] | None, query: str) -> dict[str, Any]:
    READS.clear()
    result = await _runner(sources).run(
        query, variables=None, context=None, operation_name=None, allowed=[OperationType.QUERY]
    )
    errors = [{"message": e.message, "path": e.path} for e in result.errors or ()]
    return {"data": result.data, "errors": errors}


@pytest.fixture(autouse=True)
def records() -> None:
    RECORDS[:] = [
        {
            "n": {"S": "bolt"},
            "c": {"N": "3"},
            "s": {"S": "dark"},
            "t": {"S": "spare"},
            "m": {"S": "2026-01-05T14:00:00.123000"},
        },
        {
            "n": {"S": "nut"},
            "c": {"N": "12"},
            "s": {"S": "light"},
            "m": {"S": "2026-02-01T00:00:00"},
        },
    ]


async def test_the_fields_a_source_answers_are_read_from_the_record_not_the_object() -> None:
    query = "{ parts { __typename name count shade note made label } }"

    without = await _answer(None, query)
    read_from_objects = len(READS)
    answered = await _answer(SOURCES, query)

    assert answered == without
    assert answered["data"]["parts"][1] == {
        "__typename": "Part",
        "name": "nut",
        "count": 12,
        "shade": "LIGHT",
        "note": None,
        "made": "2026-02-01T00:00:00",
        "label": "nut x12",
    }
    assert read_from_objects == 14 and READS == []


async def test_fields_the_source_does_not_answer_are_answered_by_the_object() -> None:
    query = "{ parts { name twice } }"

    answered = await _answer(SOURCES, query)

    assert answered == await _answer(None, query)
    assert answered["data"]["parts"][0] == {"name": "bolt", "twice": 6}


@pytest.mark.parametrize(
    "corrupt",
    [
        {"c": {"N": "three"}},  # does not decode
        {"s": {"S": "grey"}},  # not a member
        {"c": {"N": str(2**40)}},  # not an Int
        {"n": None},  # absent where null is not allowed
        {"m": {"S": "2026-02-30T00:00:00"}},  # printed, but not a date
        {"m": None},  # printed, absent where null is not allowed
    ],
)
async def test_a_record_that_does_not_answer_fails_its_field_as_the_object_would(
    corrupt: dict[str, Any],
) -> None:
    RECORDS[1] = {
        name: value for name, value in (RECORDS[1] | corrupt).items() if value is not None
    }
    query = "{ parts { name count shade made label } }"

    answered = await _answer(SOURCES, query)

    assert answered == await _answer(None, query)
    assert answered["errors"] and answered["errors"][0]["path"][:2] == ["parts", 1]
