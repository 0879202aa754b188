"""The status line (`process.status_log`) that the deploy stack's alarms read from the logs."""

from __future__ import annotations

import asyncio
import logging

import pytest

from datasource import DynamoConfig, Throttles
from process.status_log import log_status_every
from tests.api.conftest import api_client
from tests.eventually import eventually


async def test_a_running_service_logs_its_breaker_every_interval_and_no_stream_it_does_not_read(
    moto_config: DynamoConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="loc_payments.status")
    async with api_client(moto_config, status_log_interval=0.05):
        assert "status log" in {task.get_name() for task in asyncio.all_tasks()}
        await eventually(lambda: len(status_lines(caplog)) >= 2, what="two status lines")

    lines = status_lines(caplog)
    assert all(getattr(line, "breaker_open", None) == 0 for line in lines)
    # No live updates here: this instance reads no stream, and says nothing of a lag.
    assert not any(hasattr(line, "stream_seconds_behind") for line in lines)
    assert lines[0].getMessage() == (
        "status: DynamoDB breaker closed, 0 attempts throttled, stream not read here"
    )


async def test_each_line_counts_the_throttles_since_the_one_before(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="loc_payments.status")
    throttles = Throttles()
    throttles.add("GetItem")  # before the first interval starts: not this log's to count
    status = asyncio.create_task(log_status_every(0.05, None, throttles, lambda: None))
    for api in ("Query", "Query", "TransactWriteItems"):
        await asyncio.sleep(0.03)
        throttles.add(api, "GSI2" if api == "Query" else None)

    def counted() -> list[int]:
        return [vars(line)["dynamodb_throttles"] for line in status_lines(caplog)]

    await eventually(lambda: sum(counted()) == 3, what=counted)
    status.cancel()

    assert len(counted()) >= 2, counted()
    assert throttles.counts == {("GetItem", "table"): 1, ("Query", "GSI2"): 2,
                                ("TransactWriteItems", "table"): 1}  # fmt: skip


async def test_no_status_line_when_the_interval_is_zero(
    moto_config: DynamoConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="loc_payments.status")
    async with api_client(moto_config, status_log_interval=0):
        # No logger runs that could write one later (the app's background work is named).
        assert "status log" not in {task.get_name() for task in asyncio.all_tasks()}

    assert not status_lines(caplog)


def status_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "loc_payments.status"]
