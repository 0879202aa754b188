"""DynamoDB's per-partition write limit, for the tests' proxy (`harness.proxy`): which partition
keys a write puts units on, how many, and a token bucket per key.

A `Write`'s keys and units come from the items it carries, by the table's definition
(`datasource.table`) and AWS's rules: the table's key, and each index the item is in (a new, moved,
changed or removed entry), each its size in KB begun, twice in a transaction. An UpdateItem's
result is computed from the item before it (the proxy reads it first) and the `SET`/`REMOVE`
forms the service writes. `Limits` keeps a bucket of `units_per_second` per (index, partition
key), holding at most `burst_units`; a write that would overdraw one is throttled whole and takes
nothing.

The rules in full, and what the simulation proves: docs/scale-and-cost.md#a-capacity-model.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from datasource import table_definition

__all__ = ["PARTITION_WRITE_UNITS", "Item", "Limits", "Write", "creates", "key_of", "updated"]

Item = dict[str, Any]
# What a partition serves a second (AWS's published limit, for writes).
PARTITION_WRITE_UNITS = 1_000
KB = 1024
TABLE = "table"
_DEFINITION = table_definition("any")
_TABLE_KEYS = tuple(key["AttributeName"] for key in _DEFINITION["KeySchema"])


@dataclass(frozen=True, slots=True)
class _Index:
    name: str
    keys: tuple[str, ...]  # partition key, sort key
    projected: tuple[str, ...] | None  # None: every attribute


def _indexes() -> list[_Index]:
    found = []
    for index in _DEFINITION["GlobalSecondaryIndexes"]:
        keys = tuple(key["AttributeName"] for key in index["KeySchema"])
        projection = index["Projection"]
        projected: tuple[str, ...] | None = None
        if projection["ProjectionType"] == "INCLUDE":
            projected = (*keys, *_TABLE_KEYS, *projection.get("NonKeyAttributes", []))
        elif projection["ProjectionType"] == "KEYS_ONLY":
            projected = (*keys, *_TABLE_KEYS)
        found.append(_Index(index["IndexName"], keys, projected))
    return found


INDEXES = _indexes()


def value_size(value: Mapping[str, Any]) -> int:
    """The bytes DynamoDB counts for one attribute value (its published sizing rules)."""
    [(kind, content)] = value.items()
    if kind == "S":
        return len(content.encode())
    if kind == "N":
        digits = content.lstrip("-").replace(".", "").strip("0") or "0"
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(content) * 3 // 4  # base64 on the wire
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(value_size({kind[0]: element}) for element in content)
    if kind == "L":
        return 3 + sum(value_size(element) + 1 for element in content)
    if kind == "M":
        return 3 + sum(len(name.encode()) + value_size(v) + 1 for name, v in content.items())
    raise ValueError(f"an attribute value of unknown type {kind!r}")


def item_size(item: Mapping[str, Any], attributes: tuple[str, ...] | None = None) -> int:
    return sum(
        len(name.encode()) + value_size(value)
        for name, value in item.items()
        if attributes is None or name in attributes
    )


def units(size: int) -> int:
    """Write units of `size` bytes: 1 per KB begun, at least 1."""
    return max(1, math.ceil(size / KB))


@dataclass(frozen=True, slots=True)
class Write:
    """One item's write: its key, the item before (None: none) and after (None: deleted)."""

    key: Item
    old: Item | None
    new: Item | None
    transactional: bool


def charges(write: Write) -> Iterator[tuple[str, str, int]]:
    """(index, partition key, units) that `write` puts on each partition it touches."""
    factor = 2 if write.transactional else 1
    sizes = [item_size(item) for item in (write.old, write.new) if item is not None]
    if not sizes:
        return
    partition = write.key[_TABLE_KEYS[0]]["S"]
    yield TABLE, partition, factor * units(max(sizes))
    for index in INDEXES:
        old = _entry(write.old, index)
        new = _entry(write.new, index)
        if old == new:
            continue
        old_key = None if old is None else tuple(old[key]["S"] for key in index.keys)
        new_key = None if new is None else tuple(new[key]["S"] for key in index.keys)
        if old is not None and old_key != new_key:
            assert old_key is not None
            yield index.name, old_key[0], factor * units(item_size(old))
        if new is not None:
            assert new_key is not None
            yield index.name, new_key[0], factor * units(item_size(new))


