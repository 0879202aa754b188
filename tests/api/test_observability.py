"""What the people who run the service see: request lines, the audit trail, metrics."""

from __future__ import annotations

import io
import json
import logging
import re
from datetime import datetime
from typing import Any

import pytest
from prometheus_client import generate_latest

from datasource import CallCount, DynamoConfig
from engine import Observed
from process.logs import configure_logging
from resolvers.context import Context
from resolvers.errors import Unauthenticated
from server.request_records import MAX_OPERATION_LABELS, OTHER_OPERATIONS, Metrics
from tests.api.conftest import SERVICE, Api, api_client
from tests.api.metrics import metric

# One DynamoDB call (a loan's page is one Query; paymentsByStatus is one a shard).
LIST = """query Retries {
  loan(userId: "alice", loanId: "loan-1") { payments(status: RETRY) { edges { cursor } } }
}"""


def records(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == name]


async def test_one_request_line_per_operation(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="loc_payments")
    response = await api.http.post(
        "/graphql",
        json={"query": LIST},
        headers={"Authorization": f"Bearer {SERVICE}", "X-Request-ID": "req-42"},
    )

    assert response.headers["X-Request-ID"] == "req-42"
    [line] = records(caplog, "loc_payments.request")
    fields: dict[str, Any] = line.__dict__
    assert fields["request_id"] == "req-42"
    assert fields["operation"] == "Retries"
    assert fields["caller_kind"] == "service"
    assert fields["outcome"] == "OK"
    assert fields["dynamodb_calls"] == 1
    assert fields["dynamodb_operations"] == {"Query": 1}
    assert fields["duration_ms"] > 0
    assert SERVICE not in caplog.text


async def test_a_request_id_is_made_when_none_or_a_strange_one_is_given(api: Api) -> None:
    for given in (None, "bad id\nwith a newline", "x" * 200):
        headers = {"Authorization": f"Bearer {SERVICE}"}
        if given is not None:
            headers["X-Request-ID"] = given
        response = await api.http.post("/graphql", json={"query": LIST}, headers=headers)
        made = response.headers["X-Request-ID"]
        assert made != given and len(made) == 32


async def test_errors_are_the_outcome(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="loc_payments")
    await api.post(LIST, as_=None)
    ghost = {
        "userId": "u",
        "loanId": "l",
        "paymentId": "0190f5a4-0000-7000-8000-000000000000",
        "reason": "r",
    }
    await api.mutate("skipPayment", ghost)
    outcomes = [line.__dict__["outcome"] for line in records(caplog, "loc_payments.request")]
    assert outcomes == ["UNAUTHENTICATED", "NOT_FOUND"]


async def test_every_write_is_one_audit_event(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="loc_payments.audit")
    payment = await api.create(method="ACH", reason="autopay run")
    await api.move("submitPayment", payment, confirmationId="c-1", reason="sent")
    await api.move("completePayment", payment, reason="settled")
    await api.move("skipPayment", payment, reason="refused: no audit")  # INVALID_TRANSITION
    await api.move("returnPayment", payment, returnCode="R10", reason="unauthorized")

    events = [line.__dict__ for line in records(caplog, "loc_payments.audit")]
    assert [(e["event"], e["from_status"], e["to_status"], e["version"]) for e in events] == [
        ("payment.created", None, "PENDING", 1),
        ("payment.transitioned", "PENDING", "ACHSENT", 2),
        ("payment.transitioned", "ACHSENT", "COMPLETED", 3),
        ("payment.transitioned", "COMPLETED", "RETURNED", 4),
    ]
    assert [e["reason"] for e in events] == ["autopay run", "sent", "settled", "unauthorized"]
    for event in events:
        assert (event["user_id"], event["loan_id"]) == ("alice", "loan-1")
        assert event["payment_id"] == payment["paymentId"]
        assert (event["actor_id"], event["actor_kind"]) == ("collections-job", "service")
        assert len(event["request_id"]) == 32
        assert event["at"].endswith("Z")


async def test_an_idempotent_replay_writes_no_audit_event(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="loc_payments.audit")
    request = {"userId": "u", "loanId": "l", "amountCents": 5, "method": "ACH"}
    for _ in range(3):
        await api.mutate("createPayment", {**request, "idempotencyKey": "k-1"})
    assert len(records(caplog, "loc_payments.audit")) == 1


async def test_metrics(api: Api) -> None:
    payment = await api.create(method="ACH")
    await api.move("submitPayment", payment, confirmationId="c-1")
    await api.post(LIST)
    await api.post(LIST, as_=None)

    text = (await api.http.get("/metrics")).text

    assert metric(text, "loc_payments_requests_total", operation="Retries", outcome="OK") == 1
    assert (
        metric(text, "loc_payments_requests_total", operation="Retries", outcome="UNAUTHENTICATED")
        == 1
    )
    assert metric(text, "loc_payments_request_duration_seconds_count", operation="Retries") == 2
    assert metric(text, "loc_payments_dynamodb_calls_total", api="Query", outcome="ok") == 1
    # The creation and the move: each the payment's write and its event, in one transaction.
    assert (
        metric(text, "loc_payments_dynamodb_calls_total", api="TransactWriteItems", outcome="ok")
        == 2
    )
    assert (
        metric(text, "loc_payments_transitions_total", from_status="PENDING", to_status="ACHSENT")
        == 1
    )
    assert (
        metric(text, "loc_payments_transitions_total", from_status="NEW", to_status="PENDING") == 1
    )
    assert metric(text, "loc_payments_errors_total", code="UNAUTHENTICATED") == 1


