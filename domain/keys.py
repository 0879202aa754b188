"""The key schema of the one table, the only place that builds a key string (docs/data-model.md).

    item          PK / GSInPK          SK / GSInSK
    payment       USER#<u>             LOAN#<l>#PAYMENT#<p>
      GSI1        USER#<u>             LOAN#<l>#STATUS#<s>#PAYMENT#<p>
      GSI2        PAYMENT[#<k>]        STATUS#<s>#PAYMENT#<p>         k: a shard of p's hash
      GSI3        USER#<u>             CONFIRMATION#<c>               once c exists
    event         USER#<u>             HISTORY#LOAN#<l>#PAYMENT#<p>#V#<version, 6 digits>
      GSI4        EVENTS[#<k>]         <time>#USER#<u>#<the event's SK>
    idempotency   USER#<u>             IDEMPOTENCY#<CUSTOMER|SERVICE>#<sha256 of the key>
    claim         USER#<u>             CONFIRMATION#<c>
    endpoint      WEBHOOKS             ENDPOINT#<e>
    attempt, due  WEBHOOK#<e>          DELIVERY#<time>#<event id>, RETRY#<due time>#<event id>
    layout        LAYOUT               LAYOUT
Every prefix ends in `#` (ids hold none); a begins_with is asked as `BETWEEN p AND prefix_end(p)`.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from domain.enums import PaymentStatus

__all__ = [
    "DEFAULT_FEED_SHARDS",
    "DEFAULT_GSI2_SHARDS",
    "DELIVERY_PREFIX",
    "ENDPOINT_PREFIX",
    "FEED_PARTITION",
    "FEED_START",
    "GSI2_PARTITION",
    "LAYOUT_PARTITION",
    "LAYOUT_SORT_KEY",
    "MAX_FEED_SHARDS",
    "MAX_GSI2_SHARDS",
    "RETRY_PREFIX",
    "SEED_FEED",
    "SEED_LAYOUT",
    "WEBHOOKS_PARTITION",
    "FeedLayout",
    "StatusLayout",
    "confirmation_sort_key",
    "delivery_sort_key",
    "endpoint_sort_key",
    "feed_bound",
    "feed_bound_time",
    "feed_partition",
    "feed_sort_key",
    "history_prefix",
    "history_sort_key",
    "idempotency_sort_key",
    "loan_payments_prefix",
    "loan_status_prefix",
    "loan_status_sort_key",
    "payment_sort_key",
    "prefix_end",
    "retry_sort_key",
    "status_partition",
    "status_partitions",
    "status_prefix",
    "status_shard",
    "status_sort_key",
    "user_partition",
    "user_payments_prefix",
    "user_scoped_idempotency_sort_key",
    "webhook_partition",
]

GSI2_PARTITION = "PAYMENT"
# Far more than one lender needs (256 partitions take ~64,000 status changes a second); a bound
# keeps a typo from making every list a thousand queries.
MAX_GSI2_SHARDS = 256
MAX_FEED_SHARDS = 256
# The defaults (SPEC §20): each index's busiest shard allows at least 10,000 payment writes a
# second (docs/scale-and-cost.md has the arithmetic).
DEFAULT_GSI2_SHARDS = 64
DEFAULT_FEED_SHARDS = 32


def status_shard(payment_id: str, shards: int) -> int:
    """The shard of a payment among `shards`, on GSI2 and on the feed alike: stable (a hash of
    the id, not its time-ordered UUIDv7 prefix) and uniform."""
    digest = hashlib.blake2b(payment_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def status_partition(payment_id: str, shards: int) -> str:
    """A payment's GSI2PK: the seed's `PAYMENT` with one shard, `PAYMENT#<k>` with more."""
    if shards == 1:
        return GSI2_PARTITION
    return f"{GSI2_PARTITION}#{status_shard(payment_id, shards)}"


def status_partitions(shards: int) -> list[str]:
    """Every GSI2PK of a layout of `shards` shards."""
    if shards == 1:
        return [GSI2_PARTITION]
    return [f"{GSI2_PARTITION}#{k}" for k in range(shards)]


@dataclass(frozen=True, slots=True)
class StatusLayout:
    """How payments spread over GSI2: `shards` for writes; `also_read`, the layouts a reshard
    is moving payments from, read as well until it finishes."""

    shards: int = 1
    also_read: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for count in (self.shards, *self.also_read):
            if not 1 <= count <= MAX_GSI2_SHARDS:
                raise ValueError(f"a GSI2 layout has 1 to {MAX_GSI2_SHARDS} shards, not {count}")

    def partition(self, payment_id: str) -> str:
        return status_partition(payment_id, self.shards)

    def read_partitions(self) -> list[str]:
        """Every partition a payment can be in now: each is read once, whichever layouts name
        it (`PAYMENT#3` is in a layout of 4 and one of 16)."""
        names = [status_partitions(count) for count in (self.shards, *self.also_read)]
        return list(dict.fromkeys(name for layout in names for name in layout))

    def source_partitions(self) -> list[str]:
        """The partitions a reshard to `shards` reads: the old layouts' (`also_read`)."""
        names = [status_partitions(count) for count in self.also_read]
        return list(dict.fromkeys(name for layout in names for name in layout))

    @property
    def group_modulus(self) -> int:
        """The most groups its payments split into that no reshard between its layouts mixes:
        the greatest common divisor of their shard counts (1 with the seed's layout among them).
        A payment's group is its shard among that many (`status_shard`); a partition of a
        layout of N shards holds the hashes h with h % N == k, so one group's partitions hold
        no other group's payments when the modulus divides N."""
        return math.gcd(self.shards, *self.also_read)

    def group_partitions(self, modulus: int, group: int) -> tuple[list[str], list[str]]:
        """The partitions that can hold the payments whose shard among `modulus` is `group`:
        the written layout's, and those of the layouts a reshard is moving payments from. Where
        `modulus` does not divide a layout's shard count (the layouts changed since it was
        read), those partitions hold other groups' payments too."""

        def of(count: int) -> list[str]:
            common = math.gcd(count, modulus)
            return [
                name
                for k, name in enumerate(status_partitions(count))
                if k % common == group % common
            ]

        moving = [name for count in self.also_read for name in of(count)]
        return of(self.shards), list(dict.fromkeys(moving))


