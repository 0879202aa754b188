"""`loc-payments serve`: the service on its port (and its operators' port), on the embedded
DynamoDB Local in `local`, with the banner a person at the terminal needs."""

from __future__ import annotations

import logging
import os
import shlex
import sys
import time
from pathlib import Path

from process.bootstrap import dynamodb_endpoint
from process.logs import configure_logging
from process.runtime import serve_app, tune_garbage_collector
from process.settings import Settings
from server.auth import mint_development_token

__all__ = ["command_as_invoked", "serve"]

STARTUP_TOKEN_USER = "local-developer"
server_log = logging.getLogger("loc_payments.server")


def command_as_invoked(argv0: str, *, python: str, cwd: Path) -> str:
    """This program as a shell can run it from `cwd`, since `loc-payments` is rarely on the PATH.

    A path inside `cwd` is given relative to it (`.venv/bin/loc-payments`), any other in full;
    `python -m cli` is given as such.
    """
    if Path(argv0).name == "__main__.py":
        return f"{_pasteable_path(python, cwd=cwd)} -m cli"
    if not (cwd / argv0).is_file():
        # `python -c` and the like: no path to give, so the name it is installed under.
        return "loc-payments"
    return _pasteable_path(argv0, cwd=cwd)


def _pasteable_path(path: str, *, cwd: Path) -> str:
    # abspath, not resolve: a venv's python is a symlink whose target is not the venv.
    absolute = Path(os.path.abspath(cwd / path))
    if absolute.is_relative_to(cwd):
        relative = absolute.relative_to(cwd)
        # A bare name would be looked up on the PATH instead.
        return shlex.quote(str(relative) if relative.parent != Path() else f"./{relative}")
    return shlex.quote(str(absolute))


def _print_development_access(settings: Settings) -> None:
    token = mint_development_token(
        settings, user_id=STARTUP_TOKEN_USER, service=True, now=time.time()
    )
    command = command_as_invoked(sys.argv[0], python=sys.executable, cwd=Path.cwd())
    print(
        f"GraphiQL: http://{settings.host}:{settings.port}/graphql\n"
        f"Service token (Authorization: Bearer ...), valid 12 hours:\n  {token}\n"
        f"A customer's token: {command} token --user <user id>",
        flush=True,
    )


def _announce(settings: Settings) -> None:
    """Once the server listens: a log line for the log pipeline, then (locally) the banner,
    which is what a person at the terminal needs, so it prints last."""
    server_log.info("serving http://%s:%d/graphql", settings.host, settings.port)
    if settings.uses_development_jwt_secret:
        _print_development_access(settings)


def serve(settings: Settings) -> int:
    # Imported here so that `token` works without loading the web stack.
    from engine import ManifestsRefused
    from server.app import create_app
    from server.operators_port import with_operators_port

    configure_logging(
        log_format=settings.log_format, local=settings.env == "local", level=settings.log_level
    )
    # A server stopped by SIGTERM has done its job: exit 0.
    # A DynamoDB Local that exits is restarted; if it keeps exiting, the server stops with 1.
    with dynamodb_endpoint(
        settings, announce_to=sys.stdout, exit_status_on_sigterm=0, supervise=True
    ) as endpoint:
        # A local table this start creates gets demonstration payments to explore.
        try:
            app = create_app(
                settings, dynamodb_endpoint=endpoint, seed_demo_data=settings.env == "local"
            )
        except ManifestsRefused as refused:
            print(f"loc-payments: {refused}", file=sys.stderr)
            return 1
        # Scraped on its own port, so /metrics (and /readyz's detail) never share the API's.
        operators_port = settings.metrics_port if settings.metrics == "port" else None
        served = app if operators_port is None else with_operators_port(app, port=operators_port)
        tune_garbage_collector()
        # uvicorn handles SIGINT/SIGTERM itself while serving and re-raises them once drained.
        try:
            started = serve_app(
                served,
                host=settings.host,
                port=settings.port,
                announce=lambda: _announce(settings),
                keep_alive_seconds=settings.keep_alive_seconds,
                operators_port=operators_port,
            )
        except KeyboardInterrupt:
            return 0
    return 0 if started else 1
