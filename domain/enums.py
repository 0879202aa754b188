"""The payment's three enumerations, with the exact values stored in DynamoDB."""

from enum import StrEnum

__all__ = ["PaymentMethod", "PaymentProcess", "PaymentStatus"]


class PaymentStatus(StrEnum):
    PENDING = "PENDING"
    ACHSENT = "ACHSENT"
    COMPLETED = "COMPLETED"
    RETRY = "RETRY"
    SKIPPED = "SKIPPED"
    FAILED = "FAILED"
    CHARGED_BACK = "CHARGED_BACK"
    RETURNED = "RETURNED"


class PaymentMethod(StrEnum):
    # Stored in lower case, as the source document writes them.
    ACH = "ach"
    PINLESS = "pinless"


class PaymentProcess(StrEnum):
    MANUAL = "MANUAL"
    AUTO = "AUTO"
    RETRY = "RETRY"