# One shard, `GSI2PK = PAYMENT`, as the seed has it: the default.
SEED_LAYOUT = StatusLayout()


def user_partition(user_id: str) -> str:
    return f"USER#{user_id}"


def payment_sort_key(loan_id: str, payment_id: str) -> str:
    return f"LOAN#{loan_id}#PAYMENT#{payment_id}"


def user_payments_prefix() -> str:
    """Every payment of a user (within the user's partition): no other item's key begins so."""
    return "LOAN#"


def loan_payments_prefix(loan_id: str) -> str:
    return f"LOAN#{loan_id}#PAYMENT#"


def prefix_end(prefix: str) -> str:
    """The upper bound of `prefix`'s keys as a `BETWEEN` range: the prefix with its closing `#`
    raised to `$`, the next character.

    The range holds every key that begins with the prefix, and one string more, the bound itself
    (`LOAN#l#PAYMENT$`), which no key is: every key goes on past its prefix's `#`. DynamoDB
    reads the same items either way; DynamoDB Local reads a `begins_with` by going through the
    whole partition, so that a page's time grows with the partition (the GSI2 one holds every
    payment), and a range through its index (README, Performance: the scale table)."""
    if not prefix.endswith("#"):
        raise ValueError(f"a key prefix ends in '#': {prefix!r}")
    return prefix[:-1] + "$"


def loan_status_sort_key(loan_id: str, status: PaymentStatus, payment_id: str) -> str:
    return f"LOAN#{loan_id}#STATUS#{status.value}#PAYMENT#{payment_id}"


def loan_status_prefix(loan_id: str, status: PaymentStatus) -> str:
    return f"LOAN#{loan_id}#STATUS#{status.value}#"


def status_sort_key(status: PaymentStatus, payment_id: str) -> str:
    return f"STATUS#{status.value}#PAYMENT#{payment_id}"


def status_prefix(status: PaymentStatus) -> str:
    return f"STATUS#{status.value}#"


def confirmation_sort_key(confirmation_id: str) -> str:
    """GSI3's sort key of a payment, and the table's sort key of the id's claim."""
    return f"CONFIRMATION#{confirmation_id}"


def idempotency_sort_key(caller_kind: str, idempotency_key: str) -> str:
    """A key's record among the keys of one kind of caller (`domain.idempotency.CallerKind`)."""
    return f"IDEMPOTENCY#{caller_kind}#{_key_digest(idempotency_key)}"


def user_scoped_idempotency_sort_key(idempotency_key: str) -> str:
    """A key's record as written before keys were scoped by the caller's kind (issue 55): read
    only, while such a record can be live (24 hours)."""
    return f"IDEMPOTENCY#{_key_digest(idempotency_key)}"


def _key_digest(idempotency_key: str) -> str:
    # Hashed: a caller's key may hold any character and be 255 long; the digest is neither (and
    # holds no `#`, so no kind-scoped key is ever a user-scoped one).
    return hashlib.sha256(idempotency_key.encode()).hexdigest()


def history_prefix(loan_id: str, payment_id: str) -> str:
    """The sort-key prefix of one payment's events."""
    return f"HISTORY#LOAN#{loan_id}#PAYMENT#{payment_id}#V#"


def history_sort_key(loan_id: str, payment_id: str, version: int) -> str:
    return f"{history_prefix(loan_id, payment_id)}{version:06d}"


FEED_PARTITION = "EVENTS"
# Below every feed position (they start with the year's digits): where the feed begins.
FEED_START = "0"


