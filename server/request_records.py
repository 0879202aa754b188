"""Per-request log line and Prometheus metrics, from one observer of finished operations.

The metrics, plain counts given to the app's `prometheus-client` registry at each scrape, count
GraphQL operations and their latency, DynamoDB calls, units, throttles and the breaker, status
moves, errors, throttled operations, open subscriptions, and each schema coordinate an
authenticated caller selected (who still uses a field, SPEC §19). Every label a caller chooses is
bounded: the first `MAX_OPERATION_LABELS` operation names and `MAX_CLIENT_LABELS` client names get
a label each, any other `(other)`, and only operations that ran for an authenticated caller and
were not refused take a client label, so no caller can grow the registry (and every scrape)
without bound.

Every metric and label, and the log line's fields: docs/operating.md.
"""

from __future__ import annotations

import logging
import re
import time
from bisect import bisect_left
from collections import Counter as Counter_
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from datasource import CircuitBreaker, Throttles
from engine import Observed
from process.logs import log_info
from resolvers.callers import Caller
from resolvers.context import Context
from resolvers.errors import Forbidden, Unauthenticated
from resolvers.event_hub import EventHub

__all__ = ["MAX_OPERATION_LABELS", "OTHER_OPERATIONS", "Metrics"]

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
# Selections counted whole before they are spread over their coordinates (`_FieldUsage`).
MAX_PENDING_SELECTIONS = 32
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
        self.requests = _Counter(
            "loc_payments_requests", "GraphQL operations", ("operation", "outcome")
        )
        self.duration = _Histogram(
            "loc_payments_request_duration_seconds",
            "GraphQL operation latency",
            ("operation",),
            BUCKETS,
        )
        self.dynamodb_calls = _Counter(
            "loc_payments_dynamodb_calls", "DynamoDB API calls", ("api", "outcome")
        )
        self.capacity_units = _Counter(
            "loc_payments_dynamodb_capacity_units",
            "DynamoDB capacity units consumed, as DynamoDB reports them",
            ("operation", "api", "kind"),
        )
        self.transitions = _Counter(
            "loc_payments_transitions",
            "Payment status moves written",
            ("from_status", "to_status"),
        )
        self.errors = _Counter("loc_payments_errors", "Errors and UserError answers", ("code",))
        self.throttled_operations = _Counter(
            "loc_payments_throttled",
            "Operations refused over their caller's budget",
            ("class",),
        )
        # Webhook attempts this instance made: `delivered` (a 2xx), `retrying` (another attempt
        # is scheduled), `given_up` (the last of the schedule failed; the endpoint is FAILING).
        self.webhook_attempts = _Counter(
            "loc_payments_webhook_attempts", "Webhook delivery attempts", ("outcome",)
        )
        for metric in (
            self.requests,
            self.duration,
            self.dynamodb_calls,
            self.capacity_units,
            self.transitions,
            self.errors,
            self.throttled_operations,
            self.webhook_attempts,
        ):
            self.registry.register(metric)
        self.usage = _FieldUsage()
        self.registry.register(self.usage)
        self._operations: set[str] = set()
        self._clients: set[str] = set()

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

    def throttled(self, kind: str) -> None:
        """An operation refused over its caller's budget, of class `kind`."""
        self.throttled_operations.inc((kind,))

    def webhook_attempt(self, outcome: str) -> None:
        self.webhook_attempts.inc((outcome,))

    def watch_breaker(self, breaker: CircuitBreaker | None) -> None:
        """Report the store's circuit breaker (read at each scrape)."""
        if breaker is not None:
            self.registry.register(_BreakerCollector(breaker))

    def watch_throttles(self, throttles: Throttles) -> None:
        """Report the throttles the store's client met (read at each scrape)."""
        self.registry.register(_ThrottlesCollector(throttles))

    def watch_subscriptions(self, hub: EventHub) -> None:
        """Report the live updates' subscriptions by state (read at each scrape)."""
        self.registry.register(_SubscriptionsCollector(hub))

    def observe(self, observed: Observed[Any]) -> None:
        """Count a finished operation and write its request log line."""
        context = observed.context
        if not isinstance(context, Context):
            return
        operation = observed.operation
        label = self._operation_label(operation)
        # Most operations answer without an error: no comprehension to run.
        codes = (
            [
                str((error.extensions or {}).get("code", "GRAPHQL_VALIDATION_FAILED"))
                for error in observed.errors
            ]
            + context.user_errors
            if observed.errors
            else [*context.user_errors]
        )
        outcome = codes[0] if codes else "OK"
        calls = context.calls
        self.requests.inc((label, outcome))
        if (
            self.field_usage
            and isinstance(context.authenticated, Caller)
            and CALLER_REFUSALS.isdisjoint(codes)
        ):
            fields = observed.fields
            if fields:  # it ran
                self.usage.count(self._client_label(context.client), fields)
        self.duration.observe((label,), observed.duration)
        for code in codes:
            self.errors.inc((code,))
        if calls is not None:
            answered = 0
            for key, count in calls.outcomes.items():
                self.dynamodb_calls.inc(key, count)
                answered += count
            if answered < calls.requests:  # rare: a call lost its connection
                unanswered = dict(calls.operations)
                for key, count in calls.outcomes.items():
                    unanswered[key[0]] -= count
                for api, count in unanswered.items():
                    if count > 0:
                        self.dynamodb_calls.inc((api, "no_answer"), count)
            for api, units in calls.units_by_api.items():
                if units.read:
                    self.capacity_units.inc((label, api, "read"), units.read)
                if units.write:
                    self.capacity_units.inc((label, api, "write"), units.write)
        for source, target in context.writes:
            self.transitions.inc((source.value if source else "NEW", target.value))
        if not request_log.isEnabledFor(logging.INFO):
            return
        # In whole microseconds, then as milliseconds to three places and to one for the message:
        # `round(duration * 1000, 3)` and `%.1f` were a tenth of the line's cost. The same figures
        # but at a tie (a tenth's half reads up, where `%.1f` rounds half to even).
        micros = int(observed.duration * 1_000_000 + 0.5)
        tenths = (micros + 50) // 100
        caller_kind = context.caller_kind
        calls_made = 0 if calls is None else calls.requests
        log_info(
            request_log,
            f"{operation} {caller_kind} {outcome} in {tenths // 10}.{tenths % 10} ms, "
            f"{calls_made} DynamoDB calls",
            {
                "request_id": context.request_id,
                "operation": operation,
                "caller_kind": caller_kind,
                "duration_ms": micros / 1000,
                "dynamodb_calls": calls_made,
                "dynamodb_operations": {} if calls is None else dict(calls.operations),
                "dynamodb_rcu": 0.0 if calls is None else round(calls.units.read, 2),
                "dynamodb_wcu": 0.0 if calls is None else round(calls.units.write, 2),
                "dynamodb_items_read": 0 if calls is None else calls.items_read,
                "dynamodb_throttles": 0 if calls is None else sum(calls.throttles.values()),
                "outcome": outcome,
                "error_codes": codes,
                # Charged to the caller's budget (`server.budgets`); none when not charged.
                "requested_cost": None if context.cost is None else context.cost[0],
                "actual_cost": None if context.cost is None else context.cost[1],
            },
        )


