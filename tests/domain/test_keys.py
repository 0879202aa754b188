from domain import keys
from domain.enums import PaymentStatus

PAYMENT_ID = "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"


def test_table_keys() -> None:
    assert keys.user_partition("alice") == "USER#alice"
    assert keys.payment_sort_key("loan-1", PAYMENT_ID) == f"LOAN#loan-1#PAYMENT#{PAYMENT_ID}"


def test_gsi1_keys() -> None:
    assert (
        keys.loan_status_sort_key("loan-1", PaymentStatus.ACHSENT, PAYMENT_ID)
        == f"LOAN#loan-1#STATUS#ACHSENT#PAYMENT#{PAYMENT_ID}"
    )


def test_gsi2_keys() -> None:
    assert keys.GSI2_PARTITION == "PAYMENT"
    assert (
        keys.status_sort_key(PaymentStatus.CHARGED_BACK, PAYMENT_ID)
        == f"STATUS#CHARGED_BACK#PAYMENT#{PAYMENT_ID}"
    )


def test_gsi3_keys() -> None:
    assert keys.confirmation_sort_key("conf-9") == "CONFIRMATION#conf-9"


def test_prefixes_end_in_the_delimiter() -> None:
    assert keys.loan_payments_prefix("loan-1") == "LOAN#loan-1#PAYMENT#"
    assert keys.loan_status_prefix("loan-1", PaymentStatus.RETRY) == "LOAN#loan-1#STATUS#RETRY#"
    assert keys.status_prefix(PaymentStatus.PENDING) == "STATUS#PENDING#"


def test_a_prefix_matches_its_own_keys_and_not_a_longer_id() -> None:
    own = keys.payment_sort_key("12", PAYMENT_ID)
    longer = keys.payment_sort_key("123", PAYMENT_ID)
    assert own.startswith(keys.loan_payments_prefix("12"))
    assert not longer.startswith(keys.loan_payments_prefix("12"))
    status_key = keys.loan_status_sort_key("12", PaymentStatus.RETRY, PAYMENT_ID)
    assert status_key.startswith(keys.loan_status_prefix("12", PaymentStatus.RETRY))
    assert not status_key.startswith(keys.loan_status_prefix("1", PaymentStatus.RETRY))
    # SKIPPED must not match a (hypothetical) status that begins with it; the `#` sees to that.
    assert keys.status_prefix(PaymentStatus.RETRY).endswith("RETRY#")
