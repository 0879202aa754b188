"""Who is calling: a customer (one user) or a service (SPEC §7); its refusals are in
`resolvers.errors`.

A customer reads its own data and creates MANUAL payments on its own loans; a service does
everything for any user. Another user's data reads as not found, never as forbidden, so a
customer cannot learn what exists. The server reads the caller from a bearer JWT
(`server/auth.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Caller"]


@dataclass(frozen=True, slots=True)
class Caller:
    user_id: str
    is_service: bool = False
    # A federation gateway (SPEC §15): its token proves where a query plan came from, and makes
    # it no caller of the fields (the client it forwards is).
    is_gateway: bool = False
    # The OAuth client the token was issued to (`azp`, or Cognito's `client_id`).
    client_id: str | None = None
    # An operator of webhooks (SPEC §18): sees and manages every client's endpoints.
    is_webhooks_admin: bool = False

    def sees(self, user_id: str) -> bool:
        return self.is_service or user_id == self.user_id

    @property
    def service_client(self) -> str:
        """The service client calling: the token's OAuth client, else its subject. A service's
        budget is its client's (`server.budgets`), and so are the webhook endpoints it
        registers (`resolvers.webhooks`)."""
        return self.client_id or self.user_id
