"""Request accounting (SPEC §8, §11): the DynamoDB calls one GraphQL operation made, and the
capacity they consumed, and the items they read.

``count_calls`` puts a ``CallCount`` in a context variable (tasks created inside the ``with``
share it: a DataLoader's batch counts toward the request that caused it), and
``attach_accounting`` puts botocore hooks on the store's client that ask each data call for its
consumed capacity per table and index, count each API call once (however often botocore
retried it) with its final outcome, and add the capacity DynamoDB reports, as it reports it,
and the items each read went through (a Query's `ScannedCount`, a lookup's items found).
``throttled`` counts each attempt DynamoDB throttled.

What is counted and what cannot be: docs/scale-and-cost.md#how-calls-are-counted.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from datasource.scoped import Scoped

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = [
    "READ_OPERATIONS",
    "TABLE",
    "WRITE_OPERATIONS",
    "CallCount",
    "Units",
    "ask_for_capacity",
    "attach_accounting",
    "count_calls",
    "counting",
    "current",
    "items_read",
    "list_rounds",
    "throttled",
]

# botocore's hierarchical event names: every operation of the dynamodb service.
PARAMETERS_EVENT = "before-parameter-build.dynamodb"
BEFORE_CALL_EVENT = "before-call.dynamodb"
AFTER_CALL_EVENT = "after-call.dynamodb"
ACCOUNTING_HOOK_ID = "loc-payments-request-accounting"

READ_OPERATIONS = frozenset({"BatchGetItem", "GetItem", "Query", "Scan", "TransactGetItems"})
WRITE_OPERATIONS = frozenset(
    {"BatchWriteItem", "DeleteItem", "PutItem", "TransactWriteItems", "UpdateItem"}
)
CAPACITY_DETAIL = "INDEXES"
# The `index` a throttle of the table itself (or of an unnamed part of it) is counted under.
TABLE = "table"

Kind = Literal["read", "write"]


@dataclass(slots=True)
class Units:
    """Consumed capacity units: reads (RCU) and writes (WCU)."""

    read: float = 0.0
    write: float = 0.0

    def add(self, read: float, write: float) -> None:
        self.read += read
        self.write += write


@dataclass(slots=True)
class CallCount:
    requests: int = 0
    operations: dict[str, int] = field(default_factory=dict)
    # (API name, "ok" or DynamoDB's error code) -> answers; a call with no answer (a lost
    # connection) is in `operations` and not here.
    outcomes: dict[tuple[str, str], int] = field(default_factory=dict)
    units: Units = field(default_factory=Units)
    units_by_api: dict[str, Units] = field(default_factory=dict)
    # The table's name, or `<table>/<index>` -> the units it consumed.
    units_by_index: dict[str, Units] = field(default_factory=dict)
    # (API name, index name or TABLE) -> attempts DynamoDB throttled (`datasource.retries`).
    throttles: dict[tuple[str, str], int] = field(default_factory=dict)
    # The most Queries one list's page waited for one after another (a merge of shards asks
    # its shards at once, in rounds: `datasource.pages.merged_items`).
    list_rounds: int = 0
    # The items the reads went through: a Query's or Scan's `ScannedCount` (a filter's
    # leftovers too), the items a GetItem, BatchGetItem or TransactGetItems found.
    items_read: int = 0

    def add(self, operation: str) -> None:
        self.requests += 1
        self.operations[operation] = self.operations.get(operation, 0) + 1

    def answered(self, operation: str, outcome: str) -> None:
        key = (operation, outcome)
        self.outcomes[key] = self.outcomes.get(key, 0) + 1

    def throttled(self, operation: str, index: str | None) -> None:
        key = (operation, index or TABLE)
        self.throttles[key] = self.throttles.get(key, 0) + 1

    def add_share(self, call: CallCount, share: float) -> None:
        """Count the calls of `call` (another context's count: a call shared with other
        requests) as this one's own, and `share` of their units and items read."""
        self.requests += call.requests
        for operation, calls in call.operations.items():
            self.operations[operation] = self.operations.get(operation, 0) + calls
        for outcome, answers in call.outcomes.items():
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + answers
        for throttle, attempts in call.throttles.items():
            self.throttles[throttle] = self.throttles.get(throttle, 0) + attempts
        self.list_rounds = max(self.list_rounds, call.list_rounds)
        # Its share of the items, rounded up (a float's last bit aside).
        self.items_read += math.ceil(call.items_read * share - 1e-9)
        self.units.add(call.units.read * share, call.units.write * share)
        for mine, theirs in (
            (self.units_by_api, call.units_by_api),
            (self.units_by_index, call.units_by_index),
        ):
            for name, units in theirs.items():
                mine.setdefault(name, Units()).add(units.read * share, units.write * share)

    def consumed(self, operation: str, capacity: Any) -> None:
        """Add an answer's `ConsumedCapacity` (an entry, or a list of them)."""
        kind: Kind = "read" if operation in READ_OPERATIONS else "write"
        entries = capacity if isinstance(capacity, list) else [capacity]
        for entry in entries:
            if not isinstance(entry, Mapping):
                continue
            read, write = _read_and_write(entry, kind)
            self.units.add(read, write)
            self.units_by_api.setdefault(operation, Units()).add(read, write)
            table = entry.get("TableName")
            if table is not None:
                for name, part in _parts(str(table), entry):
                    read, write = _read_and_write(part, kind)
                    if read or write:
                        self.units_by_index.setdefault(name, Units()).add(read, write)


