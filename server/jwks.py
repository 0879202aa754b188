"""Signing keys published by identity providers (SPEC §7, `LOC_AUTH_JWKS_URL`): a JWKS, a JSON set
of public keys named by their `kid`, which the provider rotates.

`JwksKeys` holds the keys of every URL by kid, each a PyJWT `PyJWK` bound to one algorithm. It
reads them in the background (`jwks_reading`; the start does not wait) and again as the answer's
`Cache-Control: max-age` runs out, within `JwksPolicy`'s bounds, sooner after a failure. A token
with an unknown kid reads the set again at once, at most once per `refresh_interval` however many
come. A URL that cannot be read keeps its last keys; a body over `MAX_BODY_BYTES` is not read; a
key PyJWT cannot use, or without a kid, is skipped and logged once. `generation` changes whenever
the set does, so a removed key's remembered tokens are verified again, and refused.

Why: docs/callers-and-errors.md#tokens-from-an-identity-provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
import orjson
from jwt import PyJWK
from jwt.exceptions import PyJWKError, PyJWTError

from server.background import running
from server.errors import JwksUnreadable

__all__ = ["MAX_BODY_BYTES", "JwksKeys", "JwksPolicy", "jwks_reading"]

logger = logging.getLogger("loc_payments.auth")

# A read's answer: its status, body and Cache-Control header.
Fetch = Callable[[str, float], Awaitable[tuple[int, bytes, str | None]]]
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*(\d+)", re.IGNORECASE)
_NO_CACHE = re.compile(r"(?:^|,)\s*no-(?:cache|store)\b", re.IGNORECASE)
# The largest JWKS body read: a few keys are a few KB, but Entra ID and Keycloak add each key's
# `x5c` certificate chain, and a set of many keys nears a megabyte.
MAX_BODY_BYTES = 4 * 1024 * 1024
_CHUNK_BYTES = 64 * 1024
FIRST_RETRY_SECONDS = 1.0
State = Literal["starting", "ok", "unavailable"]


@dataclass(frozen=True, slots=True)
class JwksPolicy:
    min_cache_seconds: float = 60.0
    max_cache_seconds: float = 3600.0
    refresh_interval: float = 5.0
    timeout: float = 2.0


class JwksKeys:
    """The keys of one or more JWKS URLs (see the module)."""

    def __init__(
        self,
        urls: Sequence[str],
        policy: JwksPolicy | None = None,
        *,
        fetch: Fetch | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.urls = tuple(urls)
        self.policy = policy or JwksPolicy()
        self._fetch = fetch or _fetch
        self._clock = clock
        self._by_url: dict[str, dict[str, tuple[PyJWK, bytes]]] = {}
        self._keys: dict[str, PyJWK] = {}
        self._published: dict[str, bytes] = {}  # each key as published, to see a change
        self.generation = 0
        self.state: State = "starting"
        self.reads = 0  # reads of the set made (each reads every URL)
        self.next_read_in: float | None = None  # seconds, as `run` last scheduled it
        self._last_read: float | None = None
        self._reading: asyncio.Task[float] | None = None
        self._skipped: set[tuple[str, str]] = set()

    def get(self, kid: str) -> PyJWK | None:
        return self._keys.get(kid)

    def __len__(self) -> int:
        return len(self._keys)

    async def refresh_for(self, kid: str) -> PyJWK | None:
        """The key `kid`, reading the set again if it is unknown and no read was made in the
        last `refresh_interval`; waits for a read at most `timeout`, then answers what it has."""
        known = self._keys.get(kid)
        if known is not None:
            return known
        recent = (
            self._last_read is not None
            and self._clock() - self._last_read < self.policy.refresh_interval
        )
        if recent and (self._reading is None or self._reading.done()):
            return None  # read in this interval already: another kid buys no read
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self._read()), self.policy.timeout)
        return self._keys.get(kid)

    async def run(self) -> None:
        """Read the set now and whenever it is due, until cancelled."""
        retry = FIRST_RETRY_SECONDS
        while True:
            delay = await self._read()
            if self.state == "ok":
                retry = FIRST_RETRY_SECONDS
            else:
                delay, retry = min(retry, delay), min(retry * 2, self.policy.min_cache_seconds)
            self.next_read_in = delay
            await asyncio.sleep(delay)

    def _read(self) -> asyncio.Task[float]:
        """The read under way, or a new one: one at a time, whoever asks."""
        if self._reading is None or self._reading.done():
            self._last_read = self._clock()
            self._reading = asyncio.ensure_future(self._read_all())
        return self._reading

    async def _read_all(self) -> float:
        """Read every URL; the seconds until the next read is due."""
        self.reads += 1
        answers = await asyncio.gather(*(self._read_one(url) for url in self.urls))
        fresh = [max_age for max_age in answers if max_age is not None]
        keys: dict[str, tuple[PyJWK, bytes]] = {}
        for url in self.urls:
            keys.update(self._by_url.get(url, {}))
        published = {kid: raw for kid, (_, raw) in keys.items()}
        if published != self._published:
            self.generation += 1
            self._published = published
            self._keys = {kid: key for kid, (key, _) in keys.items()}
        self.state = "ok" if len(fresh) == len(self.urls) else "unavailable"
        ages = fresh or [self.policy.min_cache_seconds]
        return min(max(min(ages), self.policy.min_cache_seconds), self.policy.max_cache_seconds)

    async def _read_one(self, url: str) -> float | None:
        """Read `url` into its keys; its max-age (None when it could not be read)."""
        try:
            status, body, cache_control = await self._fetch(url, self.policy.timeout)
            if status != 200:
                raise JwksUnreadable(f"HTTP {status}")
            self._by_url[url] = self._parsed(url, body)
        except (JwksUnreadable, aiohttp.ClientError, TimeoutError, OSError, ValueError) as error:
            logger.warning("cannot read the JWKS at %s (%s); keeping its last keys", url, error)
            return None
        return _max_age(cache_control, self.policy.min_cache_seconds)

    def _parsed(self, url: str, body: bytes) -> dict[str, tuple[PyJWK, bytes]]:
        document: Any = orjson.loads(body)
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise JwksUnreadable("not a JSON Web Key Set")
        keys: dict[str, tuple[PyJWK, bytes]] = {}
        for entry in document["keys"]:
            kid = entry.get("kid") if isinstance(entry, dict) else None
            if not isinstance(kid, str) or not kid:
                self._skip(url, "?", "a key without a kid")
                continue
            if entry.get("use", "sig") != "sig":
                continue  # an encryption key: not for verifying tokens
            try:
                keys[kid] = (PyJWK(entry), orjson.dumps(entry, option=orjson.OPT_SORT_KEYS))
            except (PyJWKError, PyJWTError, ValueError, TypeError, KeyError) as error:
                self._skip(url, kid, str(error))
        return keys

    def _skip(self, url: str, kid: str, why: str) -> None:
        if (url, kid) not in self._skipped:
            self._skipped.add((url, kid))
            logger.warning("skipped key %s of the JWKS at %s: %s", kid, url, why)


def _max_age(cache_control: str | None, floor: float) -> float:
    if cache_control is None or _NO_CACHE.search(cache_control):
        return floor
    found = _MAX_AGE.search(cache_control)
    return float(found.group(1)) if found else floor


async def _fetch(url: str, within: float) -> tuple[int, bytes, str | None]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=within)) as session,
        session.get(url, headers={"Accept": "application/json"}) as response,
    ):
        if (response.content_length or 0) > MAX_BODY_BYTES:
            raise JwksUnreadable(f"more than {MAX_BODY_BYTES} bytes")
        # To the end, however many pieces it comes in (one `read` gives only what has arrived).
        body = bytearray()
        async for chunk in response.content.iter_chunked(_CHUNK_BYTES):
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                raise JwksUnreadable(f"more than {MAX_BODY_BYTES} bytes")
        return response.status, bytes(body), response.headers.get("Cache-Control")


@contextlib.asynccontextmanager
async def jwks_reading(keys: JwksKeys | None) -> AsyncIterator[None]:
    """Read `keys` in the background for the block's life (nothing without keys)."""
    if keys is None:
        yield
        return
    async with running(keys.run(), name="jwks-reader"):
        yield
