"""`loc-payments collect`: the collection job's options, its DynamoDB, progress bar and summary.

The JSON lines go to stdout or `--output`; everything for people (the DynamoDB Local address, the
progress bar, the logs, the summary) goes to stderr, so stdout can be piped to the submitter.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from datasource import MAX_PAGE_SIZE
from jobs.checkpoint import Checkpoint, CollectionCounts, open_report
from jobs.collect import (
    DEFAULT_CONCURRENCY,
    CollectionRun,
    collect_with_settings,
    start_or_resume,
    summary,
)
from process.bootstrap import dynamodb_endpoint
from process.logs import configure_logging
from process.settings import Settings

__all__ = ["add_arguments", "add_paging_arguments", "run_collect"]

MAX_CONCURRENCY = 32


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output", type=Path, metavar="FILE", help="write the JSON lines here (default: stdout)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="write nothing to DynamoDB; report all the same"
    )
    add_paging_arguments(
        parser,
        max_concurrency=MAX_CONCURRENCY,
        default_concurrency=DEFAULT_CONCURRENCY,
        concurrency_help="payments of a page decided at once",
    )


def add_paging_arguments(
    parser: argparse.ArgumentParser,
    *,
    max_concurrency: int,
    default_concurrency: int,
    concurrency_help: str,
) -> None:
    """A paged job's options: its checkpoint file, its page size, how much it does at once."""
    parser.add_argument(
        "--checkpoint",
        type=Path,
        metavar="FILE",
        help="save progress here after each page; run again with it to resume after a crash",
    )
    parser.add_argument(
        "--page-size",
        type=bounded(1, MAX_PAGE_SIZE),
        default=MAX_PAGE_SIZE,
        metavar="N",
        help="payments per page and per checkpoint (default: %(default)s)",
    )
    parser.add_argument(
        "--concurrency",
        type=bounded(1, max_concurrency),
        default=default_concurrency,
        metavar="N",
        help=f"{concurrency_help} (default: %(default)s)",
    )


def run_collect(settings: Settings, arguments: argparse.Namespace) -> int:
    output: Path | None = arguments.output
    run = CollectionRun(
        max_attempts=settings.max_attempts,
        dry_run=arguments.dry_run,
        page_size=arguments.page_size,
        concurrency=arguments.concurrency,
        checkpoint_path=arguments.checkpoint,
    )
    fresh = Checkpoint(
        table_name=settings.table_name,
        report=str(output.resolve()) if output is not None else None,
        dry_run=run.dry_run,
    )
    saved = start_or_resume(run, fresh)
    if saved is not None and saved.finished:
        print(f"{summary(saved)}; the checkpoint records a finished run", file=sys.stderr)
        return 0
    if saved is not None:
        print(f"collect: resuming after {saved.counts.scanned} payments", file=sys.stderr)
    configure_logging(
        log_format=settings.log_format, local=settings.env == "local", level=settings.log_level
    )
    # Only this command draws a progress bar.
    from tqdm import tqdm  # type: ignore[import-untyped]
    from tqdm.contrib.logging import logging_redirect_tqdm  # type: ignore[import-untyped]

    with contextlib.ExitStack() as stack:
        # A run stopped by SIGTERM is unfinished: 128 + SIGTERM, as a shell reports it; the
        # report file is closed and DynamoDB Local stopped on the way out.
        endpoint = stack.enter_context(
            dynamodb_endpoint(
                settings, announce_to=sys.stderr, exit_status_on_sigterm=128 + signal.SIGTERM
            )
        )
        report = open_report(output, saved)
        if output is not None:
            stack.callback(report.close)
        bar = stack.enter_context(
            tqdm(
                desc="collect",
                unit=" payments",
                initial=saved.counts.scanned if saved is not None else 0,
                file=sys.stderr,
                disable=not sys.stderr.isatty(),
            )
        )
        if not bar.disable:
            # Log lines go above the bar instead of through it.
            stack.enter_context(logging_redirect_tqdm())

        def on_page(listed: int, counts: CollectionCounts) -> None:
            bar.set_postfix(failed=counts.failed, eligible=counts.eligible, refresh=False)
            bar.update(listed)

        try:
            final = asyncio.run(
                collect_with_settings(
                    settings,
                    run,
                    endpoint_url=endpoint,
                    report=report,
                    start=saved or fresh,
                    on_page=on_page,
                )
            )
        except (KeyboardInterrupt, SystemExit):
            if run.checkpoint_path is not None:
                print(
                    f"collect: stopped; resume with --checkpoint {run.checkpoint_path}",
                    file=sys.stderr,
                )
            raise
    print(summary(final), file=sys.stderr)
    return 0


def bounded(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}")
        return value

    return parse
