"""The operators' port (`LOC_METRICS=port`, on `LOC_METRICS_PORT`): `/metrics` and `/readyz` with
its detail, which the stack exposes to no load balancer. The same server and event loop serve it
beside the API (`process.runtime.serve_app`): its `/readyz` reads the API's store, live updates
and keys, and shares its table check."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from server.app import operators_routes

__all__ = ["with_operators_port"]


def with_operators_port(api: Starlette, *, port: int) -> ASGIApp:
    """`api`, but for what arrives on `port`: the operators' routes (and nothing of the API)."""
    operators = Starlette(routes=operators_routes())
    # The API's lifespan opens the store and the rest on its state: one state for both.
    operators.state = api.state

    async def by_port(scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server")  # the listening socket's (host, port)
        if scope["type"] != "lifespan" and server is not None and server[1] == port:
            await operators(scope, receive, send)
        else:
            await api(scope, receive, send)

    return by_port
