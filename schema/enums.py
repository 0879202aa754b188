"""The domain's enums as GraphQL enums; schema modules import them from here, decorated once."""

import strawberry

from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus

strawberry.enum(PaymentStatus, description="Where a payment is in its lifecycle.")
strawberry.enum(PaymentMethod, description="How the money moves: ACH debit or PINless debit card.")
strawberry.enum(PaymentProcess, description="What started the payment.")

__all__ = ["PaymentMethod", "PaymentProcess", "PaymentStatus"]
