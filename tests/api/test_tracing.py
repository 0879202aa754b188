"""Traces (issue 32, SPEC §16), through the API, with the SDK's in-memory exporter: one SERVER
span per operation over its DataLoader batches and DynamoDB calls, the caller's `traceparent`
as its parent, the outcome (a typed error, a masked one), the DynamoDB calls' retries and the
breaker's refusals, and the trace an event item keeps of the request that wrote it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from datasource import DynamoConfig
from tests.api.conftest import (
    SERVICE,
    Api,
    api_client,
    error_codes,
    stored_items,
)
from tests.api.documents import PAYMENT
from tests.api.faults import FaultyDynamoDB, faulty_settings
from tests.spans import Spans

LOAN_PAGE = """query LoanPage($u: ID, $l: ID!) {
  loan(userId: $u, loanId: $l) {
    payments(first: 10) { edges { node { paymentId status amountCents loan { loanId } } } }
  }
}"""
SKIP = """mutation Skip($input: SkipPaymentInput!) {
  skipPayment(input: $input) { __typename ... on UserError { code message } }
}"""
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
TRACERESPONSE = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


@pytest.fixture
def spans() -> Iterator[Spans]:
    spans = Spans()
    yield spans
    spans.provider.shutdown()


async def _post(
    api: Api, query: str, variables: dict[str, Any], **headers: str
) -> tuple[dict[str, Any], dict[str, str]]:
    response = await api.http.post(
        "/graphql",
        json={"query": query, "variables": variables},
        headers={"Authorization": f"Bearer {SERVICE}", **headers},
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body, dict(response.headers)


def _ids(payment: dict[str, Any]) -> dict[str, str]:
    return {"u": payment["userId"], "l": payment["loanId"], "p": payment["paymentId"]}


def _hex(number: int, digits: int) -> str:
    return f"{number:0{digits}x}"


async def test_an_operation_is_one_server_span_over_its_batches_and_calls(
    moto_config: DynamoConfig, spans: Spans
) -> None:
    async with api_client(moto_config, tracer_provider=spans.provider) as api:
        created = await api.create(user="alice", loan="loan-1")
        spans.clear()
        body, headers = await _post(api, PAYMENT, _ids(created))
    assert body["data"]["payment"]["paymentId"] == created["paymentId"]

    server = spans.server()
    assert server.name == "query Payment"
    assert server.parent is None  # no traceparent sent: a trace of its own
    assert server.attributes is not None
    assert dict(server.attributes) == {
        "graphql.operation.type": "query",
        "graphql.operation.name": "Payment",
        "loc.caller.kind": "service",
        "loc.request_id": headers["x-request-id"],
        "loc.graphql.outcome": "OK",
    }
    assert server.status.status_code is StatusCode.UNSET
    finished = spans.finished()
    assert {span.context.trace_id for span in finished} == {server.context.trace_id}
    # The payment's lookup (no other request's to share its call with) and its history: no
    # span for any of the fields resolved.
    calls = {span.name: span for span in finished if span.kind is SpanKind.CLIENT}
    assert sorted(calls) == ["DynamoDB.GetItem", "DynamoDB.Query"]
    assert spans.chain(calls["DynamoDB.GetItem"]) == [
        "DynamoDB.GetItem",
        "DataLoader payments",
        "query Payment",
    ]
    assert spans.chain(calls["DynamoDB.Query"]) == [
        "DynamoDB.Query",
        "DataLoader histories",
        "query Payment",
    ]
    assert len(finished) == 5
    get = calls["DynamoDB.GetItem"].attributes
    assert get is not None
    assert get["rpc.system"] == "aws-api"
    assert get["rpc.service"] == "DynamoDB"
    assert get["rpc.method"] == "GetItem"
    assert get["aws.dynamodb.table_names"] == (moto_config.table_name,)
    assert get["aws.dynamodb.consistent_read"] is False
    assert get["aws.request_id"]
    # What is usually nothing is left out: no retry, no error status.
    assert "loc.dynamodb.retries" not in get and "http.response.status_code" not in get
    capacity = get["aws.dynamodb.consumed_capacity"]
    assert isinstance(capacity, tuple) and len(capacity) == 1
    assert json.loads(str(capacity[0]))["TableName"] == moto_config.table_name
    # Keys hold user ids: no attribute holds the user's.
    recorded = [str(value) for span in finished for value in (span.attributes or {}).values()]
    assert not any("alice" in value for value in recorded)


async def test_a_loan_page_of_many_payments_is_three_spans(
    moto_config: DynamoConfig, spans: Spans
) -> None:
    async with api_client(moto_config, tracer_provider=spans.provider) as api:
        for _ in range(5):
            await api.create(user="alice", loan="loan-1")
        spans.clear()
        body, _ = await _post(api, LOAN_PAGE, {"u": "alice", "l": "loan-1"})
    assert len(body["data"]["loan"]["payments"]["edges"]) == 5

    names = sorted(span.name for span in spans.finished())
    assert names == ["DataLoader loan_pages", "DynamoDB.Query", "query LoanPage"]
    [query] = [span for span in spans.finished() if span.kind is SpanKind.CLIENT]
    assert query.attributes is not None
    assert query.attributes["aws.dynamodb.count"] == 5
    assert query.attributes["aws.dynamodb.limit"] == 11  # a page of 10 and one to know more
    assert query.attributes["aws.dynamodb.scan_forward"] is False


async def test_the_callers_traceparent_is_the_parent_and_the_answer_names_the_span(
    moto_config: DynamoConfig, spans: Spans
) -> None:
    async with api_client(moto_config, tracer_provider=spans.provider) as api:
        created = await api.create(user="alice", loan="loan-1")
        spans.clear()
        _, headers = await _post(
            api, PAYMENT, _ids(created), traceparent=TRACEPARENT, tracestate="vendor=opaque"
        )

    server = spans.server()
    assert server.parent is not None and server.parent.is_remote
    assert (_hex(server.parent.trace_id, 32), _hex(server.parent.span_id, 16)) == (
        TRACE_ID,
        PARENT_ID,
    )
    assert _hex(server.context.trace_id, 32) == TRACE_ID
    assert server.context.trace_state.get("vendor") == "opaque"
    # W3C Trace Context Level 2: the trace and the server's own span.
    assert headers["traceresponse"] == f"00-{TRACE_ID}-{_hex(server.context.span_id, 16)}-01"


@pytest.mark.parametrize(
    "traceparent",
    [
        "00-xyz",
        f"00-{'0' * 32}-{PARENT_ID}-01",  # an all-zero trace id
        f"00-{TRACE_ID}-{PARENT_ID}-01-extra",
        "x" * 600,
    ],
)
async def test_a_malformed_traceparent_starts_a_new_trace(
    moto_config: DynamoConfig, spans: Spans, traceparent: str
) -> None:
    async with api_client(moto_config, tracer_provider=spans.provider) as api:
        created = await api.create(user="alice", loan="loan-1")
        spans.clear()
        body, headers = await _post(
            api, PAYMENT, _ids(created), traceparent=traceparent, tracestate="=\x7f bad"
        )

    assert "errors" not in body, body
    server = spans.server()
    assert server.parent is None
    assert _hex(server.context.trace_id, 32) != TRACE_ID
    found = TRACERESPONSE.fullmatch(headers["traceresponse"])
    assert found is not None and found.group(1) == _hex(server.context.trace_id, 32)


async def test_a_typed_error_is_an_answer_recorded_on_the_span(
    moto_config: DynamoConfig, spans: Spans
) -> None:
    async with api_client(moto_config, tracer_provider=spans.provider) as api:
        spans.clear()
        missing = {
            "userId": "alice",
            "loanId": "loan-1",
            "paymentId": "0190f5a4-0000-7000-8000-000000000000",
            "reason": "no such payment",
        }
        body, _ = await _post(api, SKIP, {"input": missing})
    assert body["data"]["skipPayment"]["code"] == "NOT_FOUND"

    server = spans.server()
    assert server.name == "mutation Skip"
    assert server.attributes is not None
    assert server.attributes["loc.graphql.outcome"] == "NOT_FOUND"
    assert server.attributes["loc.graphql.user_error_codes"] == ("NOT_FOUND",)
    assert "loc.graphql.error_codes" not in server.attributes
    # The caller's mistake, not a failure of ours.
    assert server.status.status_code is StatusCode.UNSET


async def test_a_masked_error_is_recorded_with_its_exception(
    moto_config: DynamoConfig, spans: Spans
) -> None:
    async with api_client(moto_config, tracer_provider=spans.provider) as api:
        created = await api.create(user="alice", loan="loan-1")
        _raw(moto_config).update_item(
            TableName=moto_config.table_name,
            Key={
                "PK": {"S": "USER#alice"},
                "SK": {"S": f"LOAN#loan-1#PAYMENT#{created['paymentId']}"},
            },
            UpdateExpression="SET loc_status = :s",
            ExpressionAttributeValues={":s": {"S": "NOT_A_STATUS"}},
        )
        spans.clear()
        body, _ = await _post(api, PAYMENT, _ids(created))
    assert error_codes(body) == ["INTERNAL"]
    assert body["errors"][0]["message"] == "Unexpected error."

    server = spans.server()
    assert server.attributes is not None
    assert server.attributes["loc.graphql.outcome"] == "INTERNAL"
    assert server.attributes["loc.graphql.error_codes"] == ("INTERNAL",)
    assert server.status.status_code is StatusCode.ERROR
    [exception] = [event for event in server.events if event.name == "exception"]
    assert exception.attributes is not None
    assert exception.attributes["exception.type"] == server.attributes["error.type"]
    assert "NOT_A_STATUS" in str(exception.attributes["exception.message"])


async def test_the_document_is_recorded_only_with_the_setting_and_the_variables_never(
    moto_config: DynamoConfig, spans: Spans
) -> None:
    secret_user = "user-whose-id-is-personal"
    async with api_client(moto_config, tracer_provider=spans.provider) as api:
        spans.clear()
        await _post(api, LOAN_PAGE, {"u": secret_user, "l": "loan-1"})
        without = spans.server()
    async with api_client(
        moto_config, tracer_provider=spans.provider, otel_graphql_document=True
    ) as api:
        spans.clear()
        await _post(api, LOAN_PAGE, {"u": secret_user, "l": "loan-1"})
        with_document = spans.server()
        everything = spans.finished()

    assert without.attributes is not None and "graphql.document" not in without.attributes
    assert with_document.attributes is not None
    assert with_document.attributes["graphql.document"] == LOAN_PAGE
    recorded = [
        str(value)
        for span in everything
        for source in (span.attributes, *(event.attributes for event in span.events))
        for value in (source or {}).values()
    ]
    assert not any(secret_user in value for value in recorded)


async def test_an_event_item_keeps_the_trace_of_the_request_that_wrote_it(
    moto_config: DynamoConfig, spans: Spans
) -> None:
    async with api_client(moto_config, tracer_provider=spans.provider) as api:
        spans.clear()
        created = await api.create(user="alice", loan="loan-1")
        server = spans.server()
    async with api_client(moto_config) as untraced:
        await untraced.move("skipPayment", created)

    events = [item for item in stored_items(moto_config) if item["SK"]["S"].startswith("HISTORY#")]
    assert [item["loc_version"]["N"] for item in events] == ["1", "2"]
    written = server.context
    trace_id, span_id = _hex(written.trace_id, 32), _hex(written.span_id, 16)
    flags = _hex(written.trace_flags, 2)  # sampled (and, a trace begun here, random: 03)
    assert events[0]["loc_trace_parent"] == {"S": f"00-{trace_id}-{span_id}-{flags}"}
    assert "loc_trace_parent" not in events[1]  # written with tracing off


async def test_a_throttled_call_records_each_attempt_and_its_retries(
    faulty: FaultyDynamoDB,
    spans: Spans,
) -> None:
    config = DynamoConfig(table_name="payments", region="us-west-2", endpoint_url=faulty.url)
    async with api_client(config, tracer_provider=spans.provider, **faulty_settings(faulty)) as api:
        spans.clear()
        body = await api.post(LOAN_PAGE, {"u": "alice", "l": "loan-1"})
    assert error_codes(body) == ["UNAVAILABLE"]

    [call] = [span for span in spans.finished() if span.kind is SpanKind.CLIENT]
    assert call.attributes is not None
    assert call.attributes["error.type"] == "ThrottlingException"
    assert call.attributes["http.response.status_code"] == 400
    assert call.attributes["loc.dynamodb.retries"] == 2  # max_attempts 3: three tries
    assert call.status.status_code is StatusCode.ERROR
    failed = [event for event in call.events if event.name == "dynamodb.attempt_failed"]
    assert [event.attributes["loc.dynamodb.attempt"] for event in failed] == [1, 2, 3]  # type: ignore[index]
    server = spans.server()
    assert server.attributes is not None
    assert server.attributes["loc.graphql.outcome"] == "UNAVAILABLE"
    assert server.status.status_code is StatusCode.ERROR


async def test_the_breakers_refusal_is_a_failed_call_span(
    faulty: FaultyDynamoDB,
    spans: Spans,
) -> None:
    # No answer within the read timeout: each try is a failure of the breaker (5 open it).
    faulty.mode, faulty.delay = "slow", 1.0
    config = DynamoConfig(table_name="payments", region="us-west-2", endpoint_url=faulty.url)
    settings = faulty_settings(faulty) | {"dynamodb_breaker_probe_interval": 30.0}
    async with api_client(config, tracer_provider=spans.provider, **settings) as api:
        for _ in range(2):  # three tries each
            await api.post(LOAN_PAGE, {"u": "alice", "l": "loan-1"})
        timed_out = [span for span in spans.finished() if span.kind is SpanKind.CLIENT]
        spans.clear()
        body = await api.post(LOAN_PAGE, {"u": "alice", "l": "loan-1"})
    assert error_codes(body) == ["UNAVAILABLE"]

    first = timed_out[0]
    assert first.attributes is not None
    assert first.attributes["error.type"] == "ReadTimeoutError"
    assert first.attributes["loc.dynamodb.attempts"] == 3
    assert first.status.status_code is StatusCode.ERROR
    [refused] = [span for span in spans.finished() if span.kind is SpanKind.CLIENT]
    assert refused.attributes is not None
    assert refused.attributes["loc.dynamodb.breaker_refused"] is True
    assert refused.attributes["error.type"] == "StorageUnavailable"
    assert refused.status.status_code is StatusCode.ERROR
    assert refused.end_time is not None and refused.start_time is not None
    assert refused.end_time - refused.start_time < 50_000_000  # refused at once (50 ms)


def _raw(config: DynamoConfig) -> Any:
    return boto3.client(
        "dynamodb",
        region_name=config.region,
        endpoint_url=config.endpoint_url,
        aws_access_key_id="testkey",
        aws_secret_access_key="testkey",
    )
