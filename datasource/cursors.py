"""Opaque, signed pagination cursors.

A cursor is base64url(key values + HMAC-SHA256). The MAC covers the list the cursor belongs to
(index, user, loan, status; the payment, for a payment's history) as well as the key, but only
the key travels: a cursor that was altered, or that is handed to another user's, loan's,
payment's, index's or status's list, fails the check.
Nothing in it is secret (the key holds ids the caller already knows); the signature only stops a
caller from steering a query to a start key of its choosing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass

from datasource.items import Item
from datasource.table import page_key_attributes
from domain.enums import PaymentStatus
from domain.errors import InvalidCursor

__all__ = ["CursorCodec", "ListScope"]

_VERSION = b"loc-payments-cursor/1"
_MAC_SIZE = hashlib.sha256().digest_size
# Far above any real cursor (a few hundred characters); refuses junk before any work.
MAX_CURSOR_LENGTH = 2048


@dataclass(frozen=True, slots=True)
class ListScope:
    """One list a cursor can belong to: the index it pages and the values that select it."""

    index: str | None  # None: the table itself
    user_id: str | None = None
    loan_id: str | None = None
    status: PaymentStatus | None = None
    payment_id: str | None = None  # a payment's history

    def signed_bytes(self) -> bytes:
        status = self.status.value if self.status is not None else None
        signed = [self.index, self.user_id, self.loan_id, status]
        # Only a history's scope names a payment; the payment lists' cursors sign what they
        # always signed, so the cursors clients hold stay valid.
        if self.payment_id is not None:
            signed.append(self.payment_id)
        return json.dumps(signed).encode()


class CursorCodec:
    def __init__(self, secret: bytes) -> None:
        if not secret:
            raise ValueError("the cursor secret must not be empty")
        self._secret = secret

    def encode(self, scope: ListScope, key: Item) -> str:
        values = [key[name]["S"] for name in page_key_attributes(scope.index)]
        payload = json.dumps(values, separators=(",", ":")).encode()
        raw = payload + self._mac(scope, payload)
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")

    def decode(self, scope: ListScope, cursor: str, *, field: str = "after") -> Item:
        """The ExclusiveStartKey behind `cursor` (in either direction); InvalidCursor on `field`
        unless we made it for this list."""
        raw = _unbase64(cursor, field)
        payload, mac = raw[:-_MAC_SIZE], raw[-_MAC_SIZE:]
        if len(raw) <= _MAC_SIZE or not hmac.compare_digest(mac, self._mac(scope, payload)):
            raise InvalidCursor(field=field)
        names = page_key_attributes(scope.index)
        values = json.loads(payload)
        # Only a bug (or a changed key schema under an old secret) gets past the MAC with this.
        if not isinstance(values, list) or len(values) != len(names):
            raise InvalidCursor(field=field)
        return {name: {"S": str(value)} for name, value in zip(names, values, strict=True)}

    def _mac(self, scope: ListScope, payload: bytes) -> bytes:
        message = b"\x00".join((_VERSION, scope.signed_bytes(), payload))
        return hmac.new(self._secret, message, hashlib.sha256).digest()


def _unbase64(cursor: str, field: str) -> bytes:
    if not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR_LENGTH:
        raise InvalidCursor(field=field)
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise InvalidCursor(field=field) from None
    # base64's last character can carry unused bits; a cursor must be exactly what we wrote.
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != cursor:
        raise InvalidCursor(field=field)
    return raw
