"""The status line (`server.status_log`) that the deploy stack's alarms read from the logs."""

from __future__ import annotations

import asyncio
import logging

import pytest

from datasource import DynamoConfig
from tests.api.conftest import api_client


async def test_a_running_service_logs_its_breaker_every_interval_and_no_stream_it_does_not_read(
    moto_config: DynamoConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="loc_payments.status")
    async with api_client(moto_config, status_log_interval=0.05):
        await asyncio.sleep(0.3)

    lines = [record for record in caplog.records if record.name == "loc_payments.status"]
    assert len(lines) >= 2
    assert all(getattr(line, "breaker_open", None) == 0 for line in lines)
    # No live updates here: this instance reads no stream, and says nothing of a lag.
    assert not any(hasattr(line, "stream_seconds_behind") for line in lines)
    assert lines[0].getMessage() == "status: DynamoDB breaker closed, stream not read here"


async def test_no_status_line_when_the_interval_is_zero(
    moto_config: DynamoConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="loc_payments.status")
    async with api_client(moto_config, status_log_interval=0):
        await asyncio.sleep(0.2)

    assert not [record for record in caplog.records if record.name == "loc_payments.status"]
