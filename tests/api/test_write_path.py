"""One write path: every write goes through `resolvers.workflow`, and input is checked once."""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from datasource import DynamoConfig
from domain import validation
from tests.api.conftest import Api, api_client, payment_items

ROOT = Path(__file__).resolve().parents[2]
SERVICE_PACKAGES = ("domain", "datasource", "resolvers", "schema", "server")
# A write call on the store: `store.create(` / `.transition(` on anything named like a store.
STORE_WRITE = re.compile(r"\bstore\.(create|transition)\(")


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[str]:
    calls: list[str] = []
    original: Callable[[str, str], str] = getattr(validation, name)

    def counted(field: str, value: str) -> str:
        calls.append(field)
        return original(field, value)

    monkeypatch.setattr(validation, name, counted)
    return calls


async def test_a_move_checks_its_payment_id_once(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    payment = await api.create()
    payment_ids = _counting(monkeypatch, "payment_id")
    reasons = _counting(monkeypatch, "reason")

    result = await api.move("submitPayment", payment, confirmationId="conf-1")

    assert result["__typename"] == "PaymentPayload", result
    assert payment_ids == ["paymentId"]
    assert reasons == ["reason"]


async def test_a_lookup_checks_its_ids_once(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    payment = await api.create()
    identifiers = _counting(monkeypatch, "identifier")
    payment_ids = _counting(monkeypatch, "payment_id")
    data = await api.data(
        "query($u: ID, $l: ID!, $p: ID!) { payment(userId: $u, loanId: $l, paymentId: $p) { id } }",
        {"u": payment["userId"], "l": payment["loanId"], "p": payment["paymentId"]},
    )
    assert data["payment"] is not None
    # userId and loanId as identifiers, paymentId as a payment id (a canonical UUID needs no
    # more): once each.
    assert sorted(identifiers) == ["loanId", "userId"]
    assert payment_ids == ["paymentId"]


async def test_every_demonstration_write_is_audited_as_a_job(
    moto_config: DynamoConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="loc_payments.audit")
    fresh = dataclasses.replace(moto_config, table_name=f"demo-{uuid.uuid4().hex[:12]}")
    async with api_client(fresh, seed_demo_data=True):
        pass
    events: list[dict[str, Any]] = [
        record.__dict__ for record in caplog.records if record.name == "loc_payments.audit"
    ]
    stored = payment_items(fresh)
    # A payment's version counts its writes: its creation and each move.
    assert len(events) == sum(int(item["loc_version"]["N"]) for item in stored)
    assert {(event["actor_kind"], event["actor_id"]) for event in events} == {
        ("job", "loc-payments-demo-data")
    }
    creations = [event for event in events if event["event"] == "payment.created"]
    assert len(creations) == len(stored)


def test_only_the_workflow_writes_payments() -> None:
    writers = sorted(
        str(path.relative_to(ROOT))
        for package in SERVICE_PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if STORE_WRITE.search(path.read_text())
    )
    assert writers == ["resolvers/workflow.py"]
