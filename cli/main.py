"""`loc-payments`: run the service (`serve`), mint a development token (`token`), print the
service's CloudFormation stack (`template`), run the collection job (`collect`), check
manifests of trusted documents (`documents check`), classify and accept schema changes
(`schema diff`, `schema accept`)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import pydantic

from cli.collect_command import add_arguments as add_collect_arguments
from cli.collect_command import run_collect
from cli.documents_command import add_arguments as add_documents_arguments
from cli.documents_command import run_documents
from cli.reshard_command import add_arguments as add_reshard_arguments
from cli.reshard_command import run_reshard
from cli.schema_command import add_arguments as add_schema_arguments
from cli.schema_command import run_schema
from cli.serve_command import serve
from domain.errors import InvalidCursor, PaymentsError
from infra.stack import TEMPLATE_COMMAND, stack_template_text
from jobs.errors import CheckpointRefused
from process.errors import DynamoDBLocalFailed, DynamoDBLocalMissing, JavaMissing
from process.settings import Settings
from server.auth import (
    DEFAULT_TOKEN_TTL_SECONDS,
    SERVICE_SCOPE,
    WEBHOOKS_ADMIN_SCOPE,
    mint_development_token,
)
from server.errors import TokenRefused

__all__ = ["main"]


def _token(settings: Settings, arguments: argparse.Namespace) -> int:
    print(
        mint_development_token(
            settings,
            user_id=arguments.user,
            service=arguments.service,
            webhooks_admin=arguments.webhooks_admin,
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
        "--webhooks-admin",
        action="store_true",
        help=f"an operator of every client's webhook endpoints (scope {WEBHOOKS_ADMIN_SCOPE})",
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
            help="move the table to the layouts of LOC_GSI2_SHARDS and LOC_EVENTS_SHARDS",
            description=(
                "Moves every payment to its GSI2 partition in the layout of LOC_GSI2_SHARDS, "
                "from the older layouts the table's layout record names (each move a "
                "conditional rewrite of its GSI2PK), and records the end in the layout record; "
                "within LOC_LAYOUT_REFRESH_SECONDS every instance stops reading the old layouts. "
                "If LOC_EVENTS_SHARDS differs from the feed's layout, records that layout from "
                "a moment ahead (no event moves). Run it with the service's settings; the "
                "service serves throughout."
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