def feed_partition(payment_id: str, shards: int) -> str:
    """An event's GSI4PK: `EVENTS` with one shard, `EVENTS#<k>` with more (k as on GSI2)."""
    if shards == 1:
        return FEED_PARTITION
    return f"{FEED_PARTITION}#{status_shard(payment_id, shards)}"


def feed_partitions(shards: int) -> list[str]:
    """Every GSI4PK of a feed layout of `shards` shards."""
    if shards == 1:
        return [FEED_PARTITION]
    return [f"{FEED_PARTITION}#{k}" for k in range(shards)]


@dataclass(frozen=True, slots=True)
class FeedRange:
    """Feed positions from `lower` to `upper` (both included), all in one layout."""

    lower: str
    upper: str
    shards: int

    def partitions(self) -> list[str]:
        return feed_partitions(self.shards)


@dataclass(frozen=True, slots=True)
class FeedLayout:
    """How events spread over GSI4, by feed position: `changes` are (from position, shards),
    the first from `FEED_START`, the others from a `feed_bound`, ascending. Event items are
    immutable, so a layout applies from a position on, and each range is read in the layout it
    was written in."""

    changes: tuple[tuple[str, int], ...] = ((FEED_START, 1),)

    def __post_init__(self) -> None:
        if not self.changes or self.changes[0][0] != FEED_START:
            raise ValueError(f"a feed layout starts at {FEED_START!r}: {self.changes}")
        positions = [position for position, _ in self.changes]
        if positions != sorted(set(positions)):
            raise ValueError(f"a feed layout's positions ascend: {self.changes}")
        for _, count in self.changes:
            if not 1 <= count <= MAX_FEED_SHARDS:
                raise ValueError(f"a feed layout has 1 to {MAX_FEED_SHARDS} shards, not {count}")

    @classmethod
    def of(cls, shards: int) -> FeedLayout:
        return cls(((FEED_START, shards),))

    def shards_at(self, position: str) -> int:
        """The number of shards the event at `position` is written in."""
        shards = self.changes[0][1]
        for start, count in self.changes:
            if position < start:
                break
            shards = count
        return shards

    def partition(self, payment_id: str, position: str) -> str:
        return feed_partition(payment_id, self.shards_at(position))

    def ranges(self, lower: str, upper: str) -> list[FeedRange]:
        """The positions from `lower` to `upper`, cut where the layout changes, in order. A
        change's position is a `feed_bound`, which no event holds, so the range before it may
        end at it and the one after start at it."""
        found = []
        for n, (start, count) in enumerate(self.changes):
            end = self.changes[n + 1][0] if n + 1 < len(self.changes) else upper
            low, high = max(lower, start), min(upper, end)
            if low <= high:
                found.append(FeedRange(low, high, count))
        return found

    def then(self, position: str, shards: int) -> FeedLayout:
        """This layout, then `shards` from `position` (a `feed_bound`, past every change) on."""
        if not position.endswith("$") or position <= self.changes[-1][0]:
            raise ValueError(f"a new feed layout starts after {self.changes[-1][0]!r}")
        return FeedLayout((*self.changes, (position, shards)))

    @property
    def latest(self) -> int:
        return self.changes[-1][1]


# One shard, `GSI4PK = EVENTS`, from the feed's start: the feed as it was first written.
SEED_FEED = FeedLayout()


def feed_sort_key(at: str, loan_id: str, payment_id: str, version: int, *, user_id: str) -> str:
    """An event's place in the feed: its time (RFC 3339 with milliseconds, which sorts as text),
    then its item's key, so that events of one millisecond keep one order."""
    return f"{at}#{user_partition(user_id)}#{history_sort_key(loan_id, payment_id, version)}"


def feed_bound(at: str) -> str:
    """The feed sort key just after every event of the millisecond `at` (`$` follows `#`)."""
    return f"{at}$"


def feed_bound_time(bound: str) -> str:
    """The millisecond that `bound` (a `feed_bound`) follows, as a person reads it."""
    return bound.removesuffix("$")


# The record of which layouts hold data (`datasource.layouts`): its own partition.
LAYOUT_PARTITION = "LAYOUT"
LAYOUT_SORT_KEY = "LAYOUT"


WEBHOOKS_PARTITION = "WEBHOOKS"
ENDPOINT_PREFIX = "ENDPOINT#"
DELIVERY_PREFIX = "DELIVERY#"
RETRY_PREFIX = "RETRY#"


def endpoint_sort_key(endpoint_id: str) -> str:
    return f"{ENDPOINT_PREFIX}{endpoint_id}"


def webhook_partition(endpoint_id: str) -> str:
    """Where an endpoint's delivery attempts and due retries are kept."""
    return f"WEBHOOK#{endpoint_id}"


def delivery_sort_key(at: str, event_id: str) -> str:
    return f"{DELIVERY_PREFIX}{at}#{event_id}"


def retry_sort_key(due: str, event_id: str) -> str:
    return f"{RETRY_PREFIX}{due}#{event_id}"
