"""Per-request DataLoaders: every read of a request goes through one of these.

A request's lookups of payments by key go out as one GetItem, or one BatchGetItem per 100 keys
(shared with other requests' lookups of the moment: the store's); each distinct page of a loan's
list, each confirmation id and each page of a payment's history is one Query. A payment listed
or written earlier in the request is kept by its ref (`remember`), so a later lookup of it
(`payment`) costs nothing; the loader of lookups is private so that no caller bypasses that.
With a tracer each batch is a span, the parent of its DynamoDB calls. Reads are eventually
consistent unless `consistent` is set (the `strong_reads` setting, or `read_strongly()` before a
read that decides a write or must see one); index queries are eventually consistent whatever.

What each read costs: docs/data-model.md#access-patterns.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass
from typing import Any

from strawberry.dataloader import DataLoader

from datasource import NO_SPAN, HistoryPage, Page, PageOf, PaymentStore, internal_span
from domain import validation
from domain.enums import PaymentStatus
from domain.payment import LoanRef, Payment, PaymentRef

__all__ = ["BatchReads", "ConfirmationKey", "HistoryKey", "Loaders", "LoanPageKey"]


@dataclass(frozen=True, slots=True)
class LoanPageKey:
    """A page of a loan's payments, as Relay's arguments name it (`datasource.pages.Paging`)."""

    loan: LoanRef
    status: PaymentStatus | None
    first: int | None
    after: str | None
    last: int | None = None
    before: str | None = None


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
    first: int | None
    after: str | None
    last: int | None = None
    before: str | None = None


class Loaders:
    """A request's loaders, each made when the request first reads through it (a request reads
    one way or two of the four).

    The batch functions are `BatchReads`' methods, not this object's: a DataLoader holds its
    function, so a bound method of `Loaders` would make a cycle (`Loaders` holds the loaders),
    and every request's loaders, with each payment they read, would wait for the garbage
    collector instead of going when the request ends."""

    def __init__(self, store: PaymentStore, *, consistent: bool = False) -> None:
        self._reads = BatchReads(store, consistent)

    @functools.cached_property
    def _payments(self) -> DataLoader[PaymentRef, Payment | None]:
        return DataLoader(self._reads.payments)

    @functools.cached_property
    def loan_pages(self) -> DataLoader[LoanPageKey, Page]:
        return DataLoader(self._reads.loan_pages)

    @functools.cached_property
    def confirmations(self) -> DataLoader[ConfirmationKey, Payment | None]:
        return DataLoader(self._reads.confirmations)

    @functools.cached_property
    def histories(self) -> DataLoader[HistoryKey, HistoryPage]:
        return DataLoader(self._reads.histories)

    @property
    def consistent(self) -> bool:
        return self._reads.consistent

    async def payment(self, ref: PaymentRef) -> Payment | None:
        """The payment `ref` names: as listed or written earlier in this request, or read in one
        batch with the request's other lookups."""
        known = self._reads.known.get(ref)
        if known is not None:
            return known
        return await self._payments.load(ref)

    @property
    def payment_fields(self) -> frozenset[str] | None:
        """The fields of Payment this request reads, where a list is read (None: every field)."""
        return self._reads.payment_fields

    def read_only(self, fields: frozenset[str]) -> None:
        """Lists read only these fields of their payments: the request's document reads no
        other, anywhere (a query's; a mutation reads in full what it writes). A payment listed
        is remembered as read, so a later lookup of it in this request needs no more."""
        self._reads.payment_fields = fields

    def read_strongly(self) -> None:
        """Every later read of this request is strongly consistent: it decides a write, or it
        must see a write made since (this request's own, or one a live event announced)."""
        self._reads.consistent = True

    def remember(self, payments: list[Payment]) -> None:
        """Later lookups of these payments answer them as they are here (a list's, a write's):
        a dict entry each, where priming the loader made a future for every payment listed."""
        self._reads.remember(payments)

    def forget(self, ref: PaymentRef) -> None:
        """The next lookup of `ref` reads it again (a live event says it changed)."""
        self._reads.known.pop(ref, None)
        for loader in self._made("_payments"):
            with contextlib.suppress(KeyError):  # not read yet
                loader.clear(ref)

    def forget_lists(self) -> None:
        """After a write: lists and lookups may now be stale; single payments are re-primed."""
        for loader in self._made("loan_pages", "confirmations", "histories"):
            loader.clear_all()

    def _made(self, *names: str) -> list[DataLoader[Any, Any]]:
        """Those of the loaders `names` this request has read through (a cached property is
        kept in the instance's dict once made)."""
        return [self.__dict__[name] for name in names if name in self.__dict__]