class _Counter(Collector):
    """A counter family's values by their labels' values, as plain numbers handed to the
    registry at each scrape, with the samples prometheus-client's `Counter` gives. Its `Counter`
    finds the child through `labels()` (which checks the values), checks the amount and takes a
    lock at every increment; here every count is made on the event loop, which also runs the
    scrape."""

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...]) -> None:
        self._name, self._documentation, self._labels = name, documentation, labels
        self._values: dict[tuple[str, ...], float] = {}
        self._created: dict[tuple[str, ...], float] = {}

    def inc(self, key: tuple[str, ...], amount: float = 1.0) -> None:
        value = self._values.get(key)
        if value is None:
            value, self._created[key] = 0.0, time.time()
        self._values[key] = value + amount

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._documentation, labels=self._labels)
        for key, value in list(self._values.items()):
            family.add_metric(key, value, created=self._created[key])
        yield family


class _Histogram(Collector):
    """A histogram family as plain numbers, as `_Counter` keeps a counter's: each label values'
    count in each bucket (the first whose bound is at least the value, or +Inf) and their sum."""

    def __init__(
        self, name: str, documentation: str, labels: tuple[str, ...], bounds: tuple[float, ...]
    ) -> None:
        self._name, self._documentation, self._labels = name, documentation, labels
        self._bounds = bounds
        # As `Histogram` names them (`le`).
        names = [floatToGoString(bound) for bound in bounds]  # type: ignore[no-untyped-call]
        self._bucket_names = [*names, "+Inf"]
        # Per label values: the count in each bucket, then the sum.
        self._counts: dict[tuple[str, ...], list[float]] = {}
        self._created: dict[tuple[str, ...], float] = {}

    def observe(self, key: tuple[str, ...], value: float) -> None:
        counts = self._counts.get(key)
        if counts is None:
            counts = self._counts[key] = [0.0] * (len(self._bounds) + 2)
            self._created[key] = time.time()
        counts[bisect_left(self._bounds, value)] += 1
        counts[-1] += value

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=self._labels)
        for key, counts in list(self._counts.items()):
            *in_buckets, total = counts
            buckets = list(zip(self._bucket_names, accumulate(in_buckets), strict=True))
            family.add_metric(key, buckets, total)
            labels = dict(zip(self._labels, key, strict=True))
            family.samples.append(Sample(f"{self._name}_created", labels, self._created[key]))
        yield family


class _FieldUsage(Collector):
    """Operations run, by client label and each coordinate they selected: bounded by the labels
    times the schema's coordinates (a count per selection grew with each new one). An operation's
    coordinates are one set, kept with its plan: it is counted once, under its client and that
    set, and spread over the coordinates at the scrape, or once more than
    `MAX_PENDING_SELECTIONS` sets wait (so that the memory stays flat whatever selections the
    clients make): an increment per coordinate cost a request as much as the rest of its
    metrics."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter_[str]] = {}
        self._pending: dict[tuple[str, frozenset[str]], int] = {}

    def count(self, client: str, fields: frozenset[str]) -> None:
        pending, key = self._pending, (client, fields)
        pending[key] = pending.get(key, 0) + 1
        if len(pending) > MAX_PENDING_SELECTIONS:
            self._spread()

    def _spread(self) -> None:
        pending, self._pending = self._pending, {}
        for (client, fields), times in pending.items():
            counts = self.counts.setdefault(client, Counter_())
            # Counted in C when once (always, for selections that differ each time).
            counts.update(fields if times == 1 else dict.fromkeys(fields, times))

    def collect(self) -> Iterator[Metric]:
        self._spread()
        family = CounterMetricFamily(
            "loc_payments_field_usage",
            "Schema coordinates selected, per operation run, by client",
            labels=["client", "field"],
        )
        for client, counts in sorted(self.counts.items()):
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


class _SubscriptionsCollector(Collector):
    def __init__(self, hub: EventHub) -> None:
        self._hub = hub

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "loc_payments_live_subscriptions",
            "Open paymentEvents subscriptions on this instance, by state",
            labels=["state"],
        )
        for state, count in self._hub.subscriptions().items():
            family.add_metric([state], count)
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
