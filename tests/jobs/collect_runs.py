"""Running the collection job in tests as the command does, or as a process of its own, and
reading what it left."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from datasource import DynamoConfig, PaymentStore
from domain.enums import PaymentMethod, PaymentStatus
from domain.payment import Payment
from harness.processes import KEPT_SETTINGS, ROOT
from jobs.checkpoint import Checkpoint, CollectionCounts, open_report
from jobs.collect import CollectionRun, collect_retries, start_or_resume
from tests.payment_samples import NOW, payment_in

MAX_ATTEMPTS = 3
# A day after the samples' first presentment: well inside the 180-day window.
SOON = NOW + timedelta(days=1)


def retry_payment(*, eligible: bool, method: PaymentMethod = PaymentMethod.ACH) -> Payment:
    """A RETRY payment with one presentment left, or none."""
    return payment_in(PaymentStatus.RETRY, method, attempts=2 if eligible else MAX_ATTEMPTS)


async def run_job(
    store: PaymentStore,
    directory: Path,
    *,
    clock: Callable[[], datetime] = lambda: SOON,
    dry_run: bool = False,
    page_size: int = 100,
    concurrency: int = 8,
    on_page: Callable[[int, CollectionCounts], None] | None = None,
) -> Checkpoint:
    """One run (or the resumption of one) with a checkpoint and a report file in `directory`."""
    run = CollectionRun(
        max_attempts=MAX_ATTEMPTS,
        clock=clock,
        dry_run=dry_run,
        page_size=page_size,
        concurrency=concurrency,
        checkpoint_path=directory / "checkpoint.json",
    )
    report_path = directory / "eligible.jsonl"
    fresh = Checkpoint(table_name=store.table_name, report=str(report_path), dry_run=dry_run)
    saved = start_or_resume(run, fresh)
    with open_report(report_path, saved) as report:
        return await collect_retries(
            store, run, report=report, start=saved or fresh, on_page=on_page
        )


def reported(directory: Path) -> list[dict[str, Any]]:
    lines = (directory / "eligible.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def reported_ids(directory: Path) -> list[str]:
    return [line["paymentId"] for line in reported(directory)]


def ids(payments: Sequence[Payment]) -> set[str]:
    return {payment.payment_id for payment in payments}


async def collect_process(
    config: DynamoConfig, directory: Path, *, page_size: int = 10, **settings: str
) -> asyncio.subprocess.Process:
    """`loc-payments collect` started in a process of its own on the table of `config` (its
    report and checkpoint in `directory`), with `settings` (LOC_* by setting name), warnings
    only on its stderr."""
    assert config.endpoint_url is not None
    environment = {
        **{name: value for name, value in os.environ.items() if not name.startswith("LOC_")},
        **{name: os.environ[name] for name in KEPT_SETTINGS if name in os.environ},
        "LOC_ENV": "local",
        "LOC_DYNAMODB_ENDPOINT": config.endpoint_url,
        "LOC_TABLE_NAME": config.table_name,
        "LOC_REGION": config.region,
        "LOC_LOG_LEVEL": "WARNING",
        **{f"LOC_{name.upper()}": value for name, value in settings.items()},
    }
    return await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "cli", "collect", "--page-size", str(page_size)),
        *("--output", str(directory / "eligible.jsonl")),
        *("--checkpoint", str(directory / "checkpoint.json")),
        cwd=ROOT,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def listed_at_least(
    process: asyncio.subprocess.Process, directory: Path, scanned: int
) -> None:
    """Until the checkpoint of `process` counts `scanned` payments listed, or it has ended."""
    checkpoint = directory / "checkpoint.json"
    while process.returncode is None:
        if (
            checkpoint.exists()
            and json.loads(checkpoint.read_text())["counts"]["scanned"] >= scanned
        ):
            return
        await asyncio.sleep(0.005)


async def killed_after(process: asyncio.subprocess.Process, directory: Path, scanned: int) -> None:
    """SIGKILL `process` once its checkpoint counts `scanned` payments listed (wherever it is
    in its page then); refused if it finished first."""
    await listed_at_least(process, directory, scanned)
    if process.returncode is None:
        process.kill()
    _, errors = await process.communicate()
    assert process.returncode == -9, errors.decode()
    saved = json.loads((directory / "checkpoint.json").read_text())
    assert not saved["finished"], "the run ended before it was killed"


async def run_to_its_end(process: asyncio.subprocess.Process) -> str:
    """The process's stderr once it exits 0."""
    _, errors = await process.communicate()
    assert process.returncode == 0, errors.decode()
    return errors.decode()
