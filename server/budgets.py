"""Per-client budgets of query cost (SPEC §21).

Every operation of an authenticated caller is charged its cost before it runs (`Hooks.admit`):
a customer's budget is its user's, a service's its client's, at its class's rate and burst or a
named client's override. Over budget, nothing runs (`Throttled`: HTTP 429 with `Retry-After`, a
WebSocket `error`); what an operation did not use is refunded with the caller's next charge on
this instance. With a broker the fleet shares each budget (`datasource.shared_budgets`), and a
caller whose budget cannot pay by what the broker said at its last charge here is refused at once;
without one, or while it fails or is slow, this instance holds its share itself, and
`BROKER_FAILURES` in a row keep requests off the broker for `BROKER_RETRY_SECONDS`.
Unauthenticated requests are not charged: they can only be refused, which reads nothing.

The rates, the costs, and the fleet's share: docs/callers-and-errors.md#budgets.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from graphql import GraphQLError
from strawberry.types.graphql import OperationType

from datasource import SharedBudgets, open_shared_budgets
from domain.budgets import HAIR, Limit, LocalBudgets, Verdict, whole_seconds
from domain.errors import StorageUnavailable
from process.settings import Settings
from resolvers.callers import Caller
from resolvers.context import Context
from server.errors import Throttled

__all__ = ["BudgetPolicy", "Budgets"]

log = logging.getLogger("loc_payments.budgets")

THROTTLED = "THROTTLED"
# Charges in a row the broker fails (or answers late) that open the breaker: one late answer on a
# busy instance is that request's alone. Then, for BROKER_RETRY_SECONDS, no request waits on the
# broker; then one request tries it again.
BROKER_FAILURES = 3
BROKER_RETRY_SECONDS = 1.0
# Refunds kept for callers who have not called again; beyond, the oldest are dropped (that
# caller pays its last operation in full).
MAX_PENDING_REFUNDS = 100_000


@dataclass(frozen=True, slots=True)
class BudgetPolicy:
    """Who pays what: each class's fleet-wide limit, the named services' overrides, a mutation's
    least cost, and the instances a fleet without its broker shares a budget among."""

    customer: Limit
    service: Limit
    overrides: Mapping[str, Limit]
    mutation_cost: int
    new_document_cost: int
    instances: int
    max_cost: int

    @classmethod
    def from_settings(cls, settings: Settings) -> BudgetPolicy:
        return cls(
            customer=Limit(settings.budget_customer_rate, settings.budget_customer_burst),
            service=Limit(settings.budget_service_rate, settings.budget_service_burst),
            overrides={
                client: Limit(rate, burst)
                for client, (rate, burst) in settings.budget_overrides.items()
            },
            mutation_cost=settings.budget_mutation_cost,
            new_document_cost=settings.budget_new_document_cost,
            instances=settings.budget_expected_instances,
            max_cost=settings.max_query_cost,
        )

    def budget_of(self, caller: Caller) -> tuple[str, str, Limit]:
        """The caller's class, its budget's key, and its fleet-wide limit."""
        if caller.is_service:
            client = caller.service_client
            return "service", f"service:{client}", self.overrides.get(client, self.service)
        return "customer", f"customer:{caller.user_id}", self.customer

    def share(self, limit: Limit) -> Limit:
        """This instance's share of a fleet-wide limit."""
        return limit.share(self.instances, floor=self.max_cost)


