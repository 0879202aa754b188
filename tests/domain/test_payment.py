import uuid

import pytest

from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.errors import InvalidInput
from domain.payment import Payment, PaymentRef, new_payment
from tests.payment_samples import NOW


def _new(**changes: object) -> Payment:
    arguments: dict[str, object] = {
        "user_id": "alice",
        "loan_id": "loan-1",
        "amount_cents": 5_000,
        "method": PaymentMethod.PINLESS,
        "process": PaymentProcess.AUTO,
        "reason": "autopay",
        "now": NOW,
        "account_last_four": "1234",
        "intended_installment_id": "inst-7",
    }
    return new_payment(**(arguments | changes))  # type: ignore[arg-type]


def test_a_new_payment_is_pending_unpresented_and_version_one() -> None:
    payment = _new()
    assert payment.status is PaymentStatus.PENDING
    assert payment.attempts == 0
    assert payment.version == 1
    assert payment.created_at == payment.updated_at == NOW
    assert payment.confirmation_id is None
    assert payment.applications == ()
    assert uuid.UUID(payment.payment_id).version == 7


def test_payment_ids_sort_by_creation() -> None:
    ids = [_new().payment_id for _ in range(50)]
    assert ids == sorted(ids)


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("userId", {"user_id": "a#b"}),
        ("loanId", {"loan_id": ""}),
        ("amountCents", {"amount_cents": 0}),
        ("reason", {"reason": " "}),
        ("accountLastFour", {"account_last_four": "123456"}),
        ("intendedInstallmentId", {"intended_installment_id": "x#y"}),
        ("method", {"method": "ACH"}),
        ("process", {"process": "CASH"}),
    ],
)
def test_a_new_payment_refuses_bad_fields(field: str, change: dict[str, object]) -> None:
    with pytest.raises(InvalidInput) as refused:
        _new(**change)
    assert refused.value.field == field


def test_a_checked_ref_refuses_what_cannot_name_a_payment() -> None:
    good = "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
    assert PaymentRef.checked("alice", "loan-1", good) == PaymentRef("alice", "loan-1", good)
    for user_id, loan_id, payment_id, field in [
        ("a#", "loan-1", good, "userId"),
        ("alice", "", good, "loanId"),
        ("alice", "loan-1", "nope", "paymentId"),
    ]:
        with pytest.raises(InvalidInput) as refused:
            PaymentRef.checked(user_id, loan_id, payment_id)
        assert refused.value.field == field
