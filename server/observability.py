"""Per-request log line and Prometheus metrics, from one observer of finished operations.

Metrics (`prometheus-client`, one registry per app):
    loc_payments_requests_total{operation, outcome}          GraphQL operations
    loc_payments_request_duration_seconds{operation}         their latency (histogram)
    loc_payments_dynamodb_calls_total{api, outcome}          DynamoDB calls ("ok" or error code)
    loc_payments_dynamodb_capacity_units_total{operation, api, kind}
                                                             the units they consumed, kind read
                                                             or write (`datasource.accounting`)
    loc_payments_dynamodb_throttles_total{api, index}        attempts DynamoDB throttled, by API and
                                                             index (`table`: the table itself), each
                                                             retried within the budget
                                                             (`datasource.retries`)
    loc_payments_dynamodb_breaker_open                       1 while the circuit breaker is open
    loc_payments_dynamodb_breaker_opens_total                times it opened
    loc_payments_dynamodb_breaker_open_seconds_total         time spent open
    loc_payments_transitions_total{from_status, to_status}   status moves written
    loc_payments_errors_total{code}                          errors and UserError answers
    loc_payments_throttled_total{class}                      operations refused over their
                                                             caller's budget (THROTTLED), by
                                                             class: customer or service
    loc_payments_field_usage_total{client, field}            per operation run for an
                                                             authenticated caller and not refused,
                                                             each schema coordinate it selected
                                                             (`Type.field`, an argument, an enum
                                                             value): who still uses a field
                                                             (SPEC §19)

The `operation` label is the name the caller gave its operation (or its first root field), so
the caller chooses it: the first `MAX_OPERATION_LABELS` distinct names that are GraphQL names of
at most 64 characters get a label each, and every other operation counts under `(other)`, so
no caller can grow the registry (and every scrape) without bound. So with `client`: the first
`MAX_CLIENT_LABELS` client names get a label each, any other `(other)`; an operation that names
none is `(unknown)`. `field` is bounded by the schema, so the field usage keeps at most one
count per client label and coordinate, whatever selections the clients make. Only operations
that ran for an authenticated caller and were not refused for it count (and take a label), so
no anonymous request can take the client labels.
"""

from __future__ import annotations

import logging
import re
from collections import Counter as Counter_
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from datasource.breaker import CircuitBreaker
from datasource.retries import Throttles
from engine import Observed
from resolvers.callers import Caller, Forbidden, Unauthenticated
from resolvers.context import Context

request_log = logging.getLogger("loc_payments.request")

# Latency buckets in seconds, from a cached lookup to a slow page.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# Distinct operation names with a label of their own; apps send a few dozen fixed operations.
MAX_OPERATION_LABELS = 100
# Not a GraphQL name, so no operation's own name can be taken for it.
OTHER_OPERATIONS = "(other)"
# Distinct client names (front ends, jobs, gateways) with a label of their own.
MAX_CLIENT_LABELS = 50
UNKNOWN_CLIENT = "(unknown)"
# An operation with one of these errors was refused for its caller: it counts no field usage.
CALLER_REFUSALS = frozenset({Unauthenticated.code, Forbidden.code})
_OPERATION_LABEL = re.compile(r"[_A-Za-z][_0-9A-Za-z]{0,63}")


