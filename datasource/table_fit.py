"""Whether the table is the one the service needs, and what is refused until it is.

`differences` compares a DescribeTable answer with `datasource.table.table_definition`: the
table's key, GSI1-GSI4 (there, ACTIVE, their keys and key types, a projection holding at least
the definition's) and, where live updates read it, the stream (on, its view holding the new
image). More than the definition asks (an ALL projection, both images) serves, and passes.

`TableFit` keeps the last comparison, logs each difference once, by name, as it appears, and
guards the store's client: until a comparison finds none, every write is refused before it is
sent, and so is a Query of an index that differs (`StorageUnavailable`: UNAVAILABLE to a
caller). Nothing is written that the service could not read back, list in the events feed, or
stream. Each later comparison (`PaymentStore.ping`) may let them through, without a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from datasource.accounting import WRITE_OPERATIONS
from datasource.table import table_definition
from domain.errors import StorageUnavailable

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = ["NOT_AS_NEEDED", "NOT_COMPARED", "Difference", "TableFit", "differences"]

logger = logging.getLogger("loc_payments.table")

NOT_AS_NEEDED = "the payments table is not as the service needs it; retry later"
NOT_COMPARED = "the payments table has not been compared with what the service needs; retry later"
_HOOK_ID = "loc-payments-table-fit"
# What each stream view type holds of a write.
_IMAGES: dict[str, frozenset[str]] = {
    "KEYS_ONLY": frozenset(),
    "NEW_IMAGE": frozenset({"new"}),
    "OLD_IMAGE": frozenset({"old"}),
    "NEW_AND_OLD_IMAGES": frozenset({"new", "old"}),
}


@dataclass(frozen=True, slots=True)
class Difference:
    """What the table lacks, in words; `index` names the index it makes unusable, if one."""

    text: str
    index: str | None = None

    def __str__(self) -> str:
        return self.text


def differences(table: Mapping[str, Any], *, stream: bool) -> list[Difference]:
    """How `table` (DescribeTable's `Table`) falls short of the definition; `stream`: whether
    the service reads its stream (live updates on)."""
    needed = table_definition(str(table.get("TableName", "")))
    needed_types = _types(needed["AttributeDefinitions"])
    types = _types(table.get("AttributeDefinitions", []))
    found = [
        Difference(text)
        for text in _key_differences(
            "the table's key", table.get("KeySchema", []), needed["KeySchema"], types, needed_types
        )
    ]
    present = {index["IndexName"]: index for index in table.get("GlobalSecondaryIndexes", [])}
    for index in needed["GlobalSecondaryIndexes"]:
        name = index["IndexName"]
        have = present.get(name)
        if have is None:
            found.append(Difference(f"index {name} is missing", name))
            continue
        subject = f"index {name}'s key"
        texts = _key_differences(
            subject, have["KeySchema"], index["KeySchema"], types, needed_types
        )
        texts += _projection_differences(name, have.get("Projection", {}), index["Projection"])
        status = have.get("IndexStatus", "ACTIVE")
        if status != "ACTIVE":
            texts.append(f"index {name} is {status}, the service needs it ACTIVE")
        found += [Difference(text, name) for text in texts]
    if stream:
        found += _stream_differences(
            table.get("StreamSpecification") or {}, needed["StreamSpecification"]
        )
    return found


def _types(definitions: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    return {str(item["AttributeName"]): str(item["AttributeType"]) for item in definitions}


def _keys(schema: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    # HASH before RANGE, as DynamoDB lists them.
    return sorted((str(key["KeyType"]), str(key["AttributeName"])) for key in schema)


def _key_differences(
    subject: str,
    have: Sequence[Mapping[str, Any]],
    need: Sequence[Mapping[str, Any]],
    types: Mapping[str, str],
    needed_types: Mapping[str, str],
) -> list[str]:
    if _keys(have) != _keys(need):

        def spelt(schema: Sequence[Mapping[str, Any]]) -> str:
            return ", ".join(f"{name} ({kind})" for kind, name in _keys(schema)) or "none"

        return [f"{subject} is {spelt(have)}, the service needs {spelt(need)}"]
    # DynamoDB defines every key attribute; moto forgets the others when an index is added.
    return [
        f"{subject} {name} is of type {types[name]}, the service needs {needed_types[name]}"
        for _, name in _keys(need)
        if name in types and types[name] != needed_types[name]
    ]


def _projection_differences(
    name: str, have: Mapping[str, Any], need: Mapping[str, Any]
) -> list[str]:
    kind, needed_kind = str(have.get("ProjectionType", "KEYS_ONLY")), str(need["ProjectionType"])
    if kind == "ALL" or kind == needed_kind == "KEYS_ONLY":
        return []
    if needed_kind == "ALL":
        return [f"index {name}'s projection is {kind}, the service needs ALL"]
    held = set(have.get("NonKeyAttributes", []))
    lacking = [attribute for attribute in need.get("NonKeyAttributes", []) if attribute not in held]
    if not lacking:
        return []
    return [
        f"index {name}'s projection is {kind} and lacks {', '.join(lacking)}, which the "
        "service reads from it"
    ]


def _stream_differences(have: Mapping[str, Any], need: Mapping[str, Any]) -> list[Difference]:
    if not have.get("StreamEnabled", False):
        return [Difference("the stream is off")]
    view, needed_view = str(have.get("StreamViewType", "")), str(need["StreamViewType"])
    if not _IMAGES[needed_view] <= _IMAGES.get(view, frozenset()):
        return [Difference(f"the stream's view type is {view}, the service needs {needed_view}")]
    return []


class TableFit:
    """The last comparison of the table with what the service needs, and the guard it sets."""

    def __init__(self, table_name: str, *, stream: bool) -> None:
        self._table = table_name
        self._stream = stream
        self._found: tuple[Difference, ...] | None = None  # None: not compared yet
        self._unusable: frozenset[str] = frozenset()

    @property
    def fits(self) -> bool:
        """Compared, and as the service needs it."""
        return self._found == ()

    @property
    def problems(self) -> tuple[str, ...]:
        """What the last comparison found (none before the first)."""
        return tuple(str(difference) for difference in self._found or ())

    def compare(self, table: Mapping[str, Any]) -> None:
        """Compare DescribeTable's `Table` again; log what it finds anew, or that it fits now."""
        before, found = self._found, tuple(differences(table, stream=self._stream))
        for difference in found:
            if before is None or difference not in before:
                logger.error("table %s: %s", self._table, difference)
        if found and not before:
            logger.error(
                "table %s: writes are refused, and /readyz answers 503, until it is as "
                "datasource/table.py defines it",
                self._table,
            )
        elif before and not found:
            logger.info("table %s: as the service needs it now; writes are accepted", self._table)
        self._found = found
        self._unusable = frozenset(d.index for d in found if d.index is not None)

    def attach(self, client: DynamoDBClient) -> None:
        """Refuse `client`'s writes, and its Queries of an index that differs, until it fits."""
        client.meta.events.register(
            "before-parameter-build.dynamodb", self._refuse, unique_id=_HOOK_ID
        )

    def _refuse(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        if self.fits:
            return
        if model.name in WRITE_OPERATIONS or params.get("IndexName") in self._unusable:
            raise StorageUnavailable(NOT_COMPARED if self._found is None else NOT_AS_NEEDED)
