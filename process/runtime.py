"""How the process is tuned for serving: one place, used by `loc-payments serve` and the bench."""

from __future__ import annotations

import gc
import logging
import socket
from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.types import ASGIApp

__all__ = ["serve_app", "tune_garbage_collector"]

# A page of payments allocates thousands of short-lived objects; with CPython's default
# threshold (700) the young generation is collected several times per request. A much larger
# one (50,000) made each collection a pause of its own: at 16 concurrent requests the p99 was
# twice as long (27 vs 12 ms on one payment, 284 vs 167 ms on a 100-item page) for the same p50.
GC_THRESHOLDS = (5_000, 10, 10)


def tune_garbage_collector() -> None:
    """Move what startup made out of the collector's sight, and collect less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def uvicorn_options(*, host: str, port: int, keep_alive_seconds: float) -> dict[str, Any]:
    """uvloop and httptools (uvicorn's `standard` extra), one worker, and no access log: the
    service writes its own request log, and a line per request costs more than the request."""
    return {
        "host": host,
        "port": port,
        "loop": "uvloop",
        "http": "httptools",
        "access_log": False,
        # The service's own logging setup (process.logs) formats uvicorn's lines too.
        "log_config": None,
        "server_header": False,
        "timeout_keep_alive": keep_alive_seconds,  # LOC_KEEP_ALIVE_SECONDS
    }


class _AnnouncingServer(uvicorn.Server):
    """uvicorn's server, calling `announce` once it listens: after the app's startup (where a
    local start writes its demonstration data), so that what it prints is the last thing shown."""

    def __init__(self, config: uvicorn.Config, announce: Callable[[], None]) -> None:
        super().__init__(config)
        self._announce = announce

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._announce()


def serve_app(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    announce: Callable[[], None],
    keep_alive_seconds: float,
    operators_port: int | None = None,
) -> bool:
    """Serve until SIGINT/SIGTERM (uvicorn drains, then returns); False if it never started
    (the port taken, the app's startup failed: uvicorn has logged why). With `operators_port`
    the same server listens there too, and `app` tells the two apart by the request's port
    (`server.operators_port`): one loop, one set of signals, one drain.

    uvicorn's own INFO lines (process started, waiting for startup, running on, shutting down)
    are quiet unless the log level is DEBUG: `announce` says where the service listens."""
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not logging.getLogger().isEnabledFor(logging.DEBUG):
        uvicorn_log.setLevel(logging.WARNING)
    config = uvicorn.Config(
        app, **uvicorn_options(host=host, port=port, keep_alive_seconds=keep_alive_seconds)
    )
    server = _AnnouncingServer(config, announce)
    if operators_port is None:
        server.run()
    else:
        # Bound as uvicorn binds one port (a port taken: logged, exit status 1).
        operations = uvicorn.Config(
            app,
            **uvicorn_options(
                host=host, port=operators_port, keep_alive_seconds=keep_alive_seconds
            ),
        )
        server.run(sockets=[config.bind_socket(), operations.bind_socket()])
    return server.started
