"""Where the collection job stands in each group of GSI2's RETRY payments (a payment's group: its
shard among the layouts' `group_modulus`, `datasource.status_groups`).

A group stands at its start, at a position (every payment of the group at or before it in the
list's order has been decided), or done. When the modulus changes between pages (a reshard
starting or ending), the groups are regrouped: each new group starts from the least advanced
of the old groups it shares payments with, and the old standing is kept as a filter: a payment
it says was decided is passed over. So a payment is neither decided twice nor skipped. A filter
is dropped once the groups stand past everything it says.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

from datasource import StatusPosition
from domain.keys import status_shard

__all__ = ["DONE", "START", "GroupProgress", "Stand", "Standing"]

START: Final = "start"
DONE: Final = "done"
Stand = StatusPosition | Literal["start", "done"]


def _further(a: Stand, b: Stand) -> bool:
    """Whether a group standing at `a` is further on than one at `b`."""
    if a in (b, START) or b == DONE:
        return False
    if a == DONE or b == START:
        return True
    assert isinstance(a, StatusPosition) and isinstance(b, StatusPosition)
    return a < b  # the list is read from the greatest position down


def _least(stands: Iterable[Stand]) -> Stand:
    least: Stand = DONE
    for stand in stands:
        if _further(least, stand):
            least = stand
    return least


@dataclass(frozen=True, slots=True)
class Standing:
    """Each group's stand, the groups being the shards among `modulus`."""

    modulus: int
    stands: tuple[Stand, ...]

    def __post_init__(self) -> None:
        if self.modulus < 1 or len(self.stands) != self.modulus:
            raise ValueError(f"{len(self.stands)} groups' stands for a modulus of {self.modulus}")

    def decided(self, position: StatusPosition, payment_id: str) -> bool:
        stand = self.stands[status_shard(payment_id, self.modulus)]
        return stand == DONE or (isinstance(stand, StatusPosition) and stand.covers(position))

    def shared(self, other: Standing) -> Iterable[tuple[Stand, Stand]]:
        """The stands of each pair of groups, this one's and `other`'s, that share payments
        (their numbers agree modulo the two moduli's greatest common divisor)."""
        common = math.gcd(self.modulus, other.modulus)
        for group, stand in enumerate(self.stands):
            for theirs in other.stands[group % common :: common]:
                yield stand, theirs

    def to_json(self) -> dict[str, Any]:
        return {
            "modulus": self.modulus,
            "stands": [s.as_dict() if isinstance(s, StatusPosition) else s for s in self.stands],
        }

    @classmethod
    def from_json(cls, data: Any) -> Standing:
        """The standing `to_json` wrote; ValueError if it is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("stands"), list):
            raise ValueError(f"not a standing of the groups: {data!r}")
        stands: list[Stand] = []
        for stand in data["stands"]:
            if stand in (START, DONE):
                stands.append(START if stand == START else DONE)
            elif isinstance(stand, dict):
                stands.append(StatusPosition.from_dict(stand))
            else:
                raise ValueError(f"not a group's stand: {stand!r}")
        modulus = data.get("modulus")
        if not isinstance(modulus, int):
            raise ValueError(f"not a modulus: {modulus!r}")
        return cls(modulus, tuple(stands))


@dataclass(frozen=True, slots=True)
class GroupProgress:
    """The groups' standing now, and the earlier standings still needed as filters."""

    now: Standing
    earlier: tuple[Standing, ...] = ()

    @classmethod
    def fresh(cls) -> GroupProgress:
        """Nothing decided: one group (any modulus regroups it), at its start."""
        return cls(Standing(1, (START,)))

    @classmethod
    def after(cls, position: StatusPosition) -> GroupProgress:
        """Everything up to `position` decided, in one group: where the job that read the list
        in one merged order stood (its cursor)."""
        return cls(Standing(1, (position,)))

    @property
    def modulus(self) -> int:
        return self.now.modulus

    @property
    def finished(self) -> bool:
        return all(stand == DONE for stand in self.now.stands)

    def next_group(self) -> int | None:
        """The group to read next: the first not done (None: every one is)."""
        return next((n for n, stand in enumerate(self.now.stands) if stand != DONE), None)

    def position(self, group: int) -> StatusPosition | None:
        """Where the group's next read starts (None: at the start)."""
        stand = self.now.stands[group]
        assert stand != DONE, f"group {group} is done"
        return stand if isinstance(stand, StatusPosition) else None

    def decided(self, position: StatusPosition, payment_id: str) -> bool:
        """Whether the payment listed at `position` was decided already (by a page read in
        other groups, before a regrouping)."""
        return any(standing.decided(position, payment_id) for standing in self.earlier)

    def advanced(self, group: int, end: StatusPosition | None, *, done: bool) -> GroupProgress:
        """After a page of `group` that ended at `end`, and read the group to its end or not."""
        stands = list(self.now.stands)
        stands[group] = DONE if done else end or stands[group]
        return GroupProgress(Standing(self.modulus, tuple(stands)), self.earlier).pruned()

    def regrouped(self, modulus: int) -> GroupProgress:
        """The same progress in `modulus` groups: each from the least advanced of the groups it
        shares payments with, this standing kept to pass over what it decided beyond that."""
        if modulus == self.modulus:
            return self
        common = math.gcd(modulus, self.modulus)
        stands = tuple(
            _least(self.now.stands[group % common :: common]) for group in range(modulus)
        )
        return GroupProgress(Standing(modulus, stands), (*self.earlier, self.now)).pruned()

    def pruned(self) -> GroupProgress:
        """Without the earlier standings that say nothing beyond where the groups stand now."""
        needed = tuple(
            standing
            for standing in self.earlier
            if any(_further(theirs, stand) for stand, theirs in self.now.shared(standing))
        )
        return self if needed == self.earlier else GroupProgress(self.now, needed)

    def to_json(self) -> dict[str, Any]:
        return self.now.to_json() | {"earlier": [standing.to_json() for standing in self.earlier]}

    @classmethod
    def from_json(cls, data: Any) -> GroupProgress:
        """The progress `to_json` wrote; ValueError if it is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("earlier"), list):
            raise ValueError(f"not the groups' progress: {data!r}")
        earlier = tuple(Standing.from_json(standing) for standing in data["earlier"])
        return cls(Standing.from_json(data), earlier)
