"""Traces of the DynamoDB calls (OpenTelemetry's AWS SDK conventions), and the trace context an
event item carries from the request that wrote it to the instances that read it.

`CallSpans.attach` puts botocore hooks on the client that make one CLIENT span per DynamoDB call
made under a sampled span (an operation, a DataLoader batch, a coalesced lookup, a job's run),
ended with DynamoDB's answer or error; `abandoned` ends one that no answer ended (refused,
out of budget, cancelled). `current_traceparent` is what an event item stores, and `received`
and `write_link` link a reader's spans back to the write. Keys, items and expression values are
never recorded: they hold user ids. Without a tracer nothing is attached.

The spans and their attributes: docs/operating.md ("What a trace holds").
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import orjson
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

    from datasource.breaker import CircuitBreaker
    from domain.history import PaymentEvent

__all__ = [
    "NO_SPAN",
    "PROPAGATOR",
    "CallSpans",
    "CurrentSpan",
    "abandoned",
    "current_traceparent",
    "internal_span",
    "received",
    "record_error",
    "traceparent_of",
    "write_link",
]

_HOOK_ID = "loc-payments-tracing"
SERVICE = "DynamoDB"
BREAKER_REFUSED = "loc.dynamodb.breaker_refused"
# The W3C propagator: the one parser and writer of `traceparent` strings.
PROPAGATOR = TraceContextTextMapPropagator()
TRACEPARENT = "traceparent"
# What a block has for a span without a tracer: nothing, one object shared by all.
NO_SPAN: AbstractContextManager[None] = nullcontext()

# The span of the DynamoDB call this task is making, until its answer ends it.
_call_span: ContextVar[trace.Span | None] = ContextVar("dynamodb_call_span", default=None)

# Request parameters recorded as they are (the AWS SDK conventions' names).
_REQUEST_ATTRIBUTES = {
    "IndexName": "aws.dynamodb.index_name",
    "ConsistentRead": "aws.dynamodb.consistent_read",
    "Limit": "aws.dynamodb.limit",
    "ScanIndexForward": "aws.dynamodb.scan_forward",
    "Select": "aws.dynamodb.select",
}


class CallSpans:
    """The hooks that make one span per call of a client (see the module's docstring)."""

    def __init__(self, tracer: Tracer, breaker: CircuitBreaker | None = None) -> None:
        self._tracer = tracer
        self._breaker = breaker

    def attach(self, client: DynamoDBClient) -> None:
        """Put the hooks on `client`; before the breaker's, so that they see its refusals."""
        events = client.meta.events
        for event, hook in (
            ("before-parameter-build.dynamodb", self._start),
            ("before-call.dynamodb", self._mark_refusal),
            ("needs-retry.dynamodb", self._attempt),
            ("after-call.dynamodb", self._answered),
            ("after-call-error.dynamodb", self._unanswered),
        ):
            events.register(event, hook, unique_id=f"{_HOOK_ID}-{event.split('.')[0]}")

    def _start(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        parent = trace.get_current_span().get_span_context()
        if not (parent.is_valid and parent.trace_flags.sampled):
            return  # a call of no traced operation (a probe, the start): no span
        operation = str(model.name)
        attributes: dict[str, Any] = {
            "rpc.system": "aws-api",
            "rpc.service": SERVICE,
            "rpc.method": operation,
            "aws.dynamodb.table_names": _table_names(params),
        }
        for name, attribute in _REQUEST_ATTRIBUTES.items():
            if name in params:
                attributes[attribute] = params[name]
        items = _item_count(params)
        if items is not None:
            attributes["loc.dynamodb.items"] = items
        span = self._tracer.start_span(
            f"{SERVICE}.{operation}", kind=SpanKind.CLIENT, attributes=attributes
        )
        _call_span.set(span)

    def _mark_refusal(self, **_: Any) -> None:
        span = _call_span.get()
        if span is not None and self._breaker is not None and self._breaker.refuses():
            span.set_attribute(BREAKER_REFUSED, True)

    def _attempt(
        self,
        attempts: int = 0,
        response: Any = None,
        caught_exception: BaseException | None = None,
        **_: Any,
    ) -> None:
        span = _call_span.get()
        if span is None:
            return
        span.set_attribute("loc.dynamodb.attempts", attempts)
        if caught_exception is not None:
            failure = type(caught_exception).__name__
        elif response is not None and response[0].status_code >= 400:
            failure = _error_code(response[1], response[0].status_code)
        else:
            return
        span.add_event(
            "dynamodb.attempt_failed", {"loc.dynamodb.attempt": attempts, "error.type": failure}
        )

    def _answered(self, http_response: Any = None, parsed: Any = None, **_: Any) -> None:
        span = _call_span.get()
        if span is None:
            return
        _call_span.set(None)
        answer: Mapping[str, Any] = parsed if isinstance(parsed, Mapping) else {}
        status = int(getattr(http_response, "status_code", 200))
        metadata = answer.get("ResponseMetadata") or {}
        attributes: dict[str, Any] = {}
        retries = int(metadata.get("RetryAttempts") or 0)
        if retries:
            attributes["loc.dynamodb.retries"] = retries
        if "RequestId" in metadata:
            attributes["aws.request_id"] = str(metadata["RequestId"])
        capacity = answer.get("ConsumedCapacity")
        if capacity is not None:
            entries = capacity if isinstance(capacity, list) else [capacity]
            attributes["aws.dynamodb.consumed_capacity"] = [
                orjson.dumps(entry).decode() for entry in entries
            ]
        if "Count" in answer:
            attributes["aws.dynamodb.count"] = answer["Count"]
        if status >= 400:
            code = _error_code(answer, status)
            attributes["http.response.status_code"] = status
            attributes["error.type"] = code
            span.set_status(Status(StatusCode.ERROR, code))
        span.set_attributes(attributes)
        span.end()

    def _unanswered(self, exception: BaseException | None = None, **_: Any) -> None:
        if exception is not None:
            abandoned(exception)


def abandoned(error: BaseException) -> None:
    """End the span of the call this task was making, if no answer ended it: `error` (the
    breaker's refusal, the budget's end, a lost connection, a cancellation) says why."""
    span = _call_span.get()
    if span is None:
        return
    _call_span.set(None)
    kind = type(error).__name__
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, str(error) or kind))
    span.record_exception(error)
    span.end()


