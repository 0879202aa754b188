"""Payments to list by status, and the `paymentsByStatus` pages they come back in: for the GSI2
sharding tests (tests/datasource/test_status_shards.py) and the reshard job's
(tests/jobs/test_reshard.py)."""

from __future__ import annotations

from collections.abc import Sequence

from datasource import Page, PaymentStore
from domain.enums import PaymentStatus
from domain.payment import Payment
from tests.payment_samples import sample_payment

S = PaymentStatus


def mixed_payments(count: int) -> list[Payment]:
    """Payments of several users, loans and statuses, created in order (ids are UUIDv7)."""
    statuses = (S.PENDING, S.RETRY, S.PENDING, S.ACHSENT)
    return [
        sample_payment(
            user_id=f"user-{n % 5}", loan_id=f"loan-{n % 3}", status=statuses[n % len(statuses)]
        )
        for n in range(count)
    ]


async def every_page(store: PaymentStore, status: PaymentStatus, first: int) -> list[Page]:
    pages = [await store.payments_by_status(status=status, first=first, after=None)]
    while pages[-1].has_next_page:
        after = pages[-1].end_cursor
        pages.append(await store.payments_by_status(status=status, first=first, after=after))
    return pages


def ids(pages: Sequence[Page]) -> list[list[str]]:
    return [[edge.node.payment_id for edge in page.edges] for page in pages]


def newest_first(payments: Sequence[Payment], status: PaymentStatus) -> list[str]:
    return [p.payment_id for p in reversed(payments) if p.status is status]
