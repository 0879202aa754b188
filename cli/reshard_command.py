"""`loc-payments reshard`: its options, its DynamoDB, progress on stderr and the summary."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from cli.collect_command import add_paging_arguments
from jobs.reshard import DEFAULT_CONCURRENCY, ReshardCounts, reshard_with_settings
from process.bootstrap import dynamodb_endpoint
from process.logs import configure_logging
from process.settings import Settings

__all__ = ["add_arguments", "run_reshard"]

MAX_CONCURRENCY = 64


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_paging_arguments(
        parser,
        max_concurrency=MAX_CONCURRENCY,
        default_concurrency=DEFAULT_CONCURRENCY,
        concurrency_help="payments moved at once",
    )


def run_reshard(settings: Settings, arguments: argparse.Namespace) -> int:
    checkpoint_path: Path | None = arguments.checkpoint
    configure_logging(
        log_format=settings.log_format, local=settings.env == "local", level=settings.log_level
    )

    def announce(message: str) -> None:
        print(f"reshard: {message}", file=sys.stderr)

    def on_page(listed: int, counts: ReshardCounts) -> None:
        if sys.stderr.isatty():
            print(f"\rreshard: {counts.summary()}", end="", file=sys.stderr, flush=True)

    with dynamodb_endpoint(
        settings, announce_to=sys.stderr, exit_status_on_sigterm=128 + signal.SIGTERM
    ) as endpoint:
        try:
            run = asyncio.run(
                reshard_with_settings(
                    settings,
                    endpoint_url=endpoint,
                    checkpoint_path=checkpoint_path,
                    page_size=arguments.page_size,
                    concurrency=arguments.concurrency,
                    announce=announce,
                    on_page=on_page,
                )
            )
        except (KeyboardInterrupt, SystemExit):
            if checkpoint_path is not None:
                print(
                    f"\nreshard: stopped; resume with --checkpoint {checkpoint_path}",
                    file=sys.stderr,
                )
            raise
    final = run.status
    print(
        f"\nreshard: {final.counts.summary()}; every payment is in the layout of "
        f"{final.shards} shard(s), recorded in the table's layout record: within "
        f"{settings.layout_refresh_seconds:g} s every instance reads that layout alone",
        file=sys.stderr,
    )
    return 0
