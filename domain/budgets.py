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

__all__ = ["HAIR", "Limit", "LocalBudgets", "Verdict", "gcra", "whole_seconds"]

# A thousandth of a unit (the cheapest field costs 1): what a TAT read back may be off by (one
# float step of an instant of 10^7 s at 20,000 units a second is 4e-5), which neither refuses a
# charge that fits nor shows a unit less (`server.budgets`).
HAIR = 1e-3


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
    """The new TAT and the verdict of charging `cost` at `now` after refunding `refund`.

    Worked in units held back from `now` (0: a full budget), not in instants: `now + cost / rate
    - now` is off by the float rounding of `now` (seconds since boot here, microseconds since the
    epoch in Redis), which refused a charge of exactly the burst about one time in four and
    showed a budget one unit short."""
    interval = 1.0 / limit.rate
    behind = max(max(tat - now, 0.0) / interval - refund, 0.0)
    charged = behind + cost
    if charged <= limit.burst + HAIR:
        return now + charged * interval, Verdict(True, limit.burst - charged)
    # Refused: nothing charged (the refund stays applied).
    return now + behind * interval, Verdict(
        False, limit.burst - behind, (charged - limit.burst) * interval
    )


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

    def available(self, key: str, limit: Limit) -> float:
        """What a budget holds now, without charging it."""
        tat = self._tats.get(key)
        if tat is None:
            return limit.burst
        return limit.burst - max(tat - self._clock(), 0.0) * limit.rate

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
