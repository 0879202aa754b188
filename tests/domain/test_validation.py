import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from uuid_utils.compat import uuid7

from domain import validation
from domain.errors import InvalidInput


@pytest.mark.parametrize("value", ["alice", "loan-1", "a" * 128, "ünïcode", "user 1"])
def test_identifier_accepts(value: str) -> None:
    assert validation.identifier("userId", value) == value


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "a#b",
        "#",
        "a" * 129,
        "tab\there",
        "new\nline",
        "nul\x00",
        "del\x7f",
        " lead",
        "trail ",
        42,
        None,
    ],
)
def test_identifier_refuses(value: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        validation.identifier("loanId", value)
    assert refused.value.field == "loanId"
    assert refused.value.code == "INVALID_INPUT"


def test_payment_id_is_a_canonical_uuid() -> None:
    good = "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
    assert validation.payment_id("paymentId", good) == good
    for bad in ["not-a-uuid", good.upper(), good.replace("-", ""), f"{{{good}}}", ""]:
        with pytest.raises(InvalidInput):
            validation.payment_id("paymentId", bad)


@given(st.uuids(), st.sampled_from(["0", "9", "4111"]))
def test_a_canonical_uuid_passes_every_identifier_check(value: uuid.UUID, digits: str) -> None:
    # payment_id accepts a canonical UUID before `identifier` runs: it must never need it.
    text = str(value)
    assert validation.identifier("paymentId", text) == text
    # Digit-heavy UUIDs too: the longest run of digits a canonical UUID can have is 12.
    dense = "-".join((digits * 12)[: len(group)] for group in text.split("-"))
    assert validation.identifier("paymentId", dense) == dense
    assert validation.payment_id("paymentId", dense) == dense


@pytest.mark.parametrize("value", [1, 12_345, 2_147_483_647])
def test_amount_accepts(value: int) -> None:
    assert validation.amount_cents("amountCents", value) == value


@pytest.mark.parametrize("value", [0, -1, 2_147_483_648, True, 1.5, "100", None])
def test_amount_refuses(value: int) -> None:
    with pytest.raises(InvalidInput):
        validation.amount_cents("amountCents", value)


def test_last_four_is_exactly_four_digits_and_never_echoed() -> None:
    assert validation.account_last_four("accountLastFour", "0123") == "0123"
    for bad in ["123", "12345", "12a4", "", "\uff11\uff12\uff13\uff14", "4111111111111111", None]:
        with pytest.raises(InvalidInput) as refused:
            validation.account_last_four("accountLastFour", bad)  # type: ignore[arg-type]
        if bad:
            assert bad not in str(refused.value)


def test_reason_is_required_and_bounded() -> None:
    assert validation.reason("reason", "customer asked") == "customer asked"
    assert validation.reason("reason", "x" * 500) == "x" * 500
    for bad in ["", "  ", "x" * 501, "bell\x07"]:
        with pytest.raises(InvalidInput):
            validation.reason("reason", bad)


def test_return_code_is_an_ach_code() -> None:
    assert validation.return_code("returnCode", "R01") == "R01"
    for bad in ["R1", "r01", "R001", "X01", ""]:
        with pytest.raises(InvalidInput):
            validation.return_code("returnCode", bad)


def test_idempotency_key_is_bounded_text() -> None:
    assert validation.idempotency_key("idempotencyKey", "k#1") == "k#1"
    for bad in ["", "k" * 256]:
        with pytest.raises(InvalidInput):
            validation.idempotency_key("idempotencyKey", bad)


def test_timestamps_are_rfc3339_utc_with_z_and_milliseconds() -> None:
    moment = datetime(2026, 3, 2, 15, 30, 0, 123456, tzinfo=UTC)
    assert validation.format_timestamp(moment) == "2026-03-02T15:30:00.123Z"
    eastern = moment.astimezone(timezone(timedelta(hours=-5)))
    assert validation.format_timestamp(eastern) == "2026-03-02T15:30:00.123Z"
    parsed = validation.parse_timestamp("createdAt", "2026-03-02T15:30:00.123Z")
    assert parsed == moment.replace(microsecond=123000)
    assert parsed.tzinfo is UTC


@given(
    st.datetimes(
        min_value=datetime(1000, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5)), timezone(timedelta(0))]),
    )
)
def test_a_timestamp_is_its_utc_moment_to_the_millisecond(moment: datetime) -> None:
    text = validation.format_timestamp(moment)
    utc = moment.astimezone(UTC)
    assert text == f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"
    # It reads back as the same moment, truncated to milliseconds; strings sort as moments do.
    assert validation.parse_timestamp("at", text) == utc.replace(
        microsecond=utc.microsecond // 1000 * 1000
    )


