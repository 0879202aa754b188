"""The key schema of the one table: the only place that builds a key string.

    table  PK     = USER#<user_id>
           SK     = LOAN#<loan_id>#PAYMENT#<payment_id>
    GSI1   GSI1PK = USER#<user_id>
           GSI1SK = LOAN#<loan_id>#STATUS#<status>#PAYMENT#<payment_id>
    GSI2   GSI2PK = PAYMENT
           GSI2SK = STATUS#<status>#PAYMENT#<payment_id>
    GSI3   GSI3PK = USER#<user_id>                       (only once a confirmation id exists)
           GSI3SK = CONFIRMATION#<confirmation_id>

Access patterns (each a GraphQL field):
    payment by loan and payment id    table  PK = USER#u, SK = LOAN#l#PAYMENT#p
    all payments of a loan            table  PK = USER#u, SK begins_with LOAN#l#PAYMENT#
    a loan's payments in one status   GSI1   GSI1PK = USER#u, GSI1SK begins_with LOAN#l#STATUS#s#
    all payments in one status        GSI2   GSI2PK = PAYMENT, GSI2SK begins_with STATUS#s#
    payment by confirmation id        GSI3   GSI3PK = USER#u, GSI3SK = CONFIRMATION#c

Idempotency records (outside every access pattern: no GSI keys, and a sort key that no payment
prefix matches):
           PK     = USER#<user_id>
           SK     = IDEMPOTENCY#<sha256 of the key, hex>

Every begins_with prefix ends in the `#` delimiter, so loan `12` never matches loan `123`. Ids are
validated to hold no `#`, which keeps each key unambiguous.
"""

import hashlib

from domain.enums import PaymentStatus

GSI2_PARTITION = "PAYMENT"


def user_partition(user_id: str) -> str:
    return f"USER#{user_id}"


def payment_sort_key(loan_id: str, payment_id: str) -> str:
    return f"LOAN#{loan_id}#PAYMENT#{payment_id}"


def loan_payments_prefix(loan_id: str) -> str:
    return f"LOAN#{loan_id}#PAYMENT#"


def loan_status_sort_key(loan_id: str, status: PaymentStatus, payment_id: str) -> str:
    return f"LOAN#{loan_id}#STATUS#{status.value}#PAYMENT#{payment_id}"


def loan_status_prefix(loan_id: str, status: PaymentStatus) -> str:
    return f"LOAN#{loan_id}#STATUS#{status.value}#"


def status_sort_key(status: PaymentStatus, payment_id: str) -> str:
    return f"STATUS#{status.value}#PAYMENT#{payment_id}"


def status_prefix(status: PaymentStatus) -> str:
    return f"STATUS#{status.value}#"


def confirmation_sort_key(confirmation_id: str) -> str:
    return f"CONFIRMATION#{confirmation_id}"


def idempotency_sort_key(idempotency_key: str) -> str:
    # Hashed: a caller's key may hold any character and be 255 long; the digest is neither.
    return f"IDEMPOTENCY#{hashlib.sha256(idempotency_key.encode()).hexdigest()}"