class Budgets:
    def __init__(
        self,
        policy: BudgetPolicy,
        *,
        on_throttled: Callable[[str], None] = lambda kind: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`on_throttled(class)` counts a refusal (the metric)."""
        self.policy = policy
        self._on_throttled = on_throttled
        self._clock = clock
        self._local = LocalBudgets(clock=clock)
        # What each budget held in the broker at its last charge here, refilling since: what a
        # caller is taken to hold before a first parse (`first_parse`), with no round trip.
        self._seen = LocalBudgets(clock=clock)
        self._shared: SharedBudgets | None = None
        self._refunds: dict[str, float] = {}
        # The breaker: the broker's failures in a row, when it opened (None: closed), when to
        # try the broker again, and whether a request is trying it now.
        self._failures = 0
        self._failed_at: float | None = None
        self._retry_at = 0.0
        self._probing = False

    @property
    def state(self) -> str:
        """For `/readyz`'s detail: `shared` (the broker holds them), `local` (no broker), or
        `local: broker unavailable` (each instance its share until the broker answers)."""
        if self._shared is None:
            return "local"
        return "shared" if self._failed_at is None else "local: broker unavailable"

    @contextlib.asynccontextmanager
    async def sharing(self, url: str, *, charge_within: float) -> AsyncIterator[None]:
        """Budgets held in the broker at `url` while inside."""
        async with open_shared_budgets(url, charge_within=charge_within) as shared:
            self._shared = shared
            try:
                yield
            finally:
                self._shared = None

    async def first_parse(self, context: Any) -> None:
        """The engine's `Hooks.first_parse`, before this instance parses, validates and plans a
        text anew: a caller whose budget holds less than that work costs is refused
        (`Throttled`) before the text is read; else the operation costs at least as much. With
        a broker, what the budget held at its last charge here, refilling since, stands for
        what it holds (no round trip): the charge itself still decides."""
        if not isinstance(context, Context) or not isinstance(context.authenticated, Caller):
            return
        least = self.policy.new_document_cost
        kind, key, limit = self.policy.budget_of(context.authenticated)
        if not self._shared_now():
            limit = self.policy.share(limit)
        held = self._held(key, limit)
        if held + HAIR < least:
            self._on_throttled(kind)
            context.cost = (least, 0)
            raise _throttled(least, Verdict(False, held, (least - held) / limit.rate), limit)
        context.least_cost = least

    async def admit(self, context: Any, operation_type: OperationType, cost: int) -> _Charge | None:
        """The engine's `Hooks.admit`: charge the caller, or raise `Throttled`."""
        if not isinstance(context, Context) or not isinstance(context.authenticated, Caller):
            return None
        kind, key, limit = self.policy.budget_of(context.authenticated)
        mutation = operation_type is OperationType.MUTATION
        least = max(self.policy.mutation_cost if mutation else 0, context.least_cost)
        requested = max(cost, least)
        verdict, limit = await self._charge(key, requested, limit)
        if not verdict.admitted:
            self._on_throttled(kind)
            context.cost = (requested, 0)
            raise _throttled(requested, verdict, limit)
        return _Charge(self, context, key, requested, least, verdict, limit)

    async def charge_event(self, context: Context, caller: Caller, cost: int) -> _Charge | float:
        """One event of a subscription charged `cost` to `caller` (no least, no refusal
        counted): its charge, or the seconds until the budget holds `cost` (nothing charged)."""
        _kind, key, limit = self.policy.budget_of(caller)
        verdict, limit = await self._charge(key, cost, limit)
        if not verdict.admitted:
            return verdict.retry_after
        return _Charge(self, context, key, cost, 0, verdict, limit)

    def _shared_now(self) -> bool:
        """Whether the budgets are the broker's now (one, its breaker closed)."""
        return self._shared is not None and self._failed_at is None

    def _held(self, key: str, limit: Limit) -> float:
        """What the budget `key` holds as far as this instance knows, with the refund it owes
        the caller: with the broker, what the fleet's budget held at its last charge here,
        refilled since (other instances' charges since only take from it, but for refunds they
        owe the caller); else this instance's share (`limit` is then the share)."""
        known = self._seen if self._shared_now() else self._local
        return min(known.available(key, limit) + self._refunds.get(key, 0.0), limit.burst)

    async def _charge(self, key: str, cost: int, limit: Limit) -> tuple[Verdict, Limit]:
        shared = self._shared
        if self._shared_now():
            held = self._held(key, limit)
            if held + HAIR < cost:
                # Refused as the broker would refuse it, without the round trip that was most of
                # a refusal's CPU (SPEC §21: at most a quarter of a one-payment lookup's): a
                # refusal changes nothing there. A refund another instance owes the caller waits
                # for its next charge there, as it would anyway.
                return Verdict(False, held, (cost - held) / limit.rate), limit
        refund = self._refunds.pop(key, 0.0)
        if shared is not None and self._broker_usable():
            try:
                verdict = await shared.charge(key, cost, limit, refund=refund)
            except StorageUnavailable as error:
                self._broker_failed(error)
            else:
                self._broker_answered()
                self._seen.hold(key, verdict.available, limit)
                # Should the broker fail, this instance goes on from its share of what the
                # fleet's budget holds now, not from a full budget.
                share = self.policy.share(limit)
                self._local.hold(key, verdict.available / self.policy.instances, share)
                return verdict, limit
            finally:
                self._probing = False
        share = self.policy.share(limit)
        return self._local.charge(key, cost, share, refund=refund), share

    def _broker_usable(self) -> bool:
        if self._failed_at is None:
            return True
        if self._probing or self._clock() < self._retry_at:
            return False
        self._probing = True
        return True

    def _broker_failed(self, error: StorageUnavailable) -> None:
        now = self._clock()
        self._failures += 1
        if self._failed_at is None and self._failures >= BROKER_FAILURES:
            self._failed_at = now
            log.warning(
                "budgets: the broker failed (%s); each instance holds its share of every "
                "budget until it answers again",
                error,
            )
        self._retry_at = now + BROKER_RETRY_SECONDS

    def _broker_answered(self) -> None:
        self._failures = 0
        if self._failed_at is not None:
            log.warning(
                "budgets: the broker answers again after %.1f s; budgets are shared again",
                self._clock() - self._failed_at,
            )
            self._failed_at = None

    def owe(self, key: str, refund: float) -> None:
        """Keep a refund for the caller's next charge on this instance."""
        refunds = self._refunds
        refunds[key] = refunds.pop(key, 0.0) + refund
        if len(refunds) > MAX_PENDING_REFUNDS:
            del refunds[next(iter(refunds))]


@dataclass(slots=True)
class _Charge:
    """An admitted operation's charge (`engine.operations.Charge`)."""

    budgets: Budgets
    context: Context
    key: str
    requested: int
    least: int
    verdict: Verdict
    limit: Limit

    def admitted(self) -> dict[str, Any]:
        """`extensions.cost` before the operation runs, for an answer in parts' first part (SPEC
        §22): what it asked for and what the budget holds once it is charged."""
        cost = _cost(self.requested, self.requested, self.verdict.available, self.limit)
        del cost["actualQueryCost"]
        return {"cost": cost}

    def settle(self, actual: int) -> dict[str, Any]:
        actual = min(max(actual, self.least), self.requested)
        refund = self.requested - actual
        if refund > 0:
            self.budgets.owe(self.key, refund)
        self.context.cost = (self.requested, actual)
        return {"cost": _cost(self.requested, actual, self.verdict.available + refund, self.limit)}


def _throttled(requested: int, verdict: Verdict, limit: Limit) -> Throttled:
    retry_after = whole_seconds(verdict.retry_after)
    error = GraphQLError(
        f"Throttled: this operation costs {requested} and the budget holds "
        f"{math.floor(verdict.available)} now, refilling at {_number(limit.rate)} a second; "
        f"retry after {retry_after} s",
        extensions={"code": THROTTLED, "retryAfter": retry_after},
    )
    cost = _cost(requested, 0, verdict.available, limit)
    return Throttled(error, {"cost": cost}, retry_after=retry_after)


def _cost(requested: int, actual: int, available: float, limit: Limit) -> dict[str, Any]:
    """`extensions.cost`, as Shopify's Admin API words it."""
    return {
        "requestedQueryCost": requested,
        "actualQueryCost": actual,
        "throttleStatus": {
            "maximumAvailable": _number(limit.burst),
            "currentlyAvailable": math.floor(min(max(available + HAIR, 0.0), limit.burst)),
            "restoreRate": _number(limit.rate),
        },
    }


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 2)
