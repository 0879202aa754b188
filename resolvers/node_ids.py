"""Relay global ids: opaque, and carrying the whole key of what they name.

A payment's id holds user, loan and payment id; a loan's holds user and loan id. Ids never hold
`#` (validation refuses it), so `#` separates the parts without ambiguity.
"""

from __future__ import annotations

import base64
import binascii

from domain.errors import InvalidInput
from domain.payment import LoanRef, PaymentRef

__all__ = ["decode_node_id", "loan_node_id", "payment_node_id"]


def _encode(*parts: str) -> str:
    return base64.urlsafe_b64encode("#".join(parts).encode()).decode().rstrip("=")


def payment_node_id(ref: PaymentRef) -> str:
    return _encode("Payment", ref.user_id, ref.loan_id, ref.payment_id)


def loan_node_id(ref: LoanRef) -> str:
    return _encode("Loan", ref.user_id, ref.loan_id)


def decode_node_id(node_id: str) -> PaymentRef | LoanRef:
    try:
        padded = node_id + "=" * (-len(node_id) % 4)
        kind, *parts = base64.urlsafe_b64decode(padded.encode("ascii")).decode().split("#")
    except (binascii.Error, UnicodeError, ValueError):
        raise InvalidInput("id", "is not a node id of this service") from None
    try:
        if kind == "Payment" and len(parts) == 3:
            return PaymentRef.checked(*parts)
        if kind == "Loan" and len(parts) == 2:
            return LoanRef.checked(*parts)
    except InvalidInput:
        pass
    raise InvalidInput("id", "is not a node id of this service")
