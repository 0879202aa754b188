"""GSI2's list of one status read group by group, for the collection job, which needs no order
across groups (`PaymentStore.payments_by_status_group`).

A payment's group is its shard among the layouts' `group_modulus` (`keys.StatusLayout`): a
reshard between those layouts moves a payment only between partitions of its group. In one
layout a group is one partition and its page one Query; during a reshard, a merge of the group's
partitions in each layout (`pages.merged_page`, which reads the old layouts first). A group is
paged from a `StatusPosition`, a plain place in the list that compares with any payment's,
whichever group or layout listed it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from datasource.cursors import CursorCodec
from datasource.items import Item, from_item
from datasource.pages import PageQuery, Paging, merged_page, query_page
from datasource.table import GSI2PK, GSI2SK, PK, SK
from domain import keys
from domain.enums import PaymentStatus
from domain.payment import Payment

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = ["GroupPage", "StatusPosition", "group_page"]


@dataclass(frozen=True, slots=True, order=True)
class StatusPosition:
    """A place in GSI2's list of one status: an entry's sort key, then its item's key (the
    merge's order). The list is newest first: read from the greatest position down."""

    status_key: str  # GSI2SK
    partition_key: str  # PK
    sort_key: str  # SK

    @classmethod
    def of_payment(cls, payment: Payment, status: PaymentStatus) -> StatusPosition:
        return cls(
            keys.status_sort_key(status, payment.payment_id),
            keys.user_partition(payment.user_id),
            keys.payment_sort_key(payment.loan_id, payment.payment_id),
        )

    @classmethod
    def of_key(cls, key: Item) -> StatusPosition:
        return cls(key[GSI2SK]["S"], key[PK]["S"], key[SK]["S"])

    @classmethod
    def from_dict(cls, values: Mapping[str, object]) -> StatusPosition:
        """The position `as_dict` wrote; ValueError if it is not one."""
        found = [values.get(name) for name in (GSI2SK, PK, SK)]
        if set(values) != {GSI2SK, PK, SK} or not all(isinstance(v, str) for v in found):
            raise ValueError(f"not a position on GSI2: {dict(values)!r}")
        return cls(*(str(value) for value in found))

    def key_in(self, partition: str) -> Item:
        """This position's key in one partition of GSI2 (where a Query there starts after it)."""
        return {
            GSI2PK: {"S": partition},
            GSI2SK: {"S": self.status_key},
            PK: {"S": self.partition_key},
            SK: {"S": self.sort_key},
        }

    def as_dict(self) -> dict[str, str]:
        """The key values, by attribute name (a checkpoint's JSON)."""
        return {GSI2SK: self.status_key, PK: self.partition_key, SK: self.sort_key}

    def covers(self, other: StatusPosition) -> bool:
        """Whether a read that has got to this position has read `other`."""
        return other >= self


@dataclass(frozen=True, slots=True)
class GroupPage:
    """A page of one group: its payments with their positions, in the list's order; where the
    group goes on after it (None: the page read nothing); whether the group was read to its
    end."""

    payments: list[tuple[StatusPosition, Payment]]
    end: StatusPosition | None
    done: bool


async def group_page(
    client: DynamoDBClient,
    *,
    table_name: str,
    cursors: CursorCodec,
    queries: Sequence[PageQuery],
    moving_from: Sequence[PageQuery],
    status: PaymentStatus,
    modulus: int,
    group: int,
    first: int,
    after: StatusPosition | None,
) -> GroupPage:
    """Up to `first` payments of the group after `after`, read from `queries` (the group's
    partitions of the layout written now) and `moving_from` (of the layouts a reshard is moving
    payments from): one Query when that is one partition."""
    scope = queries[0].scope
    # The position as a cursor of the list, for the pages' own paging (signed and read back
    # here: it never leaves this process).
    cursor = None if after is None else cursors.encode(scope, after.key_in(queries[0].partition))
    paging = Paging.of(first=first, after=cursor)
    if len(queries) == 1 and not moving_from:
        page = await query_page(
            client,
            table_name=table_name,
            query=queries[0],
            cursors=cursors,
            paging=paging,
            node=from_item,
        )
    else:
        page = await merged_page(
            client,
            table_name=table_name,
            queries=queries,
            moving_from=moving_from,
            cursors=cursors,
            paging=paging,
            node=from_item,
        )
    end = None if page.end_cursor is None else cursors.decode(scope, page.end_cursor)
    return GroupPage(
        # A layout whose shard count the modulus does not divide (the layouts changed since
        # the modulus was read) lists other groups' payments too.
        [
            (StatusPosition.of_payment(edge.node, status), edge.node)
            for edge in page.edges
            if keys.status_shard(edge.node.payment_id, modulus) == group
        ],
        None if end is None else StatusPosition.of_key(end),
        not page.has_next_page,
    )