def _entry(item: Item | None, index: _Index) -> Item | None:
    """The index's entry of `item`, None when the item is not in the index."""
    if item is None or any(key not in item for key in index.keys):
        return None
    if index.projected is None:
        return item
    return {name: value for name, value in item.items() if name in index.projected}


_CLAUSE = re.compile(r"\b(SET|REMOVE|ADD|DELETE)\b", re.IGNORECASE)
_IF_NOT_EXISTS = re.compile(r"if_not_exists\s*\(\s*([^,\s]+)\s*,\s*(:\w+)\s*\)", re.IGNORECASE)


def updated(old: Item | None, request: Mapping[str, Any]) -> Item:
    """The item an UpdateItem leaves, from the item before and its SET and REMOVE clauses."""
    names: Mapping[str, str] = request.get("ExpressionAttributeNames", {})
    values: Mapping[str, Any] = request.get("ExpressionAttributeValues", {})
    item: Item = {**request["Key"], **(old or {})}
    expression: str = request.get("UpdateExpression", "")
    parts = _CLAUSE.split(expression)
    for clause, body in zip(parts[1::2], parts[2::2], strict=True):
        for action in (action.strip() for action in _split(body)):
            if clause.upper() == "REMOVE":
                item.pop(names.get(action, action), None)
            elif clause.upper() == "SET" and "=" in action:
                path, operand = (side.strip() for side in action.split("=", 1))
                name = names.get(path, path)
                if operand in values:
                    item[name] = values[operand]
                elif (found := _IF_NOT_EXISTS.fullmatch(operand)) and name not in item:
                    item[name] = values[found[2]]
    return item


def _split(body: str) -> list[str]:
    """A clause's actions: split at the commas outside parentheses."""
    actions, depth, start = [], 0, 0
    for position, character in enumerate(body):
        depth += {"(": 1, ")": -1}.get(character, 0)
        if character == "," and depth == 0:
            actions.append(body[start:position])
            start = position + 1
    actions.append(body[start:])
    return [action for action in actions if action.strip()]


def creates(request: Mapping[str, Any]) -> bool:
    """A Put whose condition says no item has its key: nothing is there before it."""
    condition = str(request.get("ConditionExpression", "")).replace(" ", "")
    return condition == f"attribute_not_exists({_TABLE_KEYS[0]})"


def key_of(item: Mapping[str, Any]) -> Item:
    return {name: item[name] for name in _TABLE_KEYS}


@dataclass
class Limits:
    """A token bucket per (index, partition key); see the module's docstring."""

    units_per_second: float
    burst_units: float = PARTITION_WRITE_UNITS
    buckets: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    # Units admitted, and writes throttled, by (index, partition key).
    admitted: Counter[tuple[str, str]] = field(default_factory=Counter)
    throttled: Counter[tuple[str, str]] = field(default_factory=Counter)

    def admit(self, writes: list[Write]) -> int | None:
        """Take the units of `writes` (one request's) from their buckets and answer None; or,
        when some bucket holds too few, take nothing and answer the position of the first write
        that would overdraw one."""
        now = time.monotonic()
        wanted: Counter[tuple[str, str]] = Counter()
        first: dict[tuple[str, str], int] = {}
        for position, write in enumerate(writes):
            for index, partition, cost in charges(write):
                wanted[index, partition] += cost
                first.setdefault((index, partition), position)
        short = [key for key, cost in wanted.items() if self._tokens(key, now) < cost]
        if short:
            for key in short:
                self.throttled[key] += 1
            return min(first[key] for key in short)
        for key, cost in wanted.items():
            self.buckets[key] = (self._tokens(key, now) - cost, now)
            self.admitted[key] += cost
        return None

    def _tokens(self, key: tuple[str, str], now: float) -> float:
        tokens, at = self.buckets.get(key, (self.burst_units, now))
        return min(self.burst_units, tokens + (now - at) * self.units_per_second)
