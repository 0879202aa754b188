"""Per-request DataLoaders: every read of a request goes through one of these.

    payments       (user, loan, payment)              -> one GetItem for one key, one BatchGetItem
                                                         per 100 (shared with other requests'
                                                         lookups of the moment: the store's)
    loan_pages     (user, loan, status, first, after) -> one Query per distinct list
    confirmations  (user, confirmation id)            -> one GSI3 Query per distinct id
    histories      (payment, first, after)            -> one Query per distinct page of history

A payment listed or written earlier in the request is kept by its ref (`remember`), so a later
lookup of it (`payment`) costs nothing; only lookups reach the `payments` loader, which is
private so that no caller bypasses that.

Reads are eventually consistent (half the read units) unless `consistent` is set: by the
`strong_reads` setting, or by `read_strongly()` before a read that decides a write or must see
one (a mutation, a live event). Index queries (GSI1, GSI3) are eventually consistent whatever
the flag: DynamoDB has no other kind.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from strawberry.dataloader import DataLoader

from datasource import HistoryPage, Page, PageOf, PaymentStore
from domain import validation
from domain.enums import PaymentStatus
from domain.payment import LoanRef, Payment, PaymentRef


@dataclass(frozen=True, slots=True)
class LoanPageKey:
    loan: LoanRef
    status: PaymentStatus | None
    first: int
    after: str | None


@dataclass(frozen=True, slots=True)
class ConfirmationKey:
    user_id: str
    confirmation_id: str

    @classmethod
    def checked(cls, user_id: str, confirmation_id: str) -> ConfirmationKey:
        return cls(
            validation.identifier("userId", user_id),
            validation.identifier("confirmationId", confirmation_id),
        )


@dataclass(frozen=True, slots=True)
class HistoryKey:
    payment: PaymentRef
    first: int
    after: str | None


class Loaders:
    def __init__(self, store: PaymentStore, *, consistent: bool = False) -> None:
        self._store = store
        self.consistent = consistent
        self._payments: DataLoader[PaymentRef, Payment | None] = DataLoader(self._load_payments)
        self.loan_pages: DataLoader[LoanPageKey, Page] = DataLoader(self._load_loan_pages)
        self.confirmations: DataLoader[ConfirmationKey, Payment | None] = DataLoader(
            self._load_confirmations
        )
        self.histories: DataLoader[HistoryKey, HistoryPage] = DataLoader(self._load_histories)
        # What this request listed or wrote, as it was then; consulted before `_payments`.
        self._known: dict[PaymentRef, Payment] = {}

    async def payment(self, ref: PaymentRef) -> Payment | None:
        """The payment `ref` names: as listed or written earlier in this request, or read in one
        batch with the request's other lookups."""
        known = self._known.get(ref)
        if known is not None:
            return known
        return await self._payments.load(ref)

    def read_strongly(self) -> None:
        """Every later read of this request is strongly consistent: it decides a write, or it
        must see a write made since (this request's own, or one a live event announced)."""
        self.consistent = True

    def remember(self, payments: list[Payment]) -> None:
        """Later lookups of these payments answer them as they are here (a list's, a write's):
        a dict entry each, where priming the loader made a future for every payment listed."""
        self._known.update((payment.ref, payment) for payment in payments)

    def forget(self, ref: PaymentRef) -> None:
        """The next lookup of `ref` reads it again (a live event says it changed)."""
        self._known.pop(ref, None)
        with contextlib.suppress(KeyError):  # not read yet
            self._payments.clear(ref)

    def forget_lists(self) -> None:
        """After a write: lists and lookups may now be stale; single payments are re-primed."""
        self.loan_pages.clear_all()
        self.confirmations.clear_all()
        self.histories.clear_all()

    async def _load_payments(self, refs: list[PaymentRef]) -> list[Payment | None]:
        return await self._store.batch_get(refs, consistent=self.consistent)

    # Each key is its own Query; a failure (a refused cursor) belongs to its key alone, so
    # exceptions are handed back per key and the loader raises them where they were asked for.
    async def _load_loan_pages(self, keys: list[LoanPageKey]) -> list[Page | BaseException]:
        pages = await asyncio.gather(
            *(
                self._store.loan_payments(
                    key.loan,
                    status=key.status,
                    first=key.first,
                    after=key.after,
                    consistent=self.consistent,
                )
                for key in keys
            ),
            return_exceptions=True,
        )
        for page in pages:
            if isinstance(page, PageOf):
                self.remember([edge.node for edge in page.edges])
        return list(pages)

    async def _load_confirmations(
        self, keys: list[ConfirmationKey]
    ) -> list[Payment | BaseException | None]:
        found = await asyncio.gather(
            *(
                self._store.payment_by_confirmation(
                    user_id=key.user_id, confirmation_id=key.confirmation_id
                )
                for key in keys
            ),
            return_exceptions=True,
        )
        self.remember([payment for payment in found if isinstance(payment, Payment)])
        return list(found)

    async def _load_histories(self, keys: list[HistoryKey]) -> list[HistoryPage | BaseException]:
        pages = await asyncio.gather(
            *(
                self._store.history(
                    key.payment, first=key.first, after=key.after, consistent=self.consistent
                )
                for key in keys
            ),
            return_exceptions=True,
        )
        return list(pages)
