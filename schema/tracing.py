"""Traces of GraphQL operations (OpenTelemetry's GraphQL conventions) and of live updates.

`operation_trace` makes one SERVER span per operation, HTTP or WebSocket, from before parsing to
the answer (`<type> <name>`, a child of the caller's trace), with the operation's type and name,
the caller's kind (never the user id), the request id and its outcome and codes; the document
only with LOC_OTEL_GRAPHQL_DOCUMENT, never the variables. A masked error or UNAVAILABLE sets the
status ERROR; a caller's mistake is an answer, not a failure. `delivery` makes one PRODUCER span
per live update sent, a trace of its own linked to the write and to the subscription. No span
per field; without a tracer each costs one check.

Every attribute: docs/operating.md ("What a trace holds").
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from graphql import DocumentNode, GraphQLError, OperationDefinitionNode
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from datasource import NO_SPAN, CurrentSpan, write_link
from domain.history import PaymentEvent
from engine import UNTRACED, Trace
from resolvers.context import Context
from schema.public_errors import is_unexpected, public_error

__all__ = ["delivery", "operation_trace", "record_errors"]

# The GraphQL conventions' name of a span whose operation type is unknown.
UNKNOWN_OPERATION = "GraphQL Operation"
VALIDATION_FAILED = "GRAPHQL_VALIDATION_FAILED"
# Failures of ours, not the caller's: the span's status is ERROR.
_SERVER_FAULTS = frozenset({"INTERNAL", "UNAVAILABLE"})


class OperationTrace:
    """One operation's span: current inside `with`, ended by `end` with its errors."""

    __slots__ = ("_context", "_current", "_span", "_token")

    def __init__(self, span: trace.Span, context: Context) -> None:
        self._span = span
        self._context = context
        self._current = trace.set_span_in_context(span)

    def __enter__(self) -> None:
        self._token = otel_context.attach(self._current)

    def __exit__(self, kind: object, error: BaseException | None, _: object) -> None:
        otel_context.detach(self._token)
        if error is not None:  # cancelled (the caller left), or raised past the runner
            self._span.set_attribute("error.type", type(error).__qualname__)
            self._span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            self._span.end()

    def end(self, errors: Sequence[GraphQLError]) -> None:
        """End the span with the operation's errors, before they are made public."""
        span = self._span
        codes = [_code(error) for error in errors]
        user_errors = list(self._context.user_errors)
        attributes: dict[str, Any] = {"loc.graphql.outcome": (codes + user_errors or ["OK"])[0]}
        # Only when there are any: each attribute is a share of the export's cost.
        if codes:
            attributes["loc.graphql.error_codes"] = codes
        if user_errors:
            attributes["loc.graphql.user_error_codes"] = user_errors
        span.set_attributes(attributes)
        for error in errors:
            if is_unexpected(error) and error.original_error is not None:
                span.record_exception(error.original_error)
                span.set_attribute("error.type", type(error.original_error).__qualname__)
        fault = next((code for code in codes if code in _SERVER_FAULTS), None)
        if fault is not None:
            if fault != "INTERNAL":  # an unexpected error's type is its exception's
                span.set_attribute("error.type", fault)
            span.set_status(Status(StatusCode.ERROR, fault))
        span.end()


def operation_trace(
    context: Any,
    document: DocumentNode | None,
    operation_name: str | None,
    query: str,
    started: float | None = None,
    *,
    record_document: bool = False,
) -> Trace:
    """The span of one operation (see the module's docstring), an `engine.Trace`; `started`
    (`time.perf_counter()`) is when it began, `query` is recorded with `record_document` (the
    setting)."""
    tracer = context.tracer if isinstance(context, Context) else None
    if tracer is None:
        return UNTRACED
    operation = _operation(document, operation_name)
    kind = operation.operation.value if operation is not None else None
    name = operation.name.value if operation is not None and operation.name else None
    attributes: dict[str, Any] = {
        "loc.caller.kind": context.caller_kind,
        "loc.request_id": context.request_id,
    }
    if kind is not None:
        attributes["graphql.operation.type"] = kind
    if name is not None:
        attributes["graphql.operation.name"] = name
    if record_document:
        attributes["graphql.document"] = query
    start_time = None
    if started is not None:
        start_time = time.time_ns() - int((time.perf_counter() - started) * 1e9)
    span = tracer.start_span(
        " ".join(part for part in (kind, name) if part) or UNKNOWN_OPERATION,
        context=context.trace_parent or otel_context.Context(),
        kind=SpanKind.SERVER,
        attributes=attributes,
        start_time=start_time,
    )
    context.span = span
    return OperationTrace(span, context)


def _operation(
    document: DocumentNode | None, operation_name: str | None
) -> OperationDefinitionNode | None:
    """The operation the request runs: the one named, or the document's only one."""
    if document is None:
        return None
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if operation_name is None:
        return operations[0] if len(operations) == 1 else None
    for operation in operations:
        if operation.name is not None and operation.name.value == operation_name:
            return operation
    return None


def _code(error: GraphQLError) -> str:
    """The `extensions.code` the caller reads for `error`, as `public_error` words it."""
    extensions = public_error(error).extensions or {}
    return str(extensions.get("code", VALIDATION_FAILED))


def record_errors(errors: Sequence[GraphQLError] | None) -> None:
    """A live update's errors, on its delivery span (current while its fields resolve)."""
    if not errors:
        return
    span = trace.get_current_span()
    if not span.is_recording():
        return
    codes = [_code(error) for error in errors]
    span.set_attribute("loc.graphql.error_codes", codes)
    for error in errors:
        if is_unexpected(error) and error.original_error is not None:
            span.record_exception(error.original_error)
    fault = next((code for code in codes if code in _SERVER_FAULTS), None)
    if fault is not None:
        span.set_status(Status(StatusCode.ERROR, fault))


def delivery(context: Context, event: PaymentEvent) -> AbstractContextManager[object]:
    """The span of sending one live update, current while its fields resolve and it is sent
    (the subscription's generator resumes once the message is out)."""
    tracer = context.tracer
    if tracer is None:
        return NO_SPAN
    links = write_link(event)
    if context.span is not None:
        links.append(Link(context.span.get_span_context(), {"loc.link": "subscription"}))
    span = tracer.start_span(
        "deliver paymentEvents",
        context=otel_context.Context(),
        kind=SpanKind.PRODUCER,
        links=links,
        attributes={
            "graphql.operation.type": "subscription",
            "loc.caller.kind": context.caller_kind,
            "loc.request_id": context.request_id,
            "loc.payment.version": event.version,
            "loc.payment.to_status": event.to_status.value,
        },
    )
    return CurrentSpan(span)
