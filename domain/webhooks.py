"""Events out (SPEC §18): event types and ids, webhook endpoints, their signing, retries and the
addresses a delivery may reach.

An event is one stored payment event (§9); its type is `payment.created` for a creation and
`payment.<to status in lower case>` for a move. Its id (`evt_…`) encodes the event item's key, so
the same event has the same id on every attempt and a resend finds it. Endpoints are signed as
Standard Webhooks says: `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed
by the secret's bytes (`whsec_<base64>`); while a rotation's grace lasts, the old secret signs too.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import ipaddress
import json
import random
import secrets
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from urllib.parse import urlsplit

from domain.enums import PaymentStatus
from domain.errors import InvalidInput
from domain.hosts import Address, parsed_host
from domain.payment import PaymentRef
from domain.validation import format_timestamp, holds_card_number

__all__ = [
    "CREATED",
    "DEFAULT_RETRY_SCHEDULE",
    "ENDPOINT_DISABLED",
    "EVENT_TYPES",
    "MAX_WEBHOOK_ENDPOINTS",
    "OPERATIONAL_EVENT_TYPES",
    "AddressLookup",
    "EndpointStatus",
    "EventsPolicy",
    "RetrySchedule",
    "WebhookDelivery",
    "WebhookEndpoint",
    "beyond_retention",
    "checked_event_types",
    "checked_receiver",
    "checked_url",
    "endpoint_disabled_event",
    "event_id",
    "event_of_id",
    "event_type",
    "forbidden_address",
    "new_secret",
    "signature",
]

CREATED = "payment.created"
# Every type a payment's life can produce: its creation, and a move to each status but PENDING
# (a payment is created PENDING and never moves back to it).
EVENT_TYPES: tuple[str, ...] = (
    CREATED,
    *(f"payment.{status.value.lower()}" for status in PaymentStatus if status.value != "PENDING"),
)
# Events about the endpoints themselves, sent only to endpoints that list them (a consumer that
# asked for every type parses payment events).
ENDPOINT_DISABLED = "webhook_endpoint.disabled"
OPERATIONAL_EVENT_TYPES: tuple[str, ...] = (ENDPOINT_DISABLED,)
_TYPE_OF_STATUS = {status: f"payment.{status.value.lower()}" for status in PaymentStatus}

# Three days: Standard Webhooks' reference schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h) carried on
# with 14 h, 20 h and 20 h: the last attempt about 72 hours after the first.
DEFAULT_RETRY_SCHEDULE: tuple[float, ...] = (
    5,
    5 * 60,
    30 * 60,
    2 * 3600,
    5 * 3600,
    10 * 3600,
    14 * 3600,
    20 * 3600,
    20 * 3600,
)
SECRET_PREFIX = "whsec_"
_SECRET_BYTES = 32
MAX_URL_LENGTH = 2048
# The most endpoints the service holds, every client's together: a bound on what
# `webhookEndpoints` reads and answers, which its query cost counts.
MAX_WEBHOOK_ENDPOINTS = 10
_EVENT_ID_PREFIX = "evt_"
# The EC2 instance-metadata addresses (IPv4, and IPv6 on Nitro): never a receiver.
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
# IPv6 prefixes that carry an IPv4 address in their last 32 bits: NAT64's well-known prefix
# (RFC 6052) and the deprecated IPv4-compatible addresses. NAT64's local-use prefix (RFC 8215)
# is never a public receiver, whatever it carries.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_LOCAL_USE_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")

# Every address a host name resolves to (OSError: it does not resolve).
AddressLookup = Callable[[str, int], Awaitable[Sequence[Address]]]


class EndpointStatus(StrEnum):
    # Delivering; or FAILING: an event's last retry failed (new events are still tried, and the
    # first 2xx answer makes it ENABLED again); or DISABLED: no 2xx to any event for the whole
    # retry schedule, nothing is sent until it is enabled again.
    ENABLED = "ENABLED"
    FAILING = "FAILING"
    DISABLED = "DISABLED"


@dataclass(frozen=True, slots=True)
class EventsPolicy:
    """The settings the API's events fields follow: whether receivers must be public https
    addresses (the guard; then `lookup` resolves a receiver's name at registration, within
    `lookup_timeout` seconds), how long a rotated secret still signs, when an event is
    settled, and how far back the feed lists (`retention`)."""

    public_only: bool = False
    secret_grace: timedelta = timedelta(days=1)
    settle_seconds: float = 5.0
    lookup: AddressLookup | None = None
    lookup_timeout: float = 10.0
    retention: timedelta = timedelta(days=30)

    def __post_init__(self) -> None:
        if self.public_only and self.lookup is None:
            raise ValueError("the guard resolves names at registration: it needs a lookup")


@dataclass(frozen=True, slots=True)
class WebhookEndpoint:
    endpoint_id: str
    url: str
    event_types: tuple[str, ...] | None  # None: every type
    description: str | None
    status: EndpointStatus
    created_at: datetime
    secret_rotated_at: datetime | None = None
    disabled_at: datetime | None = None
    disabled_reason: str | None = None
    # The service client that registered it (`Caller.service_client`); None: stored before
    # endpoints had owners, no client's (only operators see it, until one gives it an owner).
    owner: str | None = None

    def wants(self, event_type: str) -> bool:
        if self.event_types is None:
            return event_type not in OPERATIONAL_EVENT_TYPES
        return event_type in self.event_types


@dataclass(frozen=True, slots=True)
class WebhookDelivery:
    """One attempt to deliver one event to one endpoint."""

    event_id: str
    event_type: str
    attempt: int  # 1 for the first, counting on through retries (a resend starts again at 1)
    at: datetime
    duration_ms: int
    status_code: int | None  # None: no answer (`error` says why)
    error: str | None
    response_body: str | None  # the answer's first few KB

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def event_type(from_status: PaymentStatus | None, to_status: PaymentStatus) -> str:
    return CREATED if from_status is None else _TYPE_OF_STATUS[to_status]


def checked_event_types(
    field: str, values: Iterable[str] | None, *, known: tuple[str, ...] = EVENT_TYPES
) -> tuple[str, ...] | None:
    """The types an endpoint or a feed asks for (None: every type), among `known` (the feed's
    payment types; an endpoint's add the operational ones); InvalidInput names an unknown one."""
    if values is None:
        return None
    chosen = tuple(dict.fromkeys(values))
    if not chosen:
        raise InvalidInput(field, "must name at least one event type, or be left out for all")
    for index, value in enumerate(chosen):
        if value not in known:
            # The value is not echoed: it may be anything, a card number included.
            raise InvalidInput(
                f"{field}[{index}]", f"is not an event type; they are {', '.join(known)}"
            )
    return chosen


def checked_url(url: str, *, public_only: bool) -> str:
    """A receiver's URL; `public_only`: https, and not an address `forbidden_address` refuses,
    however it is spelt (`domain.hosts`). A name is resolved by `checked_receiver`, and again at
    each delivery."""
    _checked_host(url, public_only=public_only)
    return url


async def checked_receiver(url: str, policy: EventsPolicy) -> str:
    """A receiver's URL at registration: `checked_url`, and under the guard its host name
    resolved within the policy's time, every address it resolves to public."""
    host, port = _checked_host(url, public_only=policy.public_only)
    if not policy.public_only or policy.lookup is None or not isinstance(host, str):
        return url
    try:
        async with asyncio.timeout(policy.lookup_timeout):
            addresses = await policy.lookup(host, port)
    except TimeoutError:
        raise InvalidInput(
            "url", f"its host did not resolve within {policy.lookup_timeout:g} s"
        ) from None
    except OSError:
        raise InvalidInput("url", "its host does not resolve") from None
    if not addresses:
        raise InvalidInput("url", "its host does not resolve")
    for address in addresses:
        reason = forbidden_address(address)
        if reason is not None:
            raise InvalidInput("url", f"must be a public address; its host resolves to {reason}")
    return url


def _checked_host(url: str, *, public_only: bool) -> tuple[str | Address, int]:
    """The URL's host as a browser reads it, and its port; InvalidInput on `url`."""
    if len(url) > MAX_URL_LENGTH:
        raise InvalidInput("url", f"must be at most {MAX_URL_LENGTH} characters")
    if any(character.isspace() or not character.isprintable() for character in url):
        raise InvalidInput("url", "must not contain spaces or control characters")
    if holds_card_number(url):
        raise InvalidInput("url", "must not hold a card or account number")
    try:
        parts = urlsplit(url)
        port = parts.port  # a port that is not a number raises here
    except ValueError:
        raise InvalidInput("url", "is not a URL") from None
    schemes = ("https",) if public_only else ("https", "http")
    if parts.scheme not in schemes:
        raise InvalidInput("url", f"must be an {' or '.join(schemes)} URL")
    if not parts.hostname:
        raise InvalidInput("url", "must name a host")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput("url", "must not carry credentials; the signature authenticates us")
    if parts.fragment:
        raise InvalidInput("url", "must not have a fragment")
    try:
        host = parsed_host(_host_as_written(parts.netloc))
    except ValueError:
        raise InvalidInput("url", "does not name a valid host") from None
    if public_only:
        if isinstance(host, str):
            name = host.rstrip(".")
            if name == "localhost" or name.endswith(".localhost"):
                raise InvalidInput("url", "must be a public address, not loopback")
        else:
            reason = forbidden_address(host)
            if reason is not None:
                raise InvalidInput("url", f"must be a public address, not {reason}")
    return host, port or (443 if parts.scheme == "https" else 80)


def _host_as_written(netloc: str) -> str:
    """The host of a split URL's netloc, as written (urlsplit's `hostname` lowercases it and
    drops an IPv6 address's brackets)."""
    host = netloc.rpartition("@")[2]
    if host.startswith("["):
        return host[: host.index("]") + 1] if "]" in host else host
    return host.partition(":")[0]


def forbidden_address(address: Address) -> str | None:
    """Why a delivery may not connect to `address` under the guard (None: it may), by its kind:
    loopback, private, link-local, the instance metadata, or anything else not globally routable;
    an IPv6 address carrying an IPv4 one (mapped, compatible, 6to4, NAT64) is judged by the IPv4.
    Never the address: this is an attempt's error and an endpoint's disabled reason, which whoever
    registered the endpoint reads, and what an internal name resolves to is not theirs to learn."""
    reason = _forbidden_kind(address)
    if reason is None or not isinstance(address, ipaddress.IPv6Address):
        return reason
    return reason if _embedded_ipv4(address) is None else f"{reason}, carried in an IPv6 one"


def _forbidden_kind(address: Address) -> str | None:
    if isinstance(address, ipaddress.IPv6Address):
        if address in _LOCAL_USE_NAT64:
            return "a local-use NAT64 address"
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            address = embedded
    if address in _METADATA:
        return "the instance metadata address"
    for reason, held in (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("private", address.is_private),
        ("unspecified", address.is_unspecified),
        ("multicast", address.is_multicast),
        ("not globally routable", not address.is_global),
    ):
        if held:
            return f"a {reason} address"
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one reaches through a translator or a tunnel: a connection to
    `64:ff9b::a00:1` through a NAT64 gateway (AWS's among them) reaches 10.0.0.1."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    # `::` and `::1` are IPv6's own unspecified and loopback, not IPv4-compatible addresses.
    if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(_SECRET_BYTES)).decode("ascii")


def signature(secrets_in_use: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header: one `v1,<signature>` per secret, space-separated."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return " ".join(
        "v1,"
        + base64.b64encode(hmac.new(_secret_key(secret), signed, hashlib.sha256).digest()).decode(
            "ascii"
        )
        for secret in secrets_in_use
    )


def _secret_key(secret: str) -> bytes:
    try:
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error:
        raise ValueError("a webhook secret is whsec_ and base64") from None


def event_id(ref: PaymentRef, version: int) -> str:
    """The event's id: its item's key, so it is the same on every attempt and finds the event."""
    payload = json.dumps([ref.user_id, ref.loan_id, ref.payment_id, version], separators=(",", ":"))
    return _EVENT_ID_PREFIX + base64.urlsafe_b64encode(payload.encode()).rstrip(b"=").decode()


def beyond_retention(field: str, retention: timedelta, horizon: datetime) -> InvalidInput:
    """The refusal of a feed position older than the feed lists."""
    return InvalidInput(
        field,
        f"is older than the events feed's retention of {retention.days} days: events before "
        f"{format_timestamp(horizon)} are no longer listed; start from a later time",
    )


def endpoint_disabled_event(
    endpoint: WebhookEndpoint, *, at: datetime, reason: str
) -> tuple[str, dict[str, object]]:
    """The operational event telling of `endpoint`'s disabling: its id and its body."""
    identifier = f"{_EVENT_ID_PREFIX}op_{endpoint.endpoint_id}_{int(at.timestamp() * 1000)}"
    return identifier, {
        "id": identifier,
        "type": ENDPOINT_DISABLED,
        "createdAt": format_timestamp(at),
        "data": {
            "endpointId": endpoint.endpoint_id,
            "url": endpoint.url,
            "description": endpoint.description,
            "disabledAt": format_timestamp(at),
            "reason": reason,
        },
    }


def event_of_id(field: str, value: str) -> tuple[PaymentRef, int]:
    """The payment and version an event id names; InvalidInput on `field` if it is not one."""
    refused = InvalidInput(field, "is not an event id")
    if not value.startswith(_EVENT_ID_PREFIX) or len(value) > 1024:
        raise refused
    encoded = value.removeprefix(_EVENT_ID_PREFIX)
    try:
        decoded = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
        user_id, loan_id, payment_id, version = decoded
        ref = PaymentRef.checked(user_id, loan_id, payment_id)
    except (ValueError, TypeError, InvalidInput):
        raise refused from None
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise refused
    return ref, version


@dataclass(frozen=True, slots=True)
class RetrySchedule:
    """The waits between attempts: after attempt n fails, attempt n+1 follows `delays[n-1]`
    seconds later, give or take a fifth (jitter, so that a receiver back from an outage is not
    met by every retry at once); after the last, the event is given up."""

    delays: tuple[float, ...] = DEFAULT_RETRY_SCHEDULE

    @property
    def length(self) -> timedelta:
        """From an event's first attempt to its last: an endpoint that answers no 2xx to any
        event for this long is disabled."""
        return timedelta(seconds=sum(self.delays))

    def delay_after(self, attempt: int, rng: random.Random | None = None) -> float | None:
        if attempt > len(self.delays):
            return None
        base = self.delays[attempt - 1]
        return base * (rng or random).uniform(0.8, 1.2)  # jitter, not a secret
