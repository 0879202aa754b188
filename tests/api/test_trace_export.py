"""`LOC_OTEL_EXPORTER=otlp` (issue 32): spans reach an OTLP/HTTP receiver of the test's own
(protobuf decoded with opentelemetry-proto) while the service runs, and a collector that does
not answer costs requests nothing: export is batched on the processor's thread."""

from __future__ import annotations

import time

import pytest

from datasource import DynamoConfig
from tests.api.conftest import api_client
from tests.api.documents import PAYMENT
from tests.otlp_receiver import receiving, silent_collector

# The processor sends what it has every 20 ms, so the tests wait little.
QUICK_BATCHES = "20"


async def test_spans_reach_an_otlp_receiver_while_the_service_runs(
    moto_config: DynamoConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiving() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", QUICK_BATCHES)
        async with api_client(moto_config, otel_exporter="otlp") as api:
            created = await api.create(user="alice", loan="loan-1")
            ids = {"u": "alice", "l": "loan-1", "p": created["paymentId"]}
            await api.data(PAYMENT, ids)
            received = await receiver.wait_for(
                lambda spans: any(span.name == "query Payment" for span in spans)
            )

    [query] = [span for span in received if span.name == "query Payment"]
    assert query.kind == "SPAN_KIND_SERVER"
    assert query.service == "loc-payments"
    assert query.attributes["graphql.operation.type"] == "query"
    assert query.attributes["graphql.operation.name"] == "Payment"
    calls = [
        span
        for span in received
        if span.trace_id == query.trace_id and span.kind == "SPAN_KIND_CLIENT"
    ]
    assert {span.name for span in calls} == {"DynamoDB.GetItem", "DynamoDB.Query"}
    assert all(span.attributes["rpc.system"] == "aws-api" for span in calls)
    assert all(
        span.attributes["aws.dynamodb.table_names"] == [moto_config.table_name] for span in calls
    )
    [creation] = [span for span in received if span.name == "mutation"]  # unnamed
    assert creation.attributes["graphql.operation.type"] == "mutation"
    assert [span.name for span in received if span.trace_id == creation.trace_id].count(
        "DynamoDB.TransactWriteItems"
    ) == 1


# The exporter's timeout: an export on the request's path would hold a request this long.
EXPORT_TIMEOUT_SECONDS = 4


async def test_a_collector_that_does_not_answer_costs_requests_nothing(
    moto_config: DynamoConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    with silent_collector() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", str(EXPORT_TIMEOUT_SECONDS))
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", QUICK_BATCHES)
        async with api_client(moto_config, otel_exporter="otlp") as api:
            created = await api.create(user="alice", loan="loan-1")
            ids = {"u": "alice", "l": "loan-1", "p": created["paymentId"]}
            durations = []
            started = time.monotonic()
            # Requests for longer than one export's timeout: exports are tried all along.
            while time.monotonic() - started < EXPORT_TIMEOUT_SECONDS * 1.25:
                before = time.monotonic()
                data = await api.data(PAYMENT, ids)
                durations.append(time.monotonic() - before)
                assert data["payment"]["paymentId"] == created["paymentId"]
            tried = collector.connections
            stopping = time.monotonic()
        stopped = time.monotonic() - stopping

    assert tried >= 1  # the exporter did try to send while the requests ran, and got no answer
    assert len(durations) > 10
    # No request waited on an export: each took less than half an export's timeout, a margin no
    # loaded machine uses up (the requests' own latency is `make bench`'s to measure).
    assert max(durations) < EXPORT_TIMEOUT_SECONDS / 2, sorted(durations)[-3:]
    # Stopping waits for what is left to be sent for one export's timeout, then for the export in
    # flight, whatever number of batches is left (the SDK alone would try each, up to 30 s).
    assert stopped < 2 * EXPORT_TIMEOUT_SECONDS + 4
