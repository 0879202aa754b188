"""Incremental delivery over HTTP (SPEC §22): the format of parts a request's `Accept` asks for,
and the `multipart/mixed` answer that carries them, each part sent as soon as it is made.

What each client sends, read in its source:

    Apollo Client 4, Defer20220824Handler    multipart/mixed;deferSpec=20220824     -> 2022-08-24
    Apollo Client 4, GraphQL17Alpha9Handler  multipart/mixed;incrementalSpec=v0.2   -> graphql-js 17
    urql (@urql/core 6), Hive Gateway         multipart/mixed (no parameter)         -> 2022-08-24
    Relay's fetchers (meros)                  the app's: multipart/mixed[;deferSpec=20220824]

A `multipart/mixed` range with any other `deferSpec` or `incrementalSpec`, or a `subscriptionSpec`
(Apollo's subscriptions over HTTP), asks for no format served here; nor does one with `q=0`. Each
part is JSON after its headers, between `---` boundaries, as Apollo Router and GraphQL Yoga
write them, CRLF ending each line: `---`, `Content-Type: application/json; charset=utf-8`, an
empty line, the JSON, `---` before the next part and `-----` after the last.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
from starlette.responses import StreamingResponse

from engine import Defer20220824, Parts

__all__ = ["PartsFormat", "multipart_answer", "parts_format"]


class PartsFormat(enum.Enum):
    """The two formats of parts, by the `Accept` parameter that names each."""

    DEFER_20220824 = "deferSpec=20220824"
    GRAPHQL_17 = "incrementalSpec=v0.2"


_PARAMETERS = {
    ("deferspec", "20220824"): PartsFormat.DEFER_20220824,
    ("incrementalspec", "v0.2"): PartsFormat.GRAPHQL_17,
}
_SPEC_PARAMETERS = frozenset({"deferspec", "incrementalspec", "subscriptionspec"})
_BOUNDARY = b"\r\n---"
_PART_HEADERS = b"\r\nContent-Type: application/json; charset=utf-8\r\n\r\n"


@functools.lru_cache(maxsize=256)
def parts_format(accept: str | None) -> PartsFormat | None:
    """The format of parts the `Accept` header asks for (the first range that names one served
    here), or None: the client reads one JSON body."""
    for media_range in (accept or "").split(","):
        media_type, *parameters = media_range.split(";")
        if media_type.strip().lower() != "multipart/mixed":
            continue
        found = PartsFormat.DEFER_20220824  # no spec named: what urql and Hive Gateway read
        quality = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            name, value = name.strip().lower(), value.strip().strip('"').lower()
            if name == "q":
                quality = _quality(value)
            elif name in _SPEC_PARAMETERS:
                named = _PARAMETERS.get((name, value))
                if named is None:
                    break
                found = named
        else:
            if quality > 0:
                return found
    return None


def _quality(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0


def multipart_answer(
    parts: Parts, parts_format: PartsFormat, headers: Mapping[str, str]
) -> StreamingResponse:
    """The answer whose parts are written as `parts` makes them; a client that goes away
    cancels what is left (`Parts.rest`)."""
    media_type = f'multipart/mixed; boundary="-"; {parts_format.value}'
    return StreamingResponse(
        _body(parts, parts_format),
        media_type=media_type,
        headers={**headers, "vary": "Accept", "cache-control": "no-cache"},
    )


async def _body(parts: Parts, parts_format: PartsFormat) -> AsyncIterator[bytes]:
    rewrite = Defer20220824().rewrite if parts_format is PartsFormat.DEFER_20220824 else _as_is
    try:
        yield _BOUNDARY + _part(rewrite(parts.first))
        async for payload in parts.rest():
            yield _part(rewrite(payload))
        yield b"--\r\n"
    finally:
        await parts.aclose()


def _part(payload: dict[str, Any]) -> bytes:
    return _PART_HEADERS + orjson.dumps(payload) + _BOUNDARY


def _as_is(payload: dict[str, Any]) -> dict[str, Any]:
    return payload
