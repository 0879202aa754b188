"""`loc-payments reshard`: its options, its DynamoDB, progress on stderr and the summary."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from jobs.collect_command import add_paging_arguments
from jobs.reshard import (
    DEFAULT_CONCURRENCY,
    ReshardCounts,
    fresh_checkpoint,
    reshard_with_settings,
    start_or_resume,
)
from server.bootstrap import dynamodb_endpoint
from server.logs import configure_logging
from server.settings import Settings

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
    start = start_or_resume(checkpoint_path, fresh_checkpoint(settings))
    if start.finished:
        print(
            f"reshard: {start.counts.summary()}; the checkpoint records a finished run",
            file=sys.stderr,
        )
        return 0
    if start.counts.scanned:
        print(f"reshard: resuming after {start.counts.scanned} payments", file=sys.stderr)
    configure_logging(
        log_format=settings.log_format, local=settings.env == "local", level=settings.log_level
    )
    print(
        f"reshard: GSI2 to {start.shards} shard(s), reading {', '.join(start.sources)}",
        file=sys.stderr,
    )

    def on_page(listed: int, counts: ReshardCounts) -> None:
        if sys.stderr.isatty():
            print(f"\rreshard: {counts.summary()}", end="", file=sys.stderr, flush=True)

    with dynamodb_endpoint(
        settings, announce_to=sys.stderr, exit_status_on_sigterm=128 + signal.SIGTERM
    ) as endpoint:
        try:
            final = asyncio.run(
                reshard_with_settings(
                    settings,
                    endpoint_url=endpoint,
                    start=start,
                    checkpoint_path=checkpoint_path,
                    page_size=arguments.page_size,
                    concurrency=arguments.concurrency,
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
    print(
        f"\nreshard: {final.counts.summary()}; every payment is in the layout of "
        f"{final.shards} shard(s): LOC_GSI2_READ_SHARDS can be dropped",
        file=sys.stderr,
    )
    return 0
