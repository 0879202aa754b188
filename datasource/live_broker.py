"""The live updates' broker of a fleet (SPEC §17): Redis Streams, as ElastiCache (Valkey, Redis
OSS) and MemoryDB serve them, through the `redis` package's asyncio client.

`RedisBroker` keeps the stream reader's lease (`acquire`, `renew`, `release`), and `publish`
appends one GetRecords call's payment events to one Redis stream with the shard's new position,
in one script that first checks the lease holds its token: a reader that lost its lease appends
nothing, and a new one resumes at the last position written. Every instance reads every entry,
each with a `seq` one above the last, so a reader that sees another knows it missed events;
`epoch` changes when the broker lost everything. Redis's errors, a lost connection and a timeout
become `StorageUnavailable`; `LeaseLost` says the lease is another's.

The keys, and why a Redis lease: docs/live-updates.md#a-fleet.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import orjson
from redis.asyncio import Redis

from datasource.broker_client import open_broker_client
from datasource.errors import LeaseLost, broker_errors
from datasource.streams import ShardPosition

__all__ = ["Entry", "RedisBroker", "open_live_broker"]

# The JSON of a checkpoint's position, and of an event's item (its DynamoDB image).
_PUBLISH = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
for i = 6, #ARGV do
  seq = seq + 1
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'seq', seq, ARGV[5], ARGV[i])
end
redis.call('SET', KEYS[2], seq)
if ARGV[3] ~= '' then redis.call('HSET', KEYS[4], ARGV[3], ARGV[4]) end
return seq
"""
_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if ARGV[3] == '1' then redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2]) end
return 1
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
"""
EVENT, ROUND = "event", "round"
BROKER = "the live updates' broker"


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of the broker's stream: an event's item, or a finished round's count."""

    entry_id: str
    seq: int
    image: dict[str, Any] | None = None
    round: int | None = None


class RedisBroker:
    def __init__(self, client: Redis, *, table_name: str, max_length: int) -> None:
        """`client` answers bytes (the default); `max_length` bounds the stream (`MAXLEN ~`)."""
        self._client = client
        self._max_length = max_length
        prefix = f"loc-payments:{{{table_name}}}"
        self.lease_key = f"{prefix}:lease"
        self._reading = f"{prefix}:reading"
        self.events_key = f"{prefix}:events"
        self._seq = f"{prefix}:seq"
        self._checkpoints = f"{prefix}:checkpoints"
        self._rounds = f"{prefix}:rounds"
        self._epoch = f"{prefix}:epoch"
        self._publish = client.register_script(_PUBLISH)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    # The lease of the one stream reader.

    async def acquire(self, token: str, ttl_ms: int) -> bool:
        with broker_errors(BROKER):
            return bool(await self._client.set(self.lease_key, token, nx=True, px=ttl_ms))

    async def renew(self, token: str, ttl_ms: int, *, reading: bool) -> bool:
        """Extend the lease if `token` still holds it; `reading`: say the reader is ready."""
        keys = [self.lease_key, self._reading]
        with broker_errors(BROKER):
            return bool(await self._renew(keys=keys, args=[token, ttl_ms, "1" if reading else "0"]))

    async def release(self, token: str) -> None:
        with broker_errors(BROKER):
            await self._release(keys=[self.lease_key, self._reading], args=[token])

    async def reader_ready(self) -> bool:
        """Whether some instance holds the lease with its reader ready."""
        with broker_errors(BROKER):
            return bool(await self._client.exists(self._reading))

    # The reader's writes, each fenced by its token.

    async def publish(
        self,
        token: str,
        *,
        shard_id: str,
        position: ShardPosition,
        images: Sequence[dict[str, Any]],
    ) -> None:
        """Append the events one call read and the shard's new position, together."""
        await self._fenced(
            token,
            shard_id,
            orjson.dumps(
                {
                    "sequence": position.sequence,
                    "iterator": position.iterator,
                    "closed": position.closed,
                }
            ),
            EVENT,
            [orjson.dumps(image) for image in images],
        )

    async def announce_round(self, token: str, requested: int) -> None:
        """A round that began once `requested` rounds were asked for has finished."""
        await self._fenced(token, "", b"", ROUND, [str(requested).encode()])

    async def _fenced(
        self, token: str, shard_id: str, position: bytes, kind: str, values: list[bytes]
    ) -> None:
        keys = [self.lease_key, self._seq, self.events_key, self._checkpoints]
        args: list[str | bytes | int] = [token, self._max_length, shard_id, position, kind]
        with broker_errors(BROKER):
            seq = await self._publish(keys=keys, args=[*args, *values])
        if seq == -1:
            raise LeaseLost

    async def checkpoints(self) -> dict[str, ShardPosition]:
        with broker_errors(BROKER):
            stored: Any = await self._client.hgetall(self._checkpoints)
        positions = {}
        for shard_id, value in stored.items():
            position = orjson.loads(value)
            positions[shard_id.decode()] = ShardPosition(
                sequence=position["sequence"],
                iterator=position["iterator"],
                closed=position["closed"],
            )
        return positions

    async def rounds_requested(self) -> int:
        with broker_errors(BROKER):
            return int(await self._client.get(self._rounds) or 0)

    # Every instance's reads.

    async def request_round(self) -> int:
        """Ask the reader for a round begun from now on: it announces it with this count."""
        with broker_errors(BROKER):
            return int(await self._client.incr(self._rounds))

    async def epoch(self) -> str:
        """The broker's epoch: the same until it loses everything."""
        with broker_errors(BROKER):
            await self._client.set(self._epoch, uuid.uuid4().hex, nx=True)
            epoch: Any = await self._client.get(self._epoch)
        return epoch.decode() if epoch else ""

    async def last(self) -> tuple[str, int]:
        """The stream's last entry id (`0-0` if none) and seq (the counter's, if none)."""
        with broker_errors(BROKER):
            entries: Any = await self._client.xrevrange(self.events_key, count=1)
            if entries:
                entry_id, fields = entries[0]
                return entry_id.decode(), int(fields[b"seq"])
            return "0-0", int(await self._client.get(self._seq) or 0)

    async def read(self, after: str, *, block_ms: int, count: int = 1000) -> list[Entry]:
        """The entries after id `after`, waiting up to `block_ms` for one."""
        with broker_errors(BROKER):
            answer: Any = await self._client.xread(
                {self.events_key: after}, count=count, block=block_ms
            )
        entries = []
        for _stream, found in answer or ():
            for entry_id, fields in found:
                event = fields.get(EVENT.encode())
                requested = fields.get(ROUND.encode())
                entries.append(
                    Entry(
                        entry_id.decode(),
                        int(fields[b"seq"]),
                        image=orjson.loads(event) if event is not None else None,
                        round=int(requested) if requested is not None else None,
                    )
                )
        return entries


@asynccontextmanager
async def open_live_broker(
    url: str, *, table_name: str, max_length: int, command_timeout: float, read_block: float
) -> AsyncIterator[RedisBroker]:
    """The broker at `url` (`redis://`, `rediss://`) for the table's live updates, its client
    closed at the end. `command_timeout`: the seconds a command may take before the broker counts as
    unreachable; a blocking read waits up to `read_block` seconds beyond it."""
    async with open_broker_client(
        url, connect_timeout=command_timeout, read_timeout=command_timeout + read_block
    ) as client:
        yield RedisBroker(client, table_name=table_name, max_length=max_length)
