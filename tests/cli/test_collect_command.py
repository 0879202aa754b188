"""`loc-payments collect` as an operator runs it: options, the report, the summary, resuming."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from cli.main import main
from datasource import (
    GSI2,
    GSI2PK,
    GSI2SK,
    PK,
    SK,
    CursorCodec,
    DynamoConfig,
    Item,
    ListScope,
    primary_key,
    to_item,
)
from domain import keys
from domain.enums import PaymentMethod, PaymentStatus
from domain.payment import Payment
from tests.backends import TEST_KEY
from tests.jobs.collect_runs import MAX_ATTEMPTS
from tests.payment_samples import payment_in

S = PaymentStatus


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    # The command configures the root logger for its process; the test process keeps its own.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def job_environment(moto_config: DynamoConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    assert moto_config.endpoint_url is not None
    monkeypatch.setenv("LOC_DYNAMODB_ENDPOINT", moto_config.endpoint_url)
    monkeypatch.setenv("LOC_TABLE_NAME", moto_config.table_name)
    monkeypatch.setenv("LOC_LOG_FORMAT", "json")


def _collect(*arguments: str) -> int:
    return main(["collect", *arguments])


def _client(config: DynamoConfig) -> Any:
    # The command runs its own event loop, so these tests are synchronous and so is this client.
    return boto3.client(
        "dynamodb",
        endpoint_url=config.endpoint_url,
        region_name=config.region,
        aws_access_key_id=TEST_KEY,
        aws_secret_access_key=TEST_KEY,
    )


def _seed(config: DynamoConfig, payments: list[Payment]) -> None:
    requests = [{"PutRequest": {"Item": to_item(payment)}} for payment in payments]
    with contextlib.closing(_client(config)) as client:
        client.batch_write_item(RequestItems={config.table_name: requests})


def _status(config: DynamoConfig, payment: Payment) -> str:
    with contextlib.closing(_client(config)) as client:
        item = client.get_item(TableName=config.table_name, Key=primary_key(payment))["Item"]
    status: str = item["loc_status"]["S"]
    return status


def test_the_command_fails_spent_payments_lists_the_others_and_sums_up(
    moto_config: DynamoConfig,
    job_environment: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The command runs on the real clock: presented yesterday.
    yesterday = datetime.now(UTC) - timedelta(days=1)
    spent, eligible = (
        payment_in(S.RETRY, PaymentMethod.ACH, attempts=attempts, first_presented_at=yesterday)
        for attempts in (MAX_ATTEMPTS, 1)
    )
    _seed(moto_config, [spent, eligible])
    output, checkpoint = tmp_path / "eligible.jsonl", tmp_path / "checkpoint.json"

    assert _collect("--output", str(output), "--checkpoint", str(checkpoint)) == 0

    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert [(line["paymentId"], line["attemptsRemaining"]) for line in lines] == [
        (eligible.payment_id, 2)
    ]
    assert _status(moto_config, spent) == "FAILED"
    out, err = capsys.readouterr()
    assert out == ""
    summary = "collect: scanned 2, failed 1, eligible 1, conflicts 0, skipped 0"
    assert err.splitlines()[-1] == summary
    # No progress bar off a terminal; the audit event is a JSON line.
    assert "\r" not in err
    (audit,) = [json.loads(line) for line in err.splitlines() if "payment.transitioned" in line]
    assert (audit["payment_id"], audit["to_status"]) == (spent.payment_id, "FAILED")

    # The same checkpoint again: the run is over, nothing is read or reported twice.
    assert _collect("--output", str(output), "--checkpoint", str(checkpoint)) == 0

    assert len(output.read_text().splitlines()) == 1
    assert capsys.readouterr().err == f"{summary}; the checkpoint records a finished run\n"


def test_without_an_output_file_the_lines_go_to_stdout(
    moto_config: DynamoConfig, job_environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
    eligible = payment_in(S.RETRY, PaymentMethod.PINLESS)
    _seed(moto_config, [eligible])

    assert _collect("--dry-run") == 0

    out, err = capsys.readouterr()
    assert [json.loads(line)["paymentId"] for line in out.splitlines()] == [eligible.payment_id]
    assert err.endswith("(dry run: nothing written)\n")


def test_a_checkpoint_is_resumed_only_by_the_run_it_belongs_to(
    job_environment: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = str(tmp_path / "checkpoint.json")
    assert _collect("--dry-run", "--checkpoint", checkpoint) == 0
    capsys.readouterr()

    assert _collect("--checkpoint", checkpoint) == 1

    err = capsys.readouterr().err
    assert err.startswith("loc-payments: the checkpoint belongs to a run with --dry-run True")
    assert "Traceback" not in err


def test_a_checkpoint_of_the_merged_job_signed_with_another_cursor_secret_is_refused(
    moto_config: DynamoConfig,
    job_environment: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    payments = [payment_in(S.RETRY, PaymentMethod.PINLESS) for _ in range(3)]
    _seed(moto_config, payments)
    # The job before groups saved the cursor after its first page, under another secret.
    newest = payments[-1]
    key: Item = {
        GSI2PK: {"S": keys.status_partition(newest.payment_id, keys.DEFAULT_GSI2_SHARDS)},
        GSI2SK: {"S": keys.status_sort_key(S.RETRY, newest.payment_id)},
        PK: {"S": keys.user_partition(newest.user_id)},
        SK: {"S": keys.payment_sort_key(newest.loan_id, newest.payment_id)},
    }
    secret = b"another-cursor-secret-of-32-bytes-or-more"
    cursor = CursorCodec(secret).encode(ListScope(GSI2, status=S.RETRY), key)
    checkpoint = tmp_path / "checkpoint.json"
    checkpoint.write_text(
        json.dumps(
            {
                "format": "loc-payments-collect/1",
                "table_name": moto_config.table_name,
                "report": None,
                "dry_run": True,
                "cursor": cursor,
                "report_bytes": None,
                "counts": {"scanned": 1, "failed": 0, "eligible": 1, "conflicts": 0, "skipped": 0},
                "finished": False,
            }
        )
    )

    assert _collect("--dry-run", "--page-size", "1", "--checkpoint", str(checkpoint)) == 1

    assert "LOC_CURSOR_SECRET" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--page-size", "--concurrency"])
def test_sizes_out_of_range_are_refused(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["collect", option, "0"])

    assert exit.value.code == 2
    assert "must be between 1 and" in capsys.readouterr().err
