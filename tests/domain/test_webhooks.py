"""Events out: signatures the Standard Webhooks library accepts, the receivers a URL may name,
event types and ids, the retry schedule."""

from __future__ import annotations

import ipaddress
import json
import random
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from domain.enums import PaymentStatus
from domain.errors import InvalidInput
from domain.payment import PaymentRef
from domain.webhooks import (
    EVENT_TYPES,
    RetrySchedule,
    checked_event_types,
    checked_url,
    event_id,
    event_of_id,
    event_type,
    forbidden_address,
    new_secret,
    signature,
)


def _headers(msg_id: str, timestamp: int, signed: str) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp), "webhook-signature": signed}


def test_a_signature_verifies_with_the_standard_webhooks_library() -> None:
    secret = new_secret()
    body = json.dumps({"id": "evt_1", "type": "payment.created"}).encode()
    now = int(datetime.now(UTC).timestamp())
    signed = signature([secret], "evt_1", now, body)

    assert Webhook(secret).verify(body, _headers("evt_1", now, signed)) == json.loads(body)
    # The library's own signature of the same message is ours.
    assert signed == Webhook(secret).sign("evt_1", datetime.fromtimestamp(now, UTC), body.decode())


def test_a_changed_body_or_another_secret_fails_verification() -> None:
    secret = new_secret()
    now = int(datetime.now(UTC).timestamp())
    signed = signature([secret], "evt_1", now, b'{"a":1}')
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(b'{"a":2}', _headers("evt_1", now, signed))
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(b'{"a":1}', _headers("evt_1", now, signed))


def test_during_a_rotation_both_secrets_verify() -> None:
    old, new = new_secret(), new_secret()
    now = int(datetime.now(UTC).timestamp())
    signed = signature([new, old], "evt_1", now, b"{}")
    assert len(signed.split(" ")) == 2
    for secret in (old, new):
        Webhook(secret).verify(b"{}", _headers("evt_1", now, signed))


def test_event_types_name_the_creation_and_each_status_moved_to() -> None:
    assert event_type(None, PaymentStatus.PENDING) == "payment.created"
    assert event_type(PaymentStatus.PENDING, PaymentStatus.ACHSENT) == "payment.achsent"
    assert event_type(PaymentStatus.COMPLETED, PaymentStatus.CHARGED_BACK) == (
        "payment.charged_back"
    )
    assert "payment.pending" not in EVENT_TYPES
    assert len(EVENT_TYPES) == 8


def test_an_unknown_event_type_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidInput) as refused:
        checked_event_types("eventTypes", ["payment.completed", "payment.done"])
    assert refused.value.field == "eventTypes[1]"
    assert "payment.done" not in refused.value.message, "input is never echoed"
    with pytest.raises(InvalidInput):
        checked_event_types("eventTypes", [])
    assert checked_event_types("types", None) is None
    assert checked_event_types("types", ["payment.retry", "payment.retry"]) == ("payment.retry",)


def test_an_event_id_names_its_payment_and_version_and_nothing_else_is_one() -> None:
    ref = PaymentRef("alice", "loan-1", "0190a1b2-0000-7000-8000-000000000001")
    assert event_of_id("eventId", event_id(ref, 3)) == (ref, 3)
    for junk in ("", "evt_", "evt_!!", "payment", event_id(ref, 3) + "x", "evt_WzEsMiwzLDRd"):
        with pytest.raises(InvalidInput):
            event_of_id("eventId", junk)


@pytest.mark.parametrize(
    "url",
    [
        "http://receiver.example.com/hook",
        "https://127.0.0.1/hook",
        "https://localhost/hook",
        "https://10.0.0.8/hook",
        "https://192.168.1.20/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/hook",
        "https://[::ffff:10.0.0.1]/hook",
        "https://[fd00:ec2::254]/hook",
        "https://0.0.0.0/hook",
        "https://user:pass@receiver.example.com/hook",
        "ftp://receiver.example.com/hook",
        "https://receiver.example.com:notaport/hook",
        "not a url",
    ],
)
def test_prod_refuses_receivers_that_are_not_public_https(url: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        checked_url(url, public_only=True)
    assert refused.value.field == "url"


def test_outside_prod_loopback_and_http_receivers_serve_development() -> None:
    assert checked_url("http://127.0.0.1:8123/hook", public_only=False)
    assert checked_url("https://receiver.example.com/hook", public_only=True)
    with pytest.raises(InvalidInput):
        checked_url("ftp://127.0.0.1/hook", public_only=False)


def test_forbidden_addresses_say_why_and_public_ones_pass() -> None:
    assert "metadata" in (forbidden_address(ipaddress.ip_address("169.254.169.254")) or "")
    assert "loopback" in (forbidden_address(ipaddress.ip_address("127.0.0.2")) or "")
    assert "private" in (forbidden_address(ipaddress.ip_address("172.16.5.4")) or "")
    assert "link-local" in (forbidden_address(ipaddress.ip_address("fe80::1")) or "")
    assert forbidden_address(ipaddress.ip_address("100.64.0.1")) is not None  # carrier NAT
    assert forbidden_address(ipaddress.ip_address("93.184.215.14")) is None
    assert forbidden_address(ipaddress.ip_address("2606:4700::1111")) is None


def test_the_default_schedule_retries_for_about_three_days_with_jitter() -> None:
    schedule = RetrySchedule()
    total = sum(schedule.delays)
    assert 70 * 3600 <= total <= 74 * 3600
    rng = random.Random(7)
    waits = [schedule.delay_after(1, rng) for _ in range(50)]
    assert all(w is not None and 4.0 <= w <= 6.0 for w in waits)
    assert len(set(waits)) > 40, "every retry is jittered"
    assert schedule.delay_after(len(schedule.delays) + 1) is None
    assert RetrySchedule((1.0, 2.0)).delay_after(2, rng) is not None
    assert RetrySchedule((1.0, 2.0)).delay_after(3, rng) is None
