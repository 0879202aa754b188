"""One write path: every write goes through `resolvers.workflow`, and input is checked once."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from domain import validation
from tests.api.conftest import Api

ROOT = Path(__file__).resolve().parents[2]
SERVICE_PACKAGES = (
    "domain",
    "datasource",
    "resolvers",
    "engine",
    "schema",
    "server",
    "jobs",
    "infra",
    "cli",
)
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


def test_only_the_workflow_writes_payments() -> None:
    writers = sorted(
        str(path.relative_to(ROOT))
        for package in SERVICE_PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if STORE_WRITE.search(path.read_text())
    )
    assert writers == ["resolvers/workflow.py"]
