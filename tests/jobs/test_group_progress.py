"""Where the collection job stands in GSI2's groups: regrouped when the layouts' modulus changes,
it still decides each payment exactly once, resumed from any saved page."""

from __future__ import annotations

import json
import random

import pytest
from uuid_utils import uuid7

from datasource import StatusPosition
from domain.keys import status_shard
from jobs.group_progress import DONE, START, GroupProgress, Standing

# Shard counts a table can be moved between, and so the moduli of the layouts read at once.
MODULI = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 96, 128)


def position(payment_id: str) -> StatusPosition:
    return StatusPosition(
        f"STATUS#RETRY#PAYMENT#{payment_id}", "USER#u", f"LOAN#l#PAYMENT#{payment_id}"
    )


class FakeList:
    """GSI2's RETRY list: payment id by position, read group by group as the store reads it."""

    def __init__(self, count: int) -> None:
        self.ids = {position(i): i for i in (str(uuid7()) for _ in range(count))}

    def page(
        self, modulus: int, group: int, first: int, after: StatusPosition | None
    ) -> tuple[list[tuple[StatusPosition, str]], StatusPosition | None, bool]:
        """The payments, where the page ends, whether the group ends with it."""
        found = [
            (at, i)
            for at, i in sorted(self.ids.items(), reverse=True)
            if status_shard(i, modulus) == group and (after is None or after > at)
        ][: first + 1]
        listed = found[:first]
        return listed, listed[-1][0] if listed else None, len(found) <= first


def walk(
    listing: FakeList, progress: GroupProgress, moduli: list[int], page_size: int
) -> tuple[list[str], GroupProgress]:
    """One page as the job reads it: the groups in turn until the page is full, regrouped to
    the next of `moduli` (the layouts as each read finds them) before each read."""
    listed: list[str] = []
    while len(listed) < page_size:
        progress = progress.regrouped(moduli.pop(0) if moduli else progress.modulus)
        group = progress.next_group()
        if group is None:
            break
        payments, end, done = listing.page(
            progress.modulus, group, page_size - len(listed), progress.position(group)
        )
        listed += [i for at, i in payments if not progress.decided(at, i)]
        progress = progress.advanced(group, end, done=done)
    return listed, progress


@pytest.mark.parametrize("seed", range(40))
def test_each_payment_is_decided_once_whatever_the_regroupings_and_crashes(seed: int) -> None:
    chance = random.Random(seed)
    listing = FakeList(chance.randrange(0, 300))
    saved = GroupProgress.fresh()
    decided: list[str] = []
    while not saved.finished:
        # The layouts change now and then, between reads of a page or between pages.
        moduli = [chance.choice(MODULI) if chance.random() < 0.2 else 0 for _ in range(8)]
        moduli = [m or saved.modulus for m in moduli]
        listed, progress = walk(listing, saved, moduli, chance.randrange(1, 40))
        if chance.random() < 0.25:
            continue  # killed before the page's checkpoint: the page is done again
        decided += listed
        # As the checkpoint file holds it.
        saved = GroupProgress.from_json(json.loads(json.dumps(progress.to_json())))

    assert sorted(decided) == sorted(listing.ids.values())
    assert saved.earlier == ()


def test_a_new_group_starts_where_the_least_advanced_of_its_old_groups_stands() -> None:
    a, b, c = sorted(position(str(uuid7())) for _ in range(3))
    progress = GroupProgress(Standing(2, (c, a)))

    regrouped = progress.regrouped(4)

    # Groups 0 and 2 were all old group 0's payments, 1 and 3 old group 1's.
    assert regrouped.now == Standing(4, (c, a, c, a))
    # Nothing is beyond where each new group starts: no filter is kept.
    assert regrouped.earlier == ()
    # Back to one group: from the least advanced, the old standing kept as a filter.
    merged = regrouped.advanced(0, b, done=False).advanced(2, None, done=True).regrouped(1)
    assert merged.now == Standing(1, (b,))
    assert merged.earlier == (Standing(4, (b, a, DONE, a)),)


def test_a_filter_is_dropped_once_every_group_stands_past_what_it_says() -> None:
    a, b, c = sorted(position(str(uuid7())) for _ in range(3))
    progress = GroupProgress(Standing(2, (START, b))).regrouped(1)
    assert progress.now == Standing(1, (START,))
    assert progress.earlier == (Standing(2, (START, b)),)

    assert progress.advanced(0, c, done=False).earlier == (Standing(2, (START, b)),)
    assert progress.advanced(0, a, done=False).earlier == ()
    assert progress.advanced(0, None, done=True).earlier == ()


def test_a_payment_is_decided_when_its_old_group_stood_at_or_past_it() -> None:
    ids = [str(uuid7()) for _ in range(200)]
    # Two ids of group 0 among 2; the newer one is read first (newest first).
    older, newer = sorted((i for i in ids if status_shard(i, 2) == 0), key=position)[:2]
    other = next(i for i in ids if status_shard(i, 2) == 1)
    earlier = Standing(2, (position(newer), START))
    progress = GroupProgress(Standing(1, (START,)), (earlier,))

    assert progress.decided(position(newer), newer)
    assert not progress.decided(position(older), older)
    assert not progress.decided(position(other), other)


def test_a_standing_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="groups' stands"):
        Standing(2, (START,))
    malformed: list[object] = [
        {"modulus": 1, "stands": ["half"]},
        {"modulus": "1", "stands": [START]},
        [],
    ]
    for bad in malformed:
        with pytest.raises(ValueError):
            Standing.from_json(bad)
