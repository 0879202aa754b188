"""The tests' loans subgraph answers every installment id the tests make."""

from __future__ import annotations

from datetime import date

from tests.federation.loans_subgraph import due_date


def test_a_unique_suffix_of_decimal_digits_is_not_the_installments_ordinal() -> None:
    # `uuid4().hex[:8]` is all decimal digits about one time in forty.
    assert due_date("inst-3-12345678") == due_date("inst-3") == date(2026, 5, 31)
    assert due_date("inst-1") == date(2026, 4, 1)