@given(
    st.datetimes(min_value=datetime(1001, 1, 1), max_value=datetime(9999, 12, 1)),
    st.timedeltas(min_value=timedelta(days=-10), max_value=timedelta(days=10)),
)
def test_a_stored_timestamp_is_written_back_as_its_text_and_its_arithmetic_as_itself(
    moment: datetime, later: timedelta
) -> None:
    """A timestamp read from its canonical text keeps it (no formatting to serve it again);
    what is made from it (arithmetic, `replace`) is formatted from its own value."""
    text = validation.format_timestamp(moment.replace(tzinfo=UTC))
    parsed = validation.parse_timestamp("at", text)
    assert isinstance(parsed, validation.Instant)
    assert validation.format_timestamp(parsed) == text
    for made in (parsed + later, parsed.replace(microsecond=0)):
        expected = made.replace(tzinfo=UTC) if made.tzinfo is None else made
        assert validation.format_timestamp(made) == (
            f"{expected:%Y-%m-%dT%H:%M:%S}.{expected.microsecond // 1000:03d}Z"
        )
    # Any other text of the moment is not kept.
    other = text.replace(".", ",", 1)
    assert validation.format_timestamp(validation.parse_timestamp("at", other)) == text


def test_naive_timestamps_are_refused() -> None:
    with pytest.raises(ValueError):
        validation.format_timestamp(datetime(2026, 3, 2))


@pytest.mark.parametrize(
    "value", ["2026-03-02T15:30:00+00:00", "2026-03-02 15:30", "yesterday", "2026-13-02T00:00:00Z"]
)
def test_parse_timestamp_refuses(value: str) -> None:
    with pytest.raises(InvalidInput):
        validation.parse_timestamp("createdAt", value)


@pytest.mark.parametrize(
    "value",
    [
        "4111111111111111",
        "card 4111 1111 1111 1111 declined",
        "5500-0055-5555-5559",
        "378282246310005",
        "6011000990139424",
    ],
)
def test_values_holding_a_card_number_are_refused_without_echo(value: str) -> None:
    for check in (validation.identifier, validation.reason, validation.idempotency_key):
        with pytest.raises(InvalidInput) as refused:
            check("field", value)
        assert value not in str(refused.value)
        assert "1111 1111" not in str(refused.value)


@pytest.mark.parametrize(
    "value",
    [
        "0190f5a4-0000-7000-8000-000000000000",
        "4111111111111112",  # fails the Luhn check
        "order-123456789012",  # 12 digits
        "inst-2026-03-15",
    ],
)
def test_digits_that_are_no_card_number_pass(value: str) -> None:
    assert validation.reason("field", value) == value


def test_no_uuid_looks_like_a_card_number() -> None:
    # Payment ids and many clients' idempotency keys are UUIDs: none may be refused.
    for _ in range(20_000):
        assert not validation.holds_card_number(str(uuid.uuid4()))
        assert not validation.holds_card_number(str(uuid7()))
    # One that the first, looser grouping took for a card (0866-4021-8318-279232: Luhn-valid).
    assert not validation.holds_card_number("7cfce38b-0866-4021-8318-279232d50bd1")


@given(
    text=st.one_of(
        st.datetimes(timezones=st.just(UTC)).map(validation.format_timestamp),
        st.datetimes(timezones=st.just(UTC)).map(lambda moment: moment.isoformat() + "Z"),
        st.from_regex(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z"),
        st.text(max_size=30),
    )
)
def test_a_timestamps_text_is_what_printing_the_instant_it_names_gives(text: str) -> None:
    """`timestamp_text` (what the compiled plan answers a stored timestamp with) is exactly what
    `DateTime` prints of the instant parsed, and refuses what parsing refuses, alike."""
    try:
        expected: str | type[Exception] = validation.format_timestamp(
            validation.parse_timestamp("at", text)
        )
    except (InvalidInput, ValueError) as refused:
        expected = type(refused)
    try:
        got: str | type[Exception] = validation.timestamp_text("at", text)
    except (InvalidInput, ValueError) as refused:
        got = type(refused)
    assert got == expected
