"""Events out: signatures the Standard Webhooks library accepts, the receivers a URL may name,
event types and ids, the retry schedule."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import random
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from domain.enums import PaymentStatus
from domain.errors import InvalidInput
from domain.hosts import parsed_host
from domain.payment import PaymentRef
from domain.webhooks import (
    EVENT_TYPES,
    EventsPolicy,
    RetrySchedule,
    checked_event_types,
    checked_receiver,
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


def fullwidth(text: str) -> str:
    """`text` in fullwidth forms (U+FF01 on), which IDNA maps back to ASCII."""
    return "".join(chr(ord(character) + 0xFEE0) for character in text)


# The URL Standard's own examples of host parsing (https://url.spec.whatwg.org/#host-parsing), then
# the spellings of loopback the review registered in prod.
@pytest.mark.parametrize(
    ("host", "read_as"),
    [
        ("EXAMPLE.COM", "example.com"),
        ("example%2Ecom", "example.com"),
        ("faß.example", "xn--fa-hia.example"),
        ("0", ipaddress.IPv4Address("0.0.0.0")),
        ("%30", ipaddress.IPv4Address("0.0.0.0")),
        ("0x", ipaddress.IPv4Address("0.0.0.0")),
        ("0xffffffff", ipaddress.IPv4Address("255.255.255.255")),
        ("[0:0::1]", ipaddress.IPv6Address("::1")),
        ("2130706433", ipaddress.IPv4Address("127.0.0.1")),
        ("0x7f000001", ipaddress.IPv4Address("127.0.0.1")),
        ("0X7F000001", ipaddress.IPv4Address("127.0.0.1")),
        ("017700000001", ipaddress.IPv4Address("127.0.0.1")),
        ("127.1", ipaddress.IPv4Address("127.0.0.1")),
        ("127.0.1", ipaddress.IPv4Address("127.0.0.1")),
        ("0x7f.0.0.1", ipaddress.IPv4Address("127.0.0.1")),
        ("0177.0.0.01", ipaddress.IPv4Address("127.0.0.1")),
        ("127.0.0.1.", ipaddress.IPv4Address("127.0.0.1")),
        (fullwidth("127.0.0.1"), ipaddress.IPv4Address("127.0.0.1")),  # as yarl sends it
        (fullwidth("LOCALHOST"), "localhost"),
        ("Hooks.Example.COM.", "hooks.example.com."),
        ("my_hooks.example.com", "my_hooks.example.com"),
    ],
)
def test_a_host_is_read_as_a_browsers_url_parser_reads_it(
    host: str, read_as: str | ipaddress.IPv4Address | ipaddress.IPv6Address
) -> None:
    assert parsed_host(host) == read_as


@pytest.mark.parametrize(
    "host",
    [
        "[0:0::1%5D",
        "[0:0::%31]",
        "09",
        "example.255",
        "example^example",
        "1.2.3.4.5",
        "256.256.256.256",
        "4294967296",
        "0x100000000",
        "1.2.3.08",
        "[fe80::1%25eth0]",
        "",
    ],
)
def test_a_host_a_browser_refuses_is_refused(host: str) -> None:
    with pytest.raises(ValueError):  # any refusal; the callers word it
        parsed_host(host)


@pytest.mark.parametrize(
    "url",
    [
        "https://2130706433/hook",
        "https://0x7f000001/hook",
        "https://017700000001/hook",
        "https://127.1/hook",
        "https://127.0.0.1./hook",
        "https://0x7f.1:8443/hook",
        "https://%31%32%37.0.0.1/hook",
        f"https://{fullwidth('127.0.0.1')}/hook",
        f"https://{fullwidth('LOCALHOST')}/hook",
        "https://localhost./hook",
        "https://hooks.localhost./hook",
        "https://0xa9.0xfe.0xa9.0xfe/latest/meta-data",
        "https://167772161/hook",  # 10.0.0.1
        "https://[64:ff9b::7f00:1]/hook",
        "https://example.255/hook",
    ],
)
def test_prod_refuses_every_spelling_of_an_internal_address(url: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        checked_url(url, public_only=True)
    assert refused.value.field == "url"


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("64:ff9b::a00:7", "private"),  # NAT64 of 10.0.0.7
        ("64:ff9b::a9fe:a9fe", "metadata"),  # NAT64 of 169.254.169.254
        ("64:ff9b:1::a00:7", "NAT64"),  # the local-use NAT64 prefix: never public
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("2002:c0a8:114::1", "private"),  # 6to4 of 192.168.1.20
        ("::7f00:1", "loopback"),  # IPv4-compatible 127.0.0.1
        ("::a00:7", "private"),  # IPv4-compatible 10.0.0.7
        ("::ffff:7f00:1", "loopback"),  # IPv4-mapped 127.0.0.1
        ("::ffff:a9fe:a9fe", "metadata"),
    ],
)
def test_an_ipv6_address_embedding_an_internal_ipv4_is_judged_as_its_ipv4(
    address: str, reason: str
) -> None:
    assert reason in (forbidden_address(ipaddress.ip_address(address)) or "")


def test_an_ipv6_address_embedding_a_public_ipv4_passes() -> None:
    for address in ("64:ff9b::5db8:d70e", "2002:5db8:d70e::1", "::ffff:5db8:d70e"):
        assert forbidden_address(ipaddress.ip_address(address)) is None, address


class StubLookup:
    """A DNS for the registration's check: each name's addresses; a name it does not hold
    does not resolve; `hang` never answers."""

    def __init__(self, names: dict[str, list[str]], *, hang: bool = False) -> None:
        self.names = names
        self.hang = hang
        self.asked: list[str] = []

    async def __call__(
        self, host: str, port: int
    ) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
        self.asked.append(host)
        if self.hang:
            await asyncio.Event().wait()
        if host not in self.names:
            raise OSError(-2, "Name or service not known")
        return [ipaddress.ip_address(address) for address in self.names[host]]


async def _registered(url: str, lookup: StubLookup, *, seconds: float = 2.0) -> str:
    policy = EventsPolicy(public_only=True, lookup=lookup, lookup_timeout=seconds)
    return await checked_receiver(url, policy)


async def test_a_name_is_resolved_at_registration_and_every_address_must_be_public() -> None:
    lookup = StubLookup(
        {
            "ledger.example.com": ["93.184.215.14", "2606:4700::1111"],
            "internal.example.com": ["10.0.0.5"],
            "mixed.example.com": ["93.184.215.14", "127.0.0.1"],
            "nat64.example.com": ["64:ff9b::a9fe:a9fe"],
        }
    )
    url = "https://Ledger.Example.COM/hooks"
    assert await _registered(url, lookup) == url
    assert lookup.asked == ["ledger.example.com"]
    for host, reason in (
        ("internal.example.com", "private"),
        ("mixed.example.com", "loopback"),
        ("nat64.example.com", "metadata"),
    ):
        with pytest.raises(InvalidInput) as refused:
            await _registered(f"https://{host}/hooks", lookup)
        assert refused.value.field == "url"
        assert reason in refused.value.message, refused.value.message
        # What an internal name resolves to is not told to the caller.
        assert "10.0.0.5" not in refused.value.message
        assert "169.254" not in refused.value.message


async def test_a_name_that_does_not_resolve_or_not_in_time_is_invalid_input() -> None:
    with pytest.raises(InvalidInput) as unknown:
        await _registered("https://nowhere.example.com/hooks", StubLookup({}))
    assert unknown.value.field == "url"
    assert "resolve" in unknown.value.message

    started = time.perf_counter()
    with pytest.raises(InvalidInput) as slow:
        await _registered("https://slow.example.com/hooks", StubLookup({}, hang=True), seconds=0.2)
    assert slow.value.field == "url"
    assert time.perf_counter() - started < 2


async def test_outside_the_guard_and_for_an_address_nothing_is_resolved() -> None:
    lookup = StubLookup({}, hang=True)
    local = EventsPolicy(public_only=False)
    assert await checked_receiver("http://127.0.0.1:8123/hook", local)
    assert await checked_receiver("http://receiver.test/hook", local)
    assert await _registered("https://93.184.215.14/hook", lookup)
    assert lookup.asked == []


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
