"""The domain's enums as GraphQL enums; schema modules import them from here, decorated once."""

import strawberry

from domain.audit import ActorKind
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus

strawberry.enum(PaymentStatus, description="Where a payment is in its lifecycle.")
strawberry.enum(PaymentMethod, description="How the money moves: ACH debit or PINless debit card.")
strawberry.enum(PaymentProcess, description="What started the payment.")
strawberry.enum(
    ActorKind, description="Who wrote: a customer, a service, or one of the service's own jobs."
)

__all__ = ["ActorKind", "PaymentMethod", "PaymentProcess", "PaymentStatus"]