def _table_names(params: Mapping[str, Any]) -> list[str]:
    if "TableName" in params:
        return [str(params["TableName"])]
    if "RequestItems" in params:
        return sorted(str(name) for name in params["RequestItems"])
    names = {
        str(write["TableName"])
        for item in params.get("TransactItems", ())
        for write in item.values()
        if isinstance(write, Mapping) and "TableName" in write
    }
    return sorted(names)


def _item_count(params: Mapping[str, Any]) -> int | None:
    """The keys of a BatchGetItem, the writes of a BatchWriteItem or a transaction."""
    if "TransactItems" in params:
        return len(params["TransactItems"])
    requests = params.get("RequestItems")
    if requests is None:
        return None
    return sum(
        len(table["Keys"]) if isinstance(table, Mapping) else len(table)
        for table in requests.values()
    )


def _error_code(answer: Any, status: int) -> str:
    error = answer.get("Error", {}) if isinstance(answer, Mapping) else {}
    return str(error.get("Code") or status)


def internal_span(
    tracer: Tracer | None, name: str, attributes: Mapping[str, Any]
) -> AbstractContextManager[object]:
    """A span of our own work (a DataLoader batch), current inside the block; nothing without
    a tracer."""
    if tracer is None:
        return NO_SPAN
    # `CurrentSpan` rather than `start_as_current_span`: a third less CPU, without its generator.
    return CurrentSpan(tracer.start_span(name, attributes=attributes))


def record_error(error: BaseException) -> None:
    """Mark the current span as failed by `error` (one handed on rather than raised)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.record_exception(error)


class CurrentSpan:
    """`span` is the current span inside the block, and ends with it (nothing for None)."""

    __slots__ = ("_context", "_span", "_token")

    def __init__(self, span: trace.Span | None) -> None:
        self._span = span

    def __enter__(self) -> None:
        if self._span is not None:
            self._context = trace.set_span_in_context(self._span)
            self._token = otel_context.attach(self._context)

    def __exit__(self, kind: object, error: BaseException | None, _: object) -> None:
        span = self._span
        if span is None:
            return
        if isinstance(error, Exception):  # not a cancellation, nor a generator closed
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            span.record_exception(error)
        span.end()
        # A generator closed by the garbage collector ends in another task's context, where
        # there is nothing of ours to restore (and `detach` would log a failure).
        if otel_context.get_current() is self._context:
            otel_context.detach(self._token)


def current_traceparent() -> str | None:
    """The W3C `traceparent` of the current span, if it is sampled: what an event item keeps of
    the request that wrote it (`datasource.history`)."""
    span_context = trace.get_current_span().get_span_context()
    if not (span_context.is_valid and span_context.trace_flags.sampled):
        return None
    return traceparent_of(span_context)


def traceparent_of(span_context: SpanContext) -> str:
    """W3C's `traceparent` (version 00), as the propagator writes it."""
    trace_id = trace.format_trace_id(span_context.trace_id)
    span_id = trace.format_span_id(span_context.span_id)
    return f"00-{trace_id}-{span_id}-{span_context.trace_flags:02x}"


def span_context_of(traceparent: str | None) -> SpanContext | None:
    """The span a stored `traceparent` names; None for none, or one that does not parse."""
    if traceparent is None:
        return None
    found = trace.get_current_span(PROPAGATOR.extract({TRACEPARENT: traceparent}))
    span_context = found.get_span_context()
    return span_context if span_context.is_valid else None


def write_link(event: PaymentEvent, **attributes: Any) -> list[Link]:
    """A link to the request that wrote `event`, if it was traced."""
    written = span_context_of(event.trace_parent)
    if written is None:
        return []
    return [Link(written, {"loc.link": "write", **attributes})]


def received(
    tracer: Tracer | None, event: PaymentEvent, *, table_name: str, sequence_number: str
) -> AbstractContextManager[object]:
    """The span of one event read from the table's stream, linked to the write: when this
    instance received it. Its own trace (a CONSUMER span without a parent)."""
    if tracer is None:
        return NO_SPAN
    return CurrentSpan(
        tracer.start_span(
            "receive payment event",
            context=otel_context.Context(),
            kind=SpanKind.CONSUMER,
            links=write_link(event),
            attributes={
                "messaging.system": "aws_dynamodb_streams",
                "messaging.operation.type": "receive",
                "messaging.destination.name": table_name,
                "messaging.message.id": sequence_number,
                "loc.payment.version": event.version,
                "loc.payment.to_status": event.to_status.value,
            },
        )
    )
