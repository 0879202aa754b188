"""The app called in-process through its ASGI interface: no server, no network."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import Message

__all__ = ["asgi_caller", "asgi_headers"]

JSON = (b"content-type", b"application/json")


def asgi_caller(
    app: Any, body: bytes, headers: list[tuple[bytes, bytes]]
) -> Callable[[], Awaitable[bytes]]:
    """A function that sends one POST /graphql of `body` through `app`, answering the response
    body (the first body message)."""
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/graphql",
        "raw_path": b"/graphql",
        "query_string": b"",
        "root_path": "",
        "headers": [*headers, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
    }

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def request() -> bytes:
        sent: list[Message] = []

        async def send(message: Message) -> None:
            sent.append(message)

        await app({**scope, "state": {}}, receive, send)
        answer: bytes = sent[1]["body"]
        return answer

    return request


def asgi_headers(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """A JSON request's ASGI headers, with `headers` (names lower-cased)."""
    return [JSON, *((name.lower().encode(), value.encode()) for name, value in headers.items())]
