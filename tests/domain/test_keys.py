import hashlib
from collections import Counter

import pytest
from uuid_utils.compat import uuid7

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


def test_idempotency_keys_are_scoped_by_the_caller_s_kind() -> None:
    digest = hashlib.sha256(b"autopay-u-1-2026-12").hexdigest()
    assert keys.idempotency_sort_key("SERVICE", "autopay-u-1-2026-12") == (
        f"IDEMPOTENCY#SERVICE#{digest}"
    )
    assert keys.idempotency_sort_key("CUSTOMER", "autopay-u-1-2026-12") == (
        f"IDEMPOTENCY#CUSTOMER#{digest}"
    )
    # The form written before issue 55, read while such a record can be live.
    assert keys.user_scoped_idempotency_sort_key("autopay-u-1-2026-12") == f"IDEMPOTENCY#{digest}"


def test_prefixes_end_in_the_delimiter() -> None:
    assert keys.loan_payments_prefix("loan-1") == "LOAN#loan-1#PAYMENT#"
    assert keys.user_payments_prefix() == "LOAN#"
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


def test_a_payments_status_shard_is_stable_and_uniform() -> None:
    # Stable: the same id, the same shard, in every process (a hash, not Python's `hash`).
    assert keys.status_shard("01a2317e-b69f-7097-91f7-6b4971fe0cc6", 16) == keys.status_shard(
        "01a2317e-b69f-7097-91f7-6b4971fe0cc6", 16
    )
    assert keys.status_partition("p", 1) == "PAYMENT"
    ids = [str(uuid7()) for _ in range(16_000)]
    counts = Counter(keys.status_shard(payment_id, 16) for payment_id in ids)
    # UUIDv7 ids made in one burst share their time prefix; the shards still fill evenly.
    assert sorted(counts) == list(range(16))
    assert all(800 <= count <= 1200 for count in counts.values()), counts


def test_a_layout_reads_each_partition_once_and_refuses_silly_shard_counts() -> None:
    layout = keys.StatusLayout(16, also_read=(1, 4))
    partitions = layout.read_partitions()
    assert len(partitions) == len(set(partitions)) == 17
    assert layout.source_partitions() == [
        "PAYMENT",
        "PAYMENT#0",
        "PAYMENT#1",
        "PAYMENT#2",
        "PAYMENT#3",
    ]
    assert keys.SEED_LAYOUT.read_partitions() == ["PAYMENT"]
    for shards in (0, keys.MAX_GSI2_SHARDS + 1):
        with pytest.raises(ValueError, match="1 to 256 shards"):
            keys.StatusLayout(shards)


def test_a_group_of_the_layouts_is_in_the_same_partitions_of_each() -> None:
    assert keys.StatusLayout(64).group_modulus == 64
    assert keys.StatusLayout(64, also_read=(1,)).group_modulus == 1
    assert keys.StatusLayout(24, also_read=(16,)).group_modulus == 8
    # Between reshards, one partition a group.
    assert keys.StatusLayout(64).group_partitions(64, 5) == (["PAYMENT#5"], [])
    assert keys.StatusLayout(4, also_read=(1,)).group_partitions(1, 0) == (
        ["PAYMENT#0", "PAYMENT#1", "PAYMENT#2", "PAYMENT#3"],
        ["PAYMENT"],
    )
    assert keys.StatusLayout(24, also_read=(16,)).group_partitions(8, 3) == (
        ["PAYMENT#3", "PAYMENT#11", "PAYMENT#19"],
        ["PAYMENT#3", "PAYMENT#11"],
    )
    # A modulus the layout's count is not a multiple of: the partitions its group can be in.
    assert keys.StatusLayout(6).group_partitions(4, 3) == (
        ["PAYMENT#1", "PAYMENT#3", "PAYMENT#5"],
        [],
    )
    ids = [str(uuid7()) for _ in range(2_000)]
    for payment_id in ids:
        group = keys.status_shard(payment_id, 8)
        written, moving = keys.StatusLayout(24, also_read=(16,)).group_partitions(8, group)
        assert keys.status_partition(payment_id, 24) in written
        assert keys.status_partition(payment_id, 16) in moving
