"""Each caller's open subscriptions, capped per class (SPEC §21, turn 6).

A subscription holds a slot of its caller's (customers per user, services per client, as their
budgets) from its start until it ends: completed, failed, stopped by the client, or closed with
its socket. Over the class's cap it is refused (`TooManySubscriptions`: an `error` message for
that operation; the socket stays open). With a broker the fleet counts every instance's slots
(`datasource.subscription_slots`), each instance renewing its own every third of the lease, so a
dead instance's stop counting within `LOC_BUDGET_SUBSCRIPTION_LEASE_SECONDS`. Without one, or
while it fails, this instance counts its own slots against its share of the cap (divided by
`LOC_BUDGET_EXPECTED_INSTANCES`, at least 1), as a budget's share; a renewal that reaches the
broker again counts them there too.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping

from datasource import SharedSlots, open_shared_slots
from domain.errors import StorageUnavailable
from server.background import running
from server.errors import TooManySubscriptions

__all__ = ["SubscriptionSlots"]

log = logging.getLogger("loc_payments.budgets")

# Seconds a call to the broker may take (a subscribe is not a request's latency); after it
# failed, subscribes are counted here for BROKER_RETRY_SECONDS before it is tried again.
BROKER_TIMEOUT = 1.0
BROKER_RETRY_SECONDS = 1.0
# Callers renewed in one pipeline.
RENEWED_AT_ONCE = 500


class SubscriptionSlots:
    def __init__(
        self,
        caps: Mapping[str, int],
        *,
        instances: int,
        lease_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`caps`: each class's cap across the fleet (`customer`, `service`)."""
        self._caps = caps
        self._instances = instances
        self._lease_ms = max(1, round(lease_seconds * 1000))
        self._clock = clock
        self._instance = uuid.uuid4().hex[:12]
        self._numbers = itertools.count(1)
        # This instance's slots, by caller.
        self._held: dict[str, set[str]] = {}
        self._shared: SharedSlots | None = None
        self._broker_back_at = 0.0

    @contextlib.asynccontextmanager
    async def sharing(self, url: str) -> AsyncIterator[None]:
        """Slots counted in the broker at `url` while inside, this instance's renewed."""
        async with open_shared_slots(url, call_within=BROKER_TIMEOUT) as shared:
            self._shared = shared
            try:
                async with running(self._renewing(shared), name="subscription slots"):
                    yield
            finally:
                self._shared = None

    @contextlib.asynccontextmanager
    async def slot(self, key: str, kind: str) -> AsyncIterator[None]:
        """A slot of the caller `key` (of class `kind`) while inside; `TooManySubscriptions`
        over the cap."""
        member = f"{self._instance}:{next(self._numbers)}"
        cap = self._caps[kind]
        if not await self._take(key, member, cap):
            raise TooManySubscriptions(cap)
        self._held.setdefault(key, set()).add(member)
        try:
            yield
        finally:
            await self._release(key, member)

    async def _take(self, key: str, member: str, cap: int) -> bool:
        shared = self._shared
        if shared is not None and self._clock() >= self._broker_back_at:
            try:
                return await shared.take(key, member, cap=cap, lease_ms=self._lease_ms)
            except StorageUnavailable as error:
                log.warning("subscriptions: the broker failed (%s); counted here meanwhile", error)
                self._broker_back_at = self._clock() + BROKER_RETRY_SECONDS
        return len(self._held.get(key, ())) < max(1, cap // self._instances)

    async def _release(self, key: str, member: str) -> None:
        held = self._held.get(key)
        if held is not None:
            held.discard(member)
            if not held:
                del self._held[key]
        shared = self._shared
        if shared is not None and self._clock() >= self._broker_back_at:
            # Else (or should this fail) it stops counting there at its lease's end, no longer
            # renewed.
            with contextlib.suppress(StorageUnavailable):
                await shared.release(key, [member])

    async def _renewing(self, shared: SharedSlots) -> None:
        period = self._lease_ms / 3000
        while True:
            await asyncio.sleep(period)
            held = [(key, sorted(members)) for key, members in self._held.items()]
            for start in range(0, len(held), RENEWED_AT_ONCE):
                renewed = dict(held[start : start + RENEWED_AT_ONCE])
                try:
                    await shared.renew(renewed, lease_ms=self._lease_ms)
                except StorageUnavailable as error:
                    log.warning("subscriptions: cannot renew this instance's slots (%s)", error)
                    break
                await self._release_ended(shared, renewed)

    async def _release_ended(self, shared: SharedSlots, renewed: dict[str, list[str]]) -> None:
        """A slot released while its renewal was on its way may have been counted again."""
        for key, members in renewed.items():
            ended = [member for member in members if member not in self._held.get(key, ())]
            if ended:
                with contextlib.suppress(StorageUnavailable):
                    await shared.release(key, ended)
