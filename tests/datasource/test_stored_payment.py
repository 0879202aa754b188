"""A payment read from the table converts each field when first read (`StoredPayment`): it must
answer exactly what the payment written does, for every field, in any order of reads."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datasource.errors import FieldNotRead
from datasource.items import from_item, projected_attributes, to_item
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.payment import Application, Payment

FIELDS = [field.name for field in dataclasses.fields(Payment)]
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

# Millisecond instants: what an item stores.
instants = st.integers(0, 10**10).map(lambda ms: EPOCH + timedelta(milliseconds=ms))
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12)
applications = st.builds(
    Application,
    payment_id=names,
    installment_id=names,
    amount_cents=st.integers(1, 10**9),
    payment_date=instants,
)
payments = st.builds(
    Payment,
    user_id=names,
    loan_id=names,
    payment_id=names,
    amount_cents=st.integers(1, 10**9),
    status=st.sampled_from(PaymentStatus),
    method=st.sampled_from(PaymentMethod),
    process=st.sampled_from(PaymentProcess),
    attempts=st.integers(0, 10),
    update_reason=st.text(max_size=20),
    created_at=instants,
    updated_at=instants,
    version=st.integers(1, 1000),
    confirmation_id=st.none() | names,
    account_last_four=st.none() | st.from_regex(r"\A\d{4}\Z"),
    intended_installment_id=st.none() | names,
    applications=st.lists(applications, max_size=3).map(tuple),
    return_code=st.none() | st.sampled_from(["R01", "R10"]),
    first_presented_at=st.none() | instants,
    completed_at=st.none() | instants,
    history_from=st.none() | st.integers(1, 5),
)


@given(payment=payments, reads=st.lists(st.sampled_from(FIELDS), max_size=30))
def test_each_field_read_in_any_order_is_the_written_payments(
    payment: Payment, reads: list[str]
) -> None:
    stored = from_item(to_item(payment))

    for name in reads:
        assert getattr(stored, name) == getattr(payment, name), name
    for name in FIELDS:
        assert getattr(stored, name) == getattr(payment, name), name


@given(payment=payments, reads=st.lists(st.sampled_from(FIELDS), max_size=5))
def test_it_equals_hashes_and_copies_as_the_written_payment(
    payment: Payment, reads: list[str]
) -> None:
    stored = from_item(to_item(payment))
    for name in reads:  # some fields converted already, the others not
        getattr(stored, name)

    assert stored == payment and payment == stored
    assert hash(stored) == hash(payment)
    assert isinstance(stored, Payment)
    assert repr(stored).startswith("StoredPayment(user_id=")
    moved = dataclasses.replace(stored, version=stored.version + 1)
    assert type(moved) is Payment
    assert moved == dataclasses.replace(payment, version=payment.version + 1)
    assert stored != dataclasses.replace(payment, amount_cents=payment.amount_cents + 1)


def test_an_item_that_is_not_a_payment_is_refused_at_once() -> None:
    item = to_item(
        Payment(
            user_id="u",
            loan_id="l",
            payment_id="p",
            amount_cents=1,
            status=PaymentStatus.PENDING,
            method=PaymentMethod.ACH,
            process=PaymentProcess.MANUAL,
            attempts=0,
            update_reason="",
            created_at=EPOCH,
            updated_at=EPOCH,
        )
    )
    del item["loc_amount"]

    try:
        from_item(item)
    except ValueError as refused:
        assert "loc_amount" in str(refused)
    else:
        raise AssertionError("an item without loc_amount was taken for a payment")


@given(payment=payments, fields=st.sets(st.sampled_from(FIELDS)))
def test_read_with_a_projection_it_answers_the_fields_read_and_refuses_the_others(
    payment: Payment, fields: set[str]
) -> None:
    item = to_item(payment)
    kept = set(projected_attributes(frozenset(fields)))
    stored = from_item(
        {name: value for name, value in item.items() if name in kept}, frozenset(fields)
    )

    for name in FIELDS:
        if name in fields or name in ("user_id", "loan_id", "payment_id"):
            assert getattr(stored, name) == getattr(payment, name), name
        else:
            # Never a made-up value (an optional field read as None, an empty list).
            with pytest.raises(FieldNotRead):
                getattr(stored, name)
