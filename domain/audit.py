"""The audit trail: one event per write, on its own logger.

`loc_update_reason` is the item's record of its last write; the audit log is the history:
which payment, from which status to which, why, who (the caller's `sub` and kind), when, and the
version the write produced.
"""

from __future__ import annotations

import logging

from domain.payment import Payment
from domain.validation import format_timestamp

audit_log = logging.getLogger("loc_payments.audit")


def audit_write(
    before: Payment | None,
    after: Payment,
    *,
    actor_id: str,
    actor_kind: str,
    request_id: str | None = None,
) -> None:
    event = "payment.created" if before is None else "payment.transitioned"
    audit_log.info(
        "%s %s/%s/%s %s -> %s",
        event,
        after.user_id,
        after.loan_id,
        after.payment_id,
        "-" if before is None else before.status.value,
        after.status.value,
        extra={
            "event": event,
            "user_id": after.user_id,
            "loan_id": after.loan_id,
            "payment_id": after.payment_id,
            "from_status": None if before is None else before.status.value,
            "to_status": after.status.value,
            "reason": after.update_reason,
            "actor_id": actor_id,
            "actor_kind": actor_kind,
            "at": format_timestamp(after.updated_at),
            "version": after.version,
            "request_id": request_id,
        },
    )
