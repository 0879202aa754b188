"""A fleet's budgets of query cost (SPEC §21) in the live updates' broker (Redis, SPEC §17).

One script call a request (`EVALSHA`; redis-py loads the script and calls again on `NOSCRIPT`):
it refunds what the caller's previous operation did not use, charges this one by the GCRA of
`domain.budgets` on Redis's own clock (`TIME`, so the instances' clocks do not matter), and keeps
the caller's TAT under `loc-payments:budget:<caller>` expiring when the budget is full again.
Redis's errors and a call slower than the timeout become `StorageUnavailable`
(`datasource.errors.broker_errors`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from redis.asyncio import Redis

from datasource.broker_client import open_broker_client
from datasource.errors import broker_errors
from domain.budgets import HAIR, Limit, Verdict

__all__ = ["SharedBudgets", "open_shared_budgets"]

# In microseconds, integers up to 2^53 exactly in Lua's doubles. Floats go back as strings: Redis
# would truncate a Lua number to an integer.
_CHARGE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost, refund = tonumber(ARGV[1]), tonumber(ARGV[2])
local interval = 1000000 / tonumber(ARGV[3])
local burst = tonumber(ARGV[4])
-- In units held back from now (0: a full budget), as domain.budgets.gcra works.
local behind = (tonumber(redis.call('GET', KEYS[1]) or now) - now) / interval
if behind < 0 then behind = 0 end
behind = behind - refund
if behind < 0 then behind = 0 end
local charged = behind + cost
local admitted, retry = 0, 0
if charged <= burst + tonumber(ARGV[5]) then
  behind, admitted = charged, 1
else
  retry = (charged - burst) * interval
end
local ahead = behind * interval
if ahead >= 1 then
  redis.call('SET', KEYS[1], string.format('%.0f', now + ahead), 'PX', math.ceil(ahead / 1000))
else
  redis.call('DEL', KEYS[1])
end
return {admitted, tostring(burst - behind), tostring(retry / 1000000)}
"""
KEY_PREFIX = "loc-payments:budget:"


class SharedBudgets:
    def __init__(self, client: Redis, *, timeout: float) -> None:
        """`timeout`: the seconds a charge may take before the broker counts as unavailable."""
        self._client = client
        self._timeout = timeout
        self._charge = client.register_script(_CHARGE)

    async def charge(self, key: str, cost: float, limit: Limit, *, refund: float) -> Verdict:
        """Refund, then charge `cost` to the budget `key` (`domain.budgets.gcra`), in one call;
        StorageUnavailable if the broker does not answer within the timeout."""
        args = [*map(repr, (float(cost), float(refund), limit.rate, limit.burst)), repr(HAIR)]
        with broker_errors("the budgets' broker"):
            async with asyncio.timeout(self._timeout):
                answer: Any = await self._charge(keys=[KEY_PREFIX + key], args=args)
        admitted, available, retry_after = answer
        return Verdict(bool(admitted), float(available), float(retry_after))


@contextlib.asynccontextmanager
async def open_shared_budgets(url: str, *, charge_within: float) -> AsyncIterator[SharedBudgets]:
    """Budgets in the broker at `url` (`redis://`, `rediss://`), its client closed at the end."""
    # A charge's timeout bounds its connecting too; this one only ends a connect left behind.
    async with open_broker_client(url, connect_timeout=1.0) as client:
        yield SharedBudgets(client, timeout=charge_within)