@dataclass
class Metrics:
    registry: CollectorRegistry = field(
        default_factory=lambda: CollectorRegistry(auto_describe=True)
    )
    max_operation_labels: int = MAX_OPERATION_LABELS
    max_client_labels: int = MAX_CLIENT_LABELS
    # `loc_payments_field_usage_total` counted (`LOC_FIELD_USAGE`).
    field_usage: bool = True

    def __post_init__(self) -> None:
        r = self.registry
        self.requests = Counter(
            "loc_payments_requests", "GraphQL operations", ["operation", "outcome"], registry=r
        )
        self.duration = Histogram(
            "loc_payments_request_duration_seconds",
            "GraphQL operation latency",
            ["operation"],
            buckets=BUCKETS,
            registry=r,
        )
        self.dynamodb_calls = Counter(
            "loc_payments_dynamodb_calls", "DynamoDB API calls", ["api", "outcome"], registry=r
        )
        self.capacity_units = Counter(
            "loc_payments_dynamodb_capacity_units",
            "DynamoDB capacity units consumed, as DynamoDB reports them",
            ["operation", "api", "kind"],
            registry=r,
        )
        self.transitions = Counter(
            "loc_payments_transitions",
            "Payment status moves written",
            ["from_status", "to_status"],
            registry=r,
        )
        self.errors = Counter(
            "loc_payments_errors", "Errors and UserError answers", ["code"], registry=r
        )
        self.throttled_operations = Counter(
            "loc_payments_throttled",
            "Operations refused over their caller's budget",
            ["class"],
            registry=r,
        )
        # Webhook attempts this instance made: `delivered` (a 2xx), `retrying` (another attempt
        # is scheduled), `given_up` (the last of the schedule failed; the endpoint is FAILING).
        self.webhook_attempts = Counter(
            "loc_payments_webhook_attempts",
            "Webhook delivery attempts",
            ["outcome"],
            registry=r,
        )
        # Operations run, by client label and each coordinate they selected: bounded by the
        # labels times the schema's coordinates (a count per selection grew with each new one).
        self.field_usage_counts: dict[str, Counter_[str]] = {}
        r.register(_UsageCollector(self.field_usage_counts))
        # Each metric's child per label values, as `labels()` would find it again (it checks
        # and converts the values and takes a lock every time).
        self._children: dict[tuple[object, tuple[str, ...]], Any] = {}
        self._operations: set[str] = set()
        self._clients: set[str] = set()

    def _child(self, metric: Counter | Histogram, *values: str) -> Any:
        key = (metric, values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def _operation_label(self, operation: str) -> str:
        """`operation` itself while labels remain for new names, else `OTHER_OPERATIONS`."""
        if operation in self._operations:
            return operation
        if len(self._operations) < self.max_operation_labels and _OPERATION_LABEL.fullmatch(
            operation
        ):
            self._operations.add(operation)
            return operation
        return OTHER_OPERATIONS

    def _client_label(self, client: str | None) -> str:
        if client is None:
            return UNKNOWN_CLIENT
        if client in self._clients:
            return client
        if len(self._clients) < self.max_client_labels:
            self._clients.add(client)
            return client
        return OTHER_OPERATIONS

    def _count_usage(self, client: str | None, fields: frozenset[str]) -> None:
        if not fields:  # it did not run
            return
        label = self._client_label(client)
        counts = self.field_usage_counts.get(label)
        if counts is None:
            counts = self.field_usage_counts[label] = Counter_()
        counts.update(fields)  # counted in C, one key per coordinate

    def throttled(self, kind: str) -> None:
        """An operation refused over its caller's budget, of class `kind`."""
        self._child(self.throttled_operations, kind).inc()

    def webhook_attempt(self, outcome: str) -> None:
        self._child(self.webhook_attempts, outcome).inc()

    def watch_breaker(self, breaker: CircuitBreaker | None) -> None:
        """Report the store's circuit breaker (read at each scrape)."""
        if breaker is not None:
            self.registry.register(_BreakerCollector(breaker))

    def watch_throttles(self, throttles: Throttles) -> None:
        """Report the throttles the store's client met (read at each scrape)."""
        self.registry.register(_ThrottlesCollector(throttles))

    def observe(self, observed: Observed[Any]) -> None:
        """Count a finished operation and write its request log line."""
        context = observed.context
        if not isinstance(context, Context):
            return
        operation = observed.operation
        label = self._operation_label(operation)
        codes = [
            str((error.extensions or {}).get("code", "GRAPHQL_VALIDATION_FAILED"))
            for error in observed.errors
        ] + context.user_errors
        outcome = codes[0] if codes else "OK"
        calls = context.calls
        self._child(self.requests, label, outcome).inc()
        if (
            self.field_usage
            and isinstance(context.authenticated, Caller)
            and CALLER_REFUSALS.isdisjoint(codes)
        ):
            self._count_usage(context.client, observed.fields)
        self._child(self.duration, label).observe(observed.duration)
        for code in codes:
            self._child(self.errors, code).inc()
        if calls is not None:
            for (api, answer), count in calls.outcomes.items():
                self._child(self.dynamodb_calls, api, answer).inc(count)
            unanswered = {
                api: count - sum(n for (a, _), n in calls.outcomes.items() if a == api)
                for api, count in calls.operations.items()
            }
            for api, count in unanswered.items():
                if count > 0:
                    self._child(self.dynamodb_calls, api, "no_answer").inc(count)
            for api, units in calls.units_by_api.items():
                for kind, value in (("read", units.read), ("write", units.write)):
                    if value:
                        self._child(self.capacity_units, label, api, kind).inc(value)
        for source, target in context.writes:
            self._child(self.transitions, source.value if source else "NEW", target.value).inc()
        duration_ms = round(observed.duration * 1000, 3)
        request_log.info(
            "%s %s %s in %.1f ms, %d DynamoDB calls",
            operation,
            context.caller_kind,
            outcome,
            duration_ms,
            0 if calls is None else calls.requests,
            extra={
                "request_id": context.request_id,
                "operation": operation,
                "caller_kind": context.caller_kind,
                "duration_ms": duration_ms,
                "dynamodb_calls": 0 if calls is None else calls.requests,
                "dynamodb_operations": {} if calls is None else dict(calls.operations),
                "dynamodb_rcu": 0.0 if calls is None else round(calls.units.read, 2),
                "dynamodb_wcu": 0.0 if calls is None else round(calls.units.write, 2),
                "dynamodb_throttles": 0 if calls is None else sum(calls.throttles.values()),
                "outcome": outcome,
                "error_codes": codes,
                # Charged to the caller's budget (`server.budgets`); none when not charged.
                "requested_cost": None if context.cost is None else context.cost[0],
                "actual_cost": None if context.cost is None else context.cost[1],
            },
        )


class _UsageCollector(Collector):
    def __init__(self, counts: dict[str, Counter_[str]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "loc_payments_field_usage",
            "Schema coordinates selected, per operation run, by client",
            labels=["client", "field"],
        )
        for client, counts in sorted(self._counts.items()):
            for field_name, count in sorted(counts.items()):
                family.add_metric([client, field_name], count)
        yield family


class _ThrottlesCollector(Collector):
    def __init__(self, throttles: Throttles) -> None:
        self._throttles = throttles

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "loc_payments_dynamodb_throttles",
            "DynamoDB attempts throttled, each retried while its operation's budget allowed",
            labels=["api", "index"],
        )
        for (api, index), attempts in sorted(self._throttles.counts.items()):
            family.add_metric([api, index], attempts)
        yield family


class _BreakerCollector(Collector):
    def __init__(self, breaker: CircuitBreaker) -> None:
        self._breaker = breaker

    def collect(self) -> Iterator[Metric]:
        breaker = self._breaker
        yield GaugeMetricFamily(
            "loc_payments_dynamodb_breaker_open",
            "1 while the DynamoDB circuit breaker is open (requests fail at once)",
            value=1 if breaker.state == "open" else 0,
        )
        yield CounterMetricFamily(
            "loc_payments_dynamodb_breaker_opens",
            "Times the DynamoDB circuit breaker opened",
            value=breaker.opens,
        )
        yield CounterMetricFamily(
            "loc_payments_dynamodb_breaker_open_seconds",
            "Seconds the DynamoDB circuit breaker spent open",
            value=breaker.seconds_open,
        )
