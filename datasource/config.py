"""How to reach the table: endpoint, credentials, connection pool, timeouts and retries."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["DynamoConfig"]


@dataclass(frozen=True, slots=True)
class DynamoConfig:
    table_name: str
    region: str
    # None means AWS itself; set for DynamoDB Local, moto, or any other emulator.
    endpoint_url: str | None = None
    # One shared client serves every request, so its pool bounds concurrent DynamoDB calls.
    max_pool_connections: int = 64
    connect_timeout: float = 2.0
    read_timeout: float = 5.0
    # Attempts a call makes at most (`datasource.retries`: throttles, 5xx, lost connections),
    # within its operation's budget; "adaptive" adds botocore's client-side rate limiter.
    max_attempts: int = 16
    retry_mode: str = "standard"  # or "adaptive"
    # The circuit breaker (`datasource.breaker`): attempts without an answer in a row that open
    # it, and how often an open one asks DynamoDB whether it answers again.
    breaker_failures: int = 5
    breaker_probe_interval: float = 0.5
    # Lookups by key that requests make at the same moment share one call (`datasource.coalesce`).
    coalesce_lookups: bool = True
    # When set (local and tests), used with the secret below; otherwise the default AWS chain.
    aws_access_key_id: str | None = None
    aws_secret_access_key: str | None = None
    # Where each process appends the operations its clients make (`datasource.permissions`).
    operation_log: Path | None = None
