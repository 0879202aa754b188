"""Budgets of query cost (SPEC §21): the generic cell rate algorithm (GCRA) with refunds.

A budget holds up to `burst` units and refills at `rate` units a second. It is kept as one number
per caller, the theoretical arrival time (TAT): the moment the budget would be full again. A
charge of `cost` at `now` moves it to `max(TAT, now) + cost / rate`, and is admitted while that
lies at most `burst / rate` ahead of `now`; a refund moves it back (never before `now`: a budget
holds no more than `burst`). The same arithmetic runs in Redis for a fleet
(`datasource.shared_budgets`, on Redis's clock) and here for one instance (`LocalBudgets`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Limit", "LocalBudgets", "Verdict", "gcra", "whole_seconds"]


@dataclass(frozen=True, slots=True)
class Limit:
    """A budget: `rate` units a second, at most `burst` held."""

    rate: float
    burst: float

    def share(self, instances: int, *, floor: float) -> Limit:
        """One instance's share of a fleet's budget: the rate and the burst divided, the burst
        never below `floor` (the largest cost one operation may have)."""
        return Limit(self.rate / instances, max(self.burst / instances, floor))


@dataclass(frozen=True, slots=True)
class Verdict:
    """A charge's outcome: admitted or not, what the budget holds after it, and (refused) the
    seconds until it holds enough."""

    admitted: bool
    available: float
    retry_after: float = 0.0


def gcra(tat: float, now: float, cost: float, refund: float, limit: Limit) -> tuple[float, Verdict]:
    """The new TAT and the verdict of charging `cost` at `now` after refunding `refund`."""
    interval = 1.0 / limit.rate
    tat = max(tat, now)
    tat = max(tat - refund * interval, now)
    capacity = limit.burst * interval
    charged = tat + cost * interval
    if charged - now <= capacity:
        return charged, Verdict(True, (capacity - (charged - now)) / interval)
    # Refused: nothing charged (the refund stays applied).
    return tat, Verdict(False, (capacity - (tat - now)) / interval, charged - now - capacity)


class LocalBudgets:
    """Budgets held by this instance, one TAT per key, on the monotonic clock."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tats: dict[str, float] = {}
        self._prune_at = _PRUNE_AT

    def charge(self, key: str, cost: float, limit: Limit, *, refund: float = 0.0) -> Verdict:
        now = self._clock()
        tat, verdict = gcra(self._tats.get(key, now), now, cost, refund, limit)
        self._tats[key] = tat
        if len(self._tats) > self._prune_at:
            self._prune(now)
        return verdict

    def hold(self, key: str, available: float, limit: Limit) -> None:
        """Set a budget to hold `available` now (a fleet's budget, as this instance's share)."""
        self._tats[key] = self._clock() + (limit.burst - min(available, limit.burst)) / limit.rate

    def refund(self, key: str, amount: float, limit: Limit) -> None:
        """Give `amount` back to a budget at once (no round trip to save here)."""
        if amount > 0 and key in self._tats:
            now = self._clock()
            self._tats[key] = max(self._tats[key] - amount / limit.rate, now)

    def _prune(self, now: float) -> None:
        """Forget the budgets that are full again: they read as full when next charged."""
        self._tats = {key: tat for key, tat in self._tats.items() if tat > now}
        # So many budgets still refilling: wait for as many more before the next pass.
        self._prune_at = max(_PRUNE_AT, 2 * len(self._tats))


# Callers kept before the full budgets are forgotten: a pass over them costs a few ms, made once
# per this many new callers at most.
_PRUNE_AT = 100_000


def whole_seconds(seconds: float) -> int:
    """`Retry-After`'s whole seconds: rounded up, at least 1 (0 would invite a retry now)."""
    return max(1, math.ceil(seconds))