def _read_and_write(units: Mapping[str, Any], kind: Kind) -> tuple[float, float]:
    total = float(units.get("CapacityUnits") or 0)
    read, write = units.get("ReadCapacityUnits"), units.get("WriteCapacityUnits")
    if read is None and write is None:
        return (total, 0.0) if kind == "read" else (0.0, total)
    # With one of them given, the other is the rest of the total.
    read_units = float(read) if read is not None else max(total - float(write or 0), 0.0)
    write_units = float(write) if write is not None else max(total - read_units, 0.0)
    return read_units, write_units


def _parts(table: str, entry: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(name, units) of the table and of each index in one `ConsumedCapacity` entry."""
    indexes = {
        **(entry.get("GlobalSecondaryIndexes") or {}),
        **(entry.get("LocalSecondaryIndexes") or {}),
    }
    if "Table" not in entry and not indexes:
        yield table, entry
        return
    if "Table" in entry:
        yield table, entry["Table"]
    for index, units in indexes.items():
        yield f"{table}/{index}", units


_current: ContextVar[CallCount | None] = ContextVar("dynamodb_call_count", default=None)


def count_calls() -> AbstractContextManager[CallCount]:
    """Count the DynamoDB calls made inside the block (and in tasks it starts)."""
    return Scoped(_current, CallCount())


def counting(count: CallCount) -> AbstractContextManager[CallCount]:
    """Count the DynamoDB calls made inside the block (and in tasks it starts) in `count`."""
    return Scoped(_current, count)


def current() -> CallCount | None:
    """The count the calls made here go to, if any."""
    return _current.get()


def list_rounds(rounds: int) -> None:
    """Count a list's page that waited for `rounds` Queries (or rounds of them) in a row."""
    count = _current.get()
    if count is not None:
        count.list_rounds = max(count.list_rounds, rounds)


def throttled(operation: str, index: str | None = None) -> None:
    """Count an attempt of `operation` (on `index`, if it named one) that DynamoDB throttled."""
    count = _current.get()
    if count is not None:
        count.throttled(operation, index)


def attach_accounting(client: DynamoDBClient) -> None:
    """Put the accounting hooks on a client; unique ids, so that stores sharing one client
    (tests) ask and count each call once."""
    events = client.meta.events
    events.register(PARAMETERS_EVENT, ask_for_capacity, unique_id=f"{ACCOUNTING_HOOK_ID}-ask")
    events.register(BEFORE_CALL_EVENT, record_call, unique_id=ACCOUNTING_HOOK_ID)
    events.register(AFTER_CALL_EVENT, record_answer, unique_id=f"{ACCOUNTING_HOOK_ID}-answers")


def ask_for_capacity(params: dict[str, Any], model: Any, **_: Any) -> None:
    """The botocore hook that asks a data call for its consumed capacity."""
    if model.name in READ_OPERATIONS or model.name in WRITE_OPERATIONS:
        params.setdefault("ReturnConsumedCapacity", CAPACITY_DETAIL)


def record_call(model: Any, **_: Any) -> None:
    """The botocore hook; ``model`` is the operation model, its ``name`` e.g. ``BatchGetItem``."""
    count = _current.get()
    if count is not None:
        count.add(str(model.name))


def record_answer(model: Any, http_response: Any = None, parsed: Any = None, **_: Any) -> None:
    """The botocore hook after a call's final answer (after its retries): "ok" or the error
    code, and the capacity the answer reports."""
    count = _current.get()
    if count is None:
        return
    answer = parsed if isinstance(parsed, dict) else {}
    error = answer.get("Error", {})
    status = getattr(http_response, "status_code", 200)
    outcome = "ok" if status < 400 else str(error.get("Code") or status)
    operation = str(model.name)
    count.answered(operation, outcome)
    count.items_read += items_read(operation, answer)
    capacity = answer.get("ConsumedCapacity")
    if capacity is not None:
        count.consumed(operation, capacity)


def items_read(operation: str, answer: Mapping[str, Any]) -> int:
    """The items one answer's read went through: what DynamoDB read to answer it, the items a
    filter left out included; 0 for a write."""
    if operation in ("Query", "Scan"):
        return int(answer.get("ScannedCount", len(answer.get("Items", ()))))
    if operation == "GetItem":
        return 1 if answer.get("Item") is not None else 0
    if operation == "BatchGetItem":
        return sum(len(items) for items in (answer.get("Responses") or {}).values())
    if operation == "TransactGetItems":
        return sum(1 for response in answer.get("Responses") or () if response.get("Item"))
    return 0