async def test_consumed_capacity_is_a_metric(api: Api) -> None:
    name = "loc_payments_dynamodb_capacity_units_total"
    await api.post(LIST)
    before = metric((await api.http.get("/metrics")).text, name, operation="Retries", kind="read")

    await api.post(LIST)

    after = metric((await api.http.get("/metrics")).text, name, operation="Retries", kind="read")
    assert before > 0 and after == 2 * before


async def test_callers_cannot_grow_the_operation_labels_without_bound(api: Api) -> None:
    await api.post(LIST)
    for number in range(MAX_OPERATION_LABELS + 20):
        await api.post(f"query Name{number} {{ __typename }}")
    await api.post("query " + "N" * 5000 + " { __typename }")
    await api.post(LIST)

    text = (await api.http.get("/metrics")).text
    labels = set(re.findall(r'^loc_payments_requests_total\{operation="([^"]*)"', text, re.M))
    # The first hundred names each have a label (`Retries` among them); the rest share one.
    assert len(labels) == MAX_OPERATION_LABELS + 1
    assert OTHER_OPERATIONS in labels and "Retries" in labels
    assert {f"Name{number}" for number in range(MAX_OPERATION_LABELS - 1)} < labels
    assert f"Name{MAX_OPERATION_LABELS - 1}" not in labels
    # Name99 to Name119, and the name too long for a label.
    assert metric(text, "loc_payments_requests_total", operation=OTHER_OPERATIONS) == 22
    # A name with a label keeps it after the labels ran out.
    assert metric(text, "loc_payments_requests_total", operation="Retries") == 2


async def test_metrics_can_be_off(moto_config: DynamoConfig) -> None:
    async with api_client(moto_config, metrics="off") as api:
        assert (await api.http.get("/metrics")).status_code == 404


def test_json_lines_or_text() -> None:
    stream = io.StringIO()
    handler = configure_logging(log_format="json", local=True, stream=stream)
    try:
        logging.getLogger("loc_payments.request").info(
            "Retries service OK", extra={"request_id": "r-1", "duration_ms": 1.5}
        )
        line = json.loads(stream.getvalue())
        assert line["message"] == "Retries service OK"
        assert (line["request_id"], line["duration_ms"], line["level"]) == ("r-1", 1.5, "INFO")

        stream = io.StringIO()
        handler = configure_logging(log_format="auto", local=True, stream=stream)
        logging.getLogger("loc_payments.request").info("not a terminal: JSON")
        assert json.loads(stream.getvalue())["message"] == "not a terminal: JSON"

        stream = io.StringIO()
        handler = configure_logging(log_format="text", local=True, stream=stream)
        logging.getLogger("loc_payments.request").info("readable")
        assert stream.getvalue().rstrip().endswith("loc_payments.request: readable")
    finally:
        logging.getLogger().removeHandler(handler)


@pytest.mark.parametrize(
    "created",
    # Within a second, at its last millisecond, across a minute, a day and a year.
    [1764660205.209, 1764660205.9995, 1764660206.0, 1767225599.999, 1767225600.001],
)
def test_a_json_line_s_time_is_logging_s_own(created: float) -> None:
    """The JSON formatter makes each second's text once; every line's `time` is still what
    `logging.Formatter` writes for it (local time, milliseconds), seconds apart or not."""
    stream = io.StringIO()
    handler = configure_logging(log_format="json", local=False, stream=stream)
    try:
        times = []
        for moment in (created - 1.0, created, created + 0.0004, created):
            record = logging.LogRecord("loc_payments.request", logging.INFO, "", 0, "m", (), None)
            record.created, record.msecs = moment, (moment - int(moment)) * 1000 // 1
            handler.handle(record)
            times.append((json.loads(stream.getvalue().splitlines()[-1])["time"], record))
        for written, record in times:
            assert written == logging.Formatter().formatTime(record)
    finally:
        logging.getLogger().removeHandler(handler)


def test_a_call_without_an_answer_is_counted_as_such() -> None:
    # A lost connection: the call was made (`operations`) and never answered (`outcomes`).
    metrics = Metrics()
    calls = CallCount(requests=3, operations={"GetItem": 2, "Query": 1})
    calls.outcomes = {("GetItem", "ok"): 1, ("Query", "ok"): 1}
    context = Context(
        store=None,  # type: ignore[arg-type]  # observing reads none
        max_attempts=3,
        clock=datetime.now,
        authenticated=Unauthenticated("no token"),
        calls=calls,
    )
    metrics.observe(Observed("Payment", context, [], 0.001))

    text = generate_latest(metrics.registry).decode()

    assert metric(text, "loc_payments_dynamodb_calls_total", api="GetItem", outcome="ok") == 1
    assert (
        metric(text, "loc_payments_dynamodb_calls_total", api="GetItem", outcome="no_answer") == 1
    )
    assert 'api="Query",outcome="no_answer"' not in text
