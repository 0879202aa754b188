"""The jobs start a trace per run (issue 32): `loc-payments collect` and `reshard`, run as the
command runs them with `LOC_OTEL_EXPORTER=otlp`, send one root span per run to the test's OTLP
receiver, with the run's DynamoDB calls under it and the events it wrote linked to it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from cli.main import main
from datasource import DynamoConfig, to_item
from domain.enums import PaymentMethod, PaymentStatus
from tests.backends import TEST_KEY
from tests.jobs.collect_runs import MAX_ATTEMPTS
from tests.otlp_receiver import OtlpReceiver, receiving
from tests.payment_samples import payment_in


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    # The commands configure the root logger for their process; the test process keeps its own.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def traced_job(
    moto_config: DynamoConfig, monkeypatch: pytest.MonkeyPatch
) -> Iterator[OtlpReceiver]:
    assert moto_config.endpoint_url is not None
    monkeypatch.setenv("LOC_DYNAMODB_ENDPOINT", moto_config.endpoint_url)
    monkeypatch.setenv("LOC_TABLE_NAME", moto_config.table_name)
    monkeypatch.setenv("LOC_LOG_FORMAT", "json")
    monkeypatch.setenv("LOC_OTEL_EXPORTER", "otlp")
    with receiving() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        yield receiver


def _client(config: DynamoConfig) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=config.endpoint_url,
        region_name=config.region,
        aws_access_key_id=TEST_KEY,
        aws_secret_access_key=TEST_KEY,
    )


def test_a_collection_run_is_one_trace_and_its_events_link_to_it(
    moto_config: DynamoConfig, traced_job: OtlpReceiver, tmp_path: Path
) -> None:
    client = _client(moto_config)
    spent = payment_in(PaymentStatus.RETRY, PaymentMethod.PINLESS, attempts=MAX_ATTEMPTS)
    eligible = payment_in(PaymentStatus.RETRY, PaymentMethod.PINLESS, attempts=1)
    for payment in (spent, eligible):
        client.put_item(TableName=moto_config.table_name, Item=to_item(payment))

    assert main(["collect", "--output", str(tmp_path / "eligible.jsonl")]) == 0

    # The command has ended: its spans were sent before it returned.
    spans = traced_job.spans
    [run] = [span for span in spans if span.name == "loc-payments collect"]
    assert run.parent_span_id == ""  # a root: the run's own trace
    assert (run.attributes["loc.collect.failed"], run.attributes["loc.collect.eligible"]) == (1, 1)
    calls = [span.name for span in spans if span.trace_id == run.trace_id]
    assert "DynamoDB.Query" in calls  # GSI2's RETRY payments
    assert calls.count("DynamoDB.TransactWriteItems") == 1  # the one move to FAILED
    items = client.scan(TableName=moto_config.table_name)["Items"]
    [event] = [item for item in items if item["SK"]["S"].startswith("HISTORY#")]
    assert event["loc_trace_parent"]["S"].split("-")[1] == run.trace_id


def test_a_reshard_run_is_one_trace(
    moto_config: DynamoConfig,
    traced_job: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = _client(moto_config)
    for _ in range(3):
        payment = payment_in(PaymentStatus.PENDING, PaymentMethod.ACH)
        client.put_item(TableName=moto_config.table_name, Item=to_item(payment))
    monkeypatch.setenv("LOC_GSI2_SHARDS", "4")
    monkeypatch.setenv("LOC_GSI2_READ_SHARDS", "1")

    assert main(["reshard"]) == 0

    spans = traced_job.spans
    [run] = [span for span in spans if span.name == "loc-payments reshard"]
    assert run.parent_span_id == ""
    assert run.attributes["loc.reshard.scanned"] == 3
    calls = [span.name for span in spans if span.trace_id == run.trace_id]
    # From the seed's one partition, every payment moves to one of the four.
    assert run.attributes["loc.reshard.moved"] == 3
    assert calls.count("DynamoDB.UpdateItem") == 3
