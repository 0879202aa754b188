"""`loc-payments`: run the service (`serve`), mint a development token (`token`), print the
service's CloudFormation stack (`template`), run the collection job (`collect`), check
manifests of trusted documents (`documents check`), classify and accept schema changes
(`schema diff`, `schema accept`)."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pydantic

from domain.errors import InvalidCursor, PaymentsError
from jobs.checkpoint import CheckpointRefused
from jobs.collect_command import add_arguments as add_collect_arguments
from jobs.collect_command import run_collect
from jobs.reshard_command import add_arguments as add_reshard_arguments
from jobs.reshard_command import run_reshard
from server.auth import (
    DEFAULT_TOKEN_TTL_SECONDS,
    SERVICE_SCOPE,
    TokenRefused,
    mint_development_token,
)
from server.bootstrap import dynamodb_endpoint
from server.documents_command import add_arguments as add_documents_arguments
from server.documents_command import run_documents
from server.embedded_dynamodb import DynamoDBLocalFailed, DynamoDBLocalMissing, JavaMissing
from server.logs import configure_logging
from server.runtime import serve_app, tune_garbage_collector
from server.schema_command import add_arguments as add_schema_arguments
from server.schema_command import run_schema
from server.settings import Settings
from server.stack import TEMPLATE_COMMAND, stack_template_text

STARTUP_TOKEN_USER = "local-developer"
server_log = logging.getLogger("loc_payments.server")


def command_as_invoked(argv0: str, *, python: str, cwd: Path) -> str:
    """This program as a shell can run it from `cwd`, since `loc-payments` is rarely on the PATH.

    A path inside `cwd` is given relative to it (`.venv/bin/loc-payments`), any other in full;
    `python -m server` is given as such.
    """
    if Path(argv0).name == "__main__.py":
        return f"{_pasteable_path(python, cwd=cwd)} -m server"
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
    from engine.trusted_documents import ManifestsRefused
    from server.app import create_app
    from server.operations_port import with_operations_port

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
        operations_port = settings.metrics_port if settings.metrics == "port" else None
        served = app if operations_port is None else with_operations_port(app, port=operations_port)
        tune_garbage_collector()
        # uvicorn handles SIGINT/SIGTERM itself while serving and re-raises them once drained.
        try:
            started = serve_app(
                served,
                host=settings.host,
                port=settings.port,
                announce=lambda: _announce(settings),
                operations_port=operations_port,
            )
        except KeyboardInterrupt:
            return 0
    return 0 if started else 1


def _token(settings: Settings, arguments: argparse.Namespace) -> int:
    print(
        mint_development_token(
            settings,
            user_id=arguments.user,
            service=arguments.service,
            ttl_seconds=arguments.ttl,
            now=time.time(),
        )
    )
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loc-payments",
        description="Payments GraphQL service. Settings come from LOC_* environment variables.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "serve", help="run the API (in LOC_ENV=local with an embedded DynamoDB Local)"
    )
    token = commands.add_parser("token", help="print a development JWT (local secret only)")
    token.add_argument("--user", required=True, help="the user id (the `sub` claim)")
    token.add_argument(
        "--service", action="store_true", help=f"a service caller (scope {SERVICE_SCOPE})"
    )
    token.add_argument(
        "--ttl",
        type=int,
        default=DEFAULT_TOKEN_TTL_SECONDS,
        metavar="SECONDS",
        help="lifetime (default: %(default)s)",
    )
    commands.add_parser(
        "template",
        help=f"print the service's CloudFormation stack (committed: {TEMPLATE_COMMAND})",
    )
    add_collect_arguments(
        commands.add_parser(
            "collect",
            help="fail the RETRY payments that can no longer be presented; list the others",
            description=(
                "Pages through every user's RETRY payments. One that may no longer be "
                "presented moves to FAILED; one that may is written as a JSON line for the "
                "submitter. The summary goes to stderr."
            ),
        )
    )
    add_reshard_arguments(
        commands.add_parser(
            "reshard",
            help="move every payment to its GSI2 partition of LOC_GSI2_SHARDS",
            description=(
                "Rewrites the GSI2 partition key of every payment listed in the layouts of "
                "LOC_GSI2_READ_SHARDS that belongs elsewhere in the layout of LOC_GSI2_SHARDS. "
                "Run the service with the same two settings meanwhile; drop "
                "LOC_GSI2_READ_SHARDS once it finishes."
            ),
        )
    )
    add_documents_arguments(
        commands.add_parser(
            "documents",
            help="check manifests of trusted documents (for a front-end's CI)",
            description="Trusted documents: `check FILE...` as the service would load them.",
        )
    )
    add_schema_arguments(
        commands.add_parser(
            "schema",
            help="classify schema changes (diff), accept a deliberate one (accept: make schema)",
            description=(
                "Schema evolution: `diff OLD NEW` prints each change as breaking, dangerous or "
                "safe; `accept` writes the snapshots, refusing a breaking change of a field, "
                "argument or enum value that was not deprecated or that a committed trusted "
                "document still uses."
            ),
        )
    )
    return parser


def _settings_problem(error: pydantic.ValidationError) -> str:
    problems = []
    for detail in error.errors():
        field = ".".join(str(part) for part in detail["loc"])
        message = detail["msg"].removeprefix("Value error, ")
        problems.append(f"LOC_{field.upper()}: {message}" if field else message)
    return "invalid settings: " + "; ".join(problems)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    if arguments.command == "template":
        sys.stdout.write(stack_template_text())
        return 0
    if arguments.command == "schema":
        return run_schema(arguments, sys.stdout)
    try:
        settings = Settings()
        if arguments.command == "token":
            return _token(settings, arguments)
        if arguments.command == "collect":
            return run_collect(settings, arguments)
        if arguments.command == "reshard":
            return run_reshard(settings, arguments)
        if arguments.command == "documents":
            return run_documents(settings, arguments, sys.stdout)
        return serve(settings)
    except pydantic.ValidationError as error:
        message = _settings_problem(error)
    except InvalidCursor:
        message = (
            "the checkpoint's cursor does not verify: it was saved with another "
            "LOC_CURSOR_SECRET or changed; start over with a new checkpoint file"
        )
    except (
        JavaMissing,
        DynamoDBLocalMissing,
        DynamoDBLocalFailed,
        TokenRefused,
        CheckpointRefused,
        PaymentsError,
    ) as error:
        message = str(error)
    except KeyboardInterrupt:
        return 130
    print(f"loc-payments: {message}", file=sys.stderr)
    return 1