class BatchReads:
    """The loaders' batch functions, with what they read by: the store, whether reads are
    strongly consistent, and the payments this request listed or wrote, as they were then
    (consulted before a lookup reaches the store)."""

    __slots__ = ("_known", "_store", "_tracer", "_unkeyed", "consistent", "payment_fields")

    def __init__(self, store: PaymentStore, consistent: bool) -> None:
        self._store = store
        self._tracer = getattr(store, "tracer", None)  # none on the tests' stand-in stores
        self.consistent = consistent
        self._known: dict[PaymentRef, Payment] = {}
        # Remembered, not yet keyed by ref: most requests look nothing up after a list, and a
        # ref read from a listed payment converts its ids from the item.
        self._unkeyed: list[list[Payment]] = []
        self.payment_fields: frozenset[str] | None = None

    @property
    def known(self) -> dict[PaymentRef, Payment]:
        """The payments remembered, by ref."""
        for payments in self._unkeyed:
            self._known.update((payment.ref, payment) for payment in payments)
        self._unkeyed.clear()
        return self._known

    def remember(self, payments: list[Payment]) -> None:
        self._unkeyed.append(payments)

    def _span(self, loader: str, keys: list[Any]) -> contextlib.AbstractContextManager[object]:
        if self._tracer is None:
            return NO_SPAN
        attributes = {"loc.dataloader.keys": len(keys)}
        return internal_span(self._tracer, f"DataLoader {loader}", attributes)

    async def payments(self, refs: list[PaymentRef]) -> list[Payment | None]:
        with self._span("payments", refs):
            return await self._store.batch_get(refs, consistent=self.consistent)

    # Each key is its own Query; a failure (a refused cursor) belongs to its key alone, so
    # exceptions are handed back per key and the loader raises them where they were asked for.
    async def loan_pages(self, keys: list[LoanPageKey]) -> list[Page | BaseException]:
        with self._span("loan_pages", keys):
            return await self._loan_pages(keys)

    async def _loan_pages(self, keys: list[LoanPageKey]) -> list[Page | BaseException]:
        pages = await asyncio.gather(
            *(
                self._store.loan_payments(
                    key.loan,
                    status=key.status,
                    first=key.first,
                    after=key.after,
                    last=key.last,
                    before=key.before,
                    consistent=self.consistent,
                    fields=self.payment_fields,
                )
                for key in keys
            ),
            return_exceptions=True,
        )
        for page in pages:
            if isinstance(page, PageOf):
                self.remember([edge.node for edge in page.edges])
        return list(pages)

    async def confirmations(
        self, keys: list[ConfirmationKey]
    ) -> list[Payment | BaseException | None]:
        with self._span("confirmations", keys):
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

    async def histories(self, keys: list[HistoryKey]) -> list[HistoryPage | BaseException]:
        with self._span("histories", keys):
            pages = await asyncio.gather(
                *(
                    self._store.history(
                        key.payment,
                        first=key.first,
                        after=key.after,
                        last=key.last,
                        before=key.before,
                        consistent=self.consistent,
                    )
                    for key in keys
                ),
                return_exceptions=True,
            )
        return list(pages)
