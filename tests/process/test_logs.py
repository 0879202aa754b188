"""The JSON lines (`process.logs`): a request line written without a `LogRecord` is the line the
formatter writes of the record `logger.info(message, extra=fields)` makes, and a service's
request line holds every field of the audit trail, whichever way it was written."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO, cast

import pytest

from datasource import DynamoConfig
from process.logs import JsonHandler, configure_logging
from tests.api.conftest import api_client

# docs/operating.md ("Logs") and docs/callers-and-errors.md (the costs), in the line's order.
REQUEST_FIELDS = [
    "time", "level", "name", "message", "request_id", "operation", "caller_kind", "duration_ms",
    "dynamodb_calls", "dynamodb_operations", "dynamodb_rcu", "dynamodb_wcu",
    "dynamodb_items_read", "dynamodb_throttles", "outcome", "error_codes", "requested_cost",
    "actual_cost",
]  # fmt: skip
PAYMENT = """query Payment {
  payment(userId: "alice", loanId: "loan-1", paymentId: "0190f5a4-0000-7000-8000-000000000000") {
    status
  }
}"""


@pytest.fixture(params=["string", "file"])
def json_lines(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[JsonHandler, Callable[[], str]]]:
    """The root logger's one handler: JSON lines into a string, or a file (whose descriptor
    takes the lines written straight); and what was written."""
    with contextlib.ExitStack() as stack:
        if request.param == "string":
            stream: TextIO = io.StringIO()
            written = cast(io.StringIO, stream).getvalue
        else:
            path = tmp_path / "lines.json"
            stream = stack.enter_context(path.open("w", encoding="utf-8"))
            written = path.read_text
        handler = configure_logging(log_format="json", local=False, stream=stream)
        try:
            yield cast(JsonHandler, handler), written
        finally:
            logging.getLogger().removeHandler(handler)


@pytest.mark.parametrize(
    "created",
    # Within a second, at its last millisecond, across a minute, a day and a year.
    [1764660205.209, 1764660205.9995, 1764660206.0, 1767225599.999, 1767225600.001],
)
@pytest.mark.parametrize(
    "fields",
    [
        {"request_id": "r-1", "operation": "Payment", "duration_ms": 12.494, "rcu": 0.0,
         "operations": {"GetItem": 1}, "error_codes": [], "requested_cost": None},
        {"request_id": "r-2", "operation": "Opération_€", "calls": 3, "wcu": 1.25,
         "operations": {}, "error_codes": ["NOT_FOUND", "FORBIDDEN"], "actual_cost": 10},
    ],
)  # fmt: skip
def test_a_line_written_straight_is_the_formatter_s_line(
    json_lines: tuple[JsonHandler, Callable[[], str]], created: float, fields: dict[str, Any]
) -> None:
    handler, written = json_lines
    message = "Payment service OK in 12.5 ms, 1 DynamoDB calls (100%)"
    logger = logging.getLogger("loc_payments.request")
    record = logger.makeRecord(logger.name, logging.INFO, "", 0, message, (), None, extra=fields)
    record.created, record.msecs = created, int((created - int(created)) * 1000) + 0.0

    # Between two records through `logging`, in its place.
    logger.info("before")
    handler.write_info("loc_payments.request", message, fields, created)
    logger.info("after")

    before, line, after = written().splitlines()
    assert line == handler.format(record)
    assert (json.loads(before)["message"], json.loads(after)["message"]) == ("before", "after")


@pytest.mark.parametrize("beside", [None, logging.NullHandler()], ids=["alone", "beside another"])
async def test_every_request_line_holds_every_field_in_order(
    moto_config: DynamoConfig, beside: logging.Handler | None
) -> None:
    """Alone (as in the running service), the JSON handler is given the line straight, with no
    `LogRecord` made; beside another handler, the line goes through `logging` as a record: the
    same line either way."""
    made: list[str] = []
    factory = logging.getLogRecordFactory()

    def counted(name: str, *args: Any, **kwargs: Any) -> logging.LogRecord:
        made.append(name)
        return factory(name, *args, **kwargs)

    stream = io.StringIO()
    # Here, not in a fixture: pytest adds its capture's handlers after the fixtures, and this
    # takes every other handler off the root logger.
    handler = configure_logging(log_format="json", local=False, stream=stream)
    logging.setLogRecordFactory(counted)
    if beside is not None:
        logging.getLogger().addHandler(beside)
    try:
        async with api_client(moto_config) as api:
            await api.post(PAYMENT, as_=None)
            await api.post(PAYMENT)
    finally:
        logging.setLogRecordFactory(factory)
        logging.getLogger().removeHandler(handler)
        if beside is not None:
            logging.getLogger().removeHandler(beside)

    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    requests = [line for line in lines if line["name"] == "loc_payments.request"]
    assert made.count("loc_payments.request") == (0 if beside is None else 2)
    assert [list(line) for line in requests] == [REQUEST_FIELDS, REQUEST_FIELDS]
    refused, found = requests
    assert (refused["level"], refused["caller_kind"], refused["outcome"]) == (
        "INFO", "anonymous", "UNAUTHENTICATED",
    )  # fmt: skip
    assert refused["error_codes"] == ["UNAUTHENTICATED"] and refused["dynamodb_calls"] == 0
    assert (found["operation"], found["caller_kind"], found["outcome"]) == (
        "Payment", "service", "OK",
    )  # fmt: skip
    assert found["dynamodb_calls"] == 1 and found["dynamodb_operations"] == {"GetItem": 1}
    assert found["dynamodb_items_read"] == 0  # no such payment
    tenths = (round(found["duration_ms"] * 1000) + 50) // 100  # half a tenth reads up
    assert found["message"] == (
        f"Payment service OK in {tenths // 10}.{tenths % 10} ms, 1 DynamoDB calls"
    )
    assert found["requested_cost"] >= 1 and found["actual_cost"] >= 1
    assert len(found["request_id"]) == 32 and found["dynamodb_throttles"] == 0


async def test_a_pass_s_request_and_payment_audit_lines_wait_for_its_end_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "lines.json"
    with path.open("w", encoding="utf-8") as stream:
        handler = cast(
            JsonHandler, configure_logging(log_format="json", local=False, stream=stream)
        )
        descriptor, writes, os_write = stream.fileno(), [], os.write

        def counted(fd: int, data: bytes) -> int:
            writes.append(fd)
            return os_write(fd, data)

        monkeypatch.setattr(os, "write", counted)
        try:
            audit = logging.getLogger("loc_payments.audit")
            handler.write_info("loc_payments.request", "first", {"request_id": "r-1"}, 1.0)
            audit.info("payment.created", extra={"event": "payment.created"})
            handler.write_info("loc_payments.request", "second", {"request_id": "r-2"}, 1.0)
            waiting = path.read_text()
            await asyncio.sleep(0)  # the loop's next pass
            after_pass = path.read_text()
            # Any other line, as an operator's audit line, at once, after those waiting.
            handler.write_info("loc_payments.request", "third", {"request_id": "r-3"}, 1.0)
            audit.info("webhook", extra={"event": "webhook_endpoint.deleted"})
            at_once = path.read_text()
        finally:
            logging.getLogger().removeHandler(handler)

    assert waiting == ""
    messages = [json.loads(line)["message"] for line in after_pass.splitlines()]
    assert messages == ["first", "payment.created", "second"]
    assert writes == [descriptor, descriptor]  # one for the pass; one for the last two
    assert [json.loads(line)["message"] for line in at_once.splitlines()][3:] == [
        "third",
        "webhook",
    ]
