"""A fleet's count of each caller's open subscriptions (SPEC §21, turn 6) in the live updates'
broker (Redis, SPEC §17).

One sorted set a caller, `loc-payments:subscriptions:<caller>`: a member `<instance>:<n>` for each
subscription an instance holds, scored by when its lease ends (milliseconds on Redis's own clock,
`TIME`, so the instances' clocks do not matter). An instance renews its members while it lives;
a dead instance's stop counting once their lease ends, and each script drops those before it
counts. The set itself expires with its last lease. One script call a subscribe (`take`), one a
caller renewed (pipelined), one `ZREM` a subscription ended. Redis's errors and a call slower than
the timeout become `StorageUnavailable` (`datasource.errors.broker_errors`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from redis.asyncio import Redis

from datasource.broker_client import open_broker_client
from datasource.errors import broker_errors

__all__ = ["KEY_PREFIX", "SharedSlots", "open_shared_slots"]

KEY_PREFIX = "loc-payments:subscriptions:"
BROKER = "the subscriptions' broker"

# KEYS[1] the caller's set; ARGV: the member, the cap, the lease in ms. 1: taken, 0: at the cap.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1
"""
# KEYS[1] the caller's set; ARGV: the lease in ms, then the members this instance holds (added
# again if they had expired: an instance that stalled past its lease still holds them).
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ends = now + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], ends, ARGV[i]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then redis.call('PEXPIREAT', KEYS[1], last[2]) end
return 1
"""


class SharedSlots:
    def __init__(self, client: Redis, *, timeout: float) -> None:
        """`timeout`: the seconds a call may take before the broker counts as unavailable."""
        self._client = client
        self._timeout = timeout
        self._take = client.register_script(_TAKE)
        self._renew = client.register_script(_RENEW)

    async def take(self, key: str, member: str, *, cap: int, lease_ms: int) -> bool:
        """Count `member` among `key`'s subscriptions for `lease_ms`, unless `cap` are counted."""
        with broker_errors(BROKER):
            async with asyncio.timeout(self._timeout):
                taken: Any = await self._take(keys=[KEY_PREFIX + key], args=[member, cap, lease_ms])
        return bool(taken)

    async def renew(self, held: Mapping[str, Sequence[str]], *, lease_ms: int) -> None:
        """Count each caller's members in `held` for `lease_ms` more, in one pipeline."""
        if not held:
            return
        with broker_errors(BROKER):
            async with asyncio.timeout(self._timeout), self._client.pipeline(False) as pipe:
                for key, members in held.items():
                    await self._renew(
                        keys=[KEY_PREFIX + key], args=[lease_ms, *members], client=pipe
                    )
                await pipe.execute()

    async def release(self, key: str, members: Sequence[str]) -> None:
        """Stop counting `members` among `key`'s subscriptions."""
        with broker_errors(BROKER):
            async with asyncio.timeout(self._timeout):
                await self._client.zrem(KEY_PREFIX + key, *members)


@contextlib.asynccontextmanager
async def open_shared_slots(url: str, *, call_within: float) -> AsyncIterator[SharedSlots]:
    """The count in the broker at `url` (`redis://`, `rediss://`), its client closed at the end."""
    async with open_broker_client(url, connect_timeout=1.0) as client:
        yield SharedSlots(client, timeout=call_within)
