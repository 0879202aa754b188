"""Subscriptions within their callers' budgets (SPEC §21, turn 6): the engine's `Hooks.hold`.

A subscription takes a slot of its caller's (`server.subscription_slots`: the cap per class),
then is charged its cost as it starts, as any operation is (`Budgets.admit`). Each event is then
charged the subscription's requested cost before its answer is worked out, and refunded down to
that answer's actual cost (`engine.actual_cost`: a loan's page by the items it holds) once it is,
as a query is; so no work is done for an event its caller cannot pay for. When the budget
cannot pay, the event waits until it can (the GCRA's verdict says when), then is charged and
sent: a subscription's events wait in order, and a caller's subscriptions on this instance wait
in one line, first come first paid, one of them asking the budget at a time. The events that
come meanwhile wait in the subscriber's bounded queue; past it, the subscriber is closed 4413 as
a slow one is (`resolvers.event_hub`).

How they are charged and capped: docs/callers-and-errors.md#budgets.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from strawberry.types.graphql import OperationType

from engine import Charge
from resolvers.callers import Caller
from resolvers.context import Context
from server.budgets import Budgets
from server.subscription_slots import SubscriptionSlots

__all__ = ["SubscriptionBudgets"]

# The least an event that cannot be paid waits before it asks again (a verdict's wait may round
# to nothing).
LEAST_WAIT = 0.001


@dataclass(slots=True)
class _Line:
    """A caller's events waiting to be paid on this instance, first come first paid."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0


class SubscriptionBudgets:
    def __init__(self, budgets: Budgets, slots: SubscriptionSlots) -> None:
        self._budgets = budgets
        self.slots = slots
        self._lines: dict[str, _Line] = {}

    @contextlib.asynccontextmanager
    async def hold(self, context: Any, cost: int) -> AsyncIterator[Events | None]:
        """The engine's `Hooks.hold`: a slot and the start's charge (`TooManySubscriptions`,
        `Throttled`), then what pays each event; None for a context without a caller."""
        if not isinstance(context, Context) or not isinstance(context.authenticated, Caller):
            yield None
            return
        caller = context.authenticated
        kind, key, _limit = self._budgets.policy.budget_of(caller)
        async with self.slots.slot(key, kind):
            charge = await self._budgets.admit(context, OperationType.SUBSCRIPTION, cost)
            if charge is not None:
                charge.settle(cost)  # what it holds open is paid for: no refund
            yield Events(self, context, caller, key, cost)

    @contextlib.asynccontextmanager
    async def line(self, key: str) -> AsyncIterator[None]:
        """First in the caller's line while inside."""
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = _Line()
        line.waiting += 1
        try:
            async with line.lock:
                yield
        finally:
            line.waiting -= 1
            if not line.waiting:
                del self._lines[key]

    async def pay(self, context: Context, caller: Caller, key: str, cost: int) -> Charge:
        """`cost` charged to `caller`, once its budget holds it (`Events.pay`)."""
        async with self.line(key):
            while True:
                paid = await self._budgets.charge_event(context, caller, cost)
                if not isinstance(paid, float):
                    return paid
                await asyncio.sleep(max(paid, LEAST_WAIT))


@dataclass(frozen=True, slots=True)
class Events:
    """A subscription's events, each paid before it runs (`engine.Held`)."""

    budgets: SubscriptionBudgets
    context: Context
    caller: Caller
    key: str
    cost: int

    async def pay(self) -> Charge:
        return await self.budgets.pay(self.context, self.caller, self.key, self.cost)
