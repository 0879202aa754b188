"""Benchmark payments: made by the domain's own constructor and transition engine, stored as the
datasource's items, so every peer and DynamoDB Local hold exactly what the service would write.

Users are `user-0000` ... , each with loans `loan-00` ... ; payment statuses cycle through
PENDING, ACHSENT, COMPLETED and RETRY (a quarter each), so `paymentsByStatus(PENDING)` has a
quarter of all payments to page through.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from datasource.items import Item, to_item
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.keys import SEED_LAYOUT, StatusLayout
from domain.payment import Payment, new_payment
from domain.transitions import TransitionRequest, apply_transition

EPOCH = datetime(2026, 1, 5, 14, 0, tzinfo=UTC)
MAX_ATTEMPTS = 3
S = PaymentStatus


def user_id(number: int) -> str:
    return f"user-{number:04d}"


def loan_id(number: int) -> str:
    return f"loan-{number:02d}"


def payment(user: str, loan: str, number: int) -> Payment:
    """The `number`-th payment of the data set, in the status its number picks."""
    now = EPOCH + timedelta(milliseconds=number)
    made = new_payment(
        user_id=user,
        loan_id=loan,
        amount_cents=1_000 + number % 50_000,
        method=PaymentMethod.ACH,
        process=PaymentProcess.AUTO,
        reason="benchmark data",
        now=now,
        account_last_four="4242",
        intended_installment_id=f"inst-{number}",
    )
    moves: list[TransitionRequest] = []
    status = (S.PENDING, S.ACHSENT, S.COMPLETED, S.RETRY)[number % 4]
    if status is not S.PENDING:
        moves.append(TransitionRequest(S.ACHSENT, "presented", confirmation_id=f"ach-{number}"))
    if status is S.COMPLETED:
        moves.append(TransitionRequest(S.COMPLETED, "settled"))
    if status is S.RETRY:
        moves.append(TransitionRequest(S.RETRY, "returned", return_code="R01"))
    for move in moves:
        made = apply_transition(made, move, max_attempts=MAX_ATTEMPTS, now=now)
    return made


def items(
    *,
    users: range,
    loans_per_user: int,
    payments_per_loan: int,
    first_number: int = 0,
    layout: StatusLayout = SEED_LAYOUT,
) -> Iterator[Item]:
    """The items of `users`, loan by loan; numbers (and so statuses) continue from
    `first_number`; GSI2 keys in `layout`."""
    number = first_number
    for user in users:
        for loan in range(loans_per_user):
            for _ in range(payments_per_loan):
                yield to_item(payment(user_id(user), loan_id(loan), number), layout)
                number += 1


def write(path: Path, stored: list[Item]) -> None:
    path.write_text(json.dumps(stored, separators=(",", ":")))


def read(path: Path) -> list[Item]:
    stored: list[Item] = json.loads(path.read_text())
    return stored
