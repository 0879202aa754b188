"""The table compared with `datasource.table`'s definition: each difference named, and what more
than the definition asks passes."""

from __future__ import annotations

import copy
import logging
import uuid
from typing import Any

import pytest

from datasource.table import (
    FEED_ATTRIBUTES,
    GSI1,
    GSI2,
    GSI4,
    create_table_if_missing,
    table_definition,
)
from datasource.table_fit import TableFit, differences
from tests.backends import Backend

NAME = "payments"


def described(**changes: Any) -> dict[str, Any]:
    """DescribeTable's `Table` of a table made from the definition, every index ACTIVE."""
    table: dict[str, Any] = copy.deepcopy(dict(table_definition(NAME)))
    for index in table["GlobalSecondaryIndexes"]:
        index["IndexStatus"] = "ACTIVE"
    return table | changes


def index_of(table: dict[str, Any], name: str) -> dict[str, Any]:
    [index] = [index for index in table["GlobalSecondaryIndexes"] if index["IndexName"] == name]
    found: dict[str, Any] = index
    return found


def texts(table: dict[str, Any], *, stream: bool = True) -> list[str]:
    return [str(difference) for difference in differences(table, stream=stream)]


def test_the_definition_itself_has_none() -> None:
    assert texts(described()) == []


def test_a_missing_index_and_stream_are_named_each() -> None:
    table = described()
    table["GlobalSecondaryIndexes"] = [
        index for index in table["GlobalSecondaryIndexes"] if index["IndexName"] != GSI4
    ]
    del table["StreamSpecification"]

    assert texts(table) == ["index GSI4 is missing", "the stream is off"]
    # Without live updates the service reads no stream.
    assert texts(table, stream=False) == ["index GSI4 is missing"]
    assert [difference.index for difference in differences(table, stream=True)] == [GSI4, None]


def test_a_projection_holding_less_is_named() -> None:
    table = described()
    index_of(table, GSI2)["Projection"] = {"ProjectionType": "KEYS_ONLY"}
    index_of(table, GSI4)["Projection"] = {
        "ProjectionType": "INCLUDE",
        "NonKeyAttributes": FEED_ATTRIBUTES[:-2],
    }

    assert texts(table) == [
        "index GSI2's projection is KEYS_ONLY, the service needs ALL",
        f"index GSI4's projection is INCLUDE and lacks {', '.join(FEED_ATTRIBUTES[-2:])}, "
        "which the service reads from it",
    ]


def test_a_projection_or_a_stream_holding_more_serves() -> None:
    table = described(
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    )
    index_of(table, GSI4)["Projection"] = {"ProjectionType": "ALL"}
    assert texts(table) == []


def test_keys_their_types_a_building_index_and_the_stream_s_view_are_named() -> None:
    table = described(
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
        AttributeDefinitions=[
            {**attribute, "AttributeType": "N"}
            if attribute["AttributeName"] == "GSI2PK"
            else attribute
            for attribute in table_definition(NAME)["AttributeDefinitions"]
        ],
    )
    index_of(table, GSI1)["KeySchema"] = [{"AttributeName": "GSI1PK", "KeyType": "HASH"}]
    index_of(table, GSI4)["IndexStatus"] = "CREATING"

    assert texts(table) == [
        "index GSI1's key is GSI1PK (HASH), the service needs GSI1PK (HASH), GSI1SK (RANGE)",
        "index GSI2's key GSI2PK is of type N, the service needs S",
        "index GSI4 is CREATING, the service needs it ACTIVE",
        "the stream's view type is KEYS_ONLY, the service needs NEW_IMAGE",
    ]


def test_each_difference_is_logged_once_and_the_fix_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="loc_payments.table")
    fit = TableFit(NAME, stream=True)
    missing = described()
    del missing["StreamSpecification"]

    fit.compare(missing)
    fit.compare(missing)
    assert (fit.fits, fit.problems) == (False, ("the stream is off",))
    fit.compare(described())
    assert (fit.fits, fit.problems) == (True, ())

    assert [record.getMessage() for record in caplog.records] == [
        f"table {NAME}: the stream is off",
        f"table {NAME}: writes are refused, and /readyz answers 503, until it is as "
        "datasource/table.py defines it",
        f"table {NAME}: as the service needs it now; writes are accepted",
    ]


def test_not_compared_yet_does_not_fit() -> None:
    assert not TableFit(NAME, stream=True).fits


async def test_a_table_made_from_the_definition_has_none_on_each_backend(backend: Backend) -> None:
    name = f"test-{uuid.uuid4().hex}"
    await create_table_if_missing(backend.client, name)
    try:
        table = (await backend.client.describe_table(TableName=name))["Table"]
    finally:
        await backend.client.delete_table(TableName=name)
    assert differences(table, stream=True) == []
