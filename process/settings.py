"""The service's settings: one `Settings`, read from `LOC_*` environment variables, built once.

| env (`LOC_ENV`)   | table               | region      | DynamoDB                          |
|-------------------|---------------------|-------------|-----------------------------------|
| `local` (default) | `local-loc-service` | `us-west-2` | embedded DynamoDB Local           |
| `test`            | `test-loc-service`  | `us-west-2` | AWS                               |
| `prod`            | `prod-loc-service`  | `us-east-2` | AWS                               |

`LOC_TABLE_NAME`, `LOC_REGION` and `LOC_DYNAMODB_ENDPOINT` override the row. Outside `local` a JWT
key is required; `prod` refuses the development secrets below.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from datasource import DynamoConfig
from domain.keys import (
    DEFAULT_FEED_SHARDS,
    DEFAULT_GSI2_SHARDS,
    MAX_FEED_SHARDS,
    MAX_GSI2_SHARDS,
    StatusLayout,
)
from domain.webhooks import DEFAULT_RETRY_SCHEDULE
from engine import QueryLimits

__all__ = [
    "DEPLOYED",
    "DEV_CURSOR_SECRET",
    "DEV_JWT_SECRET",
    "LOCAL_AWS_CREDENTIALS",
    "TABLE_AND_REGION",
    "Env",
    "Settings",
]

Env = Literal["local", "test", "prod"]
# Who must name a trusted document (`engine.document_policy.DocumentPolicy`).
Policy = Literal["any", "trusted-for-customers", "trusted"]

# Documented (docs/configuration.md) so anyone can mint a local token (`loc-payments token`);
# worthless elsewhere because `prod` refuses it. At least 32 bytes, or PyJWT warns about the HMAC
# key.
DEV_JWT_SECRET = "loc-payments-local-development-secret-0123456789"
DEV_CURSOR_SECRET = "loc-payments-local-cursor-secret-0123456789"

# The credentials of `local`. DynamoDB Local refuses keys containing `_` or `-`, and with
# -sharedDb any value reaches the same database.
LOCAL_AWS_CREDENTIALS = {"aws_access_key_id": "testkey", "aws_secret_access_key": "testkey"}

MIN_SECRET_BYTES = 32

TABLE_AND_REGION: dict[str, tuple[str, str]] = {
    "local": ("local-loc-service", "us-west-2"),
    "test": ("test-loc-service", "us-west-2"),
    "prod": ("prod-loc-service", "us-east-2"),
}


# The environments that run on AWS, behind a load balancer (`local` is a developer's machine).
DEPLOYED = ("test", "prod")
# A setting that configures one of these objects defaults to the object's own default.
_DYNAMODB = DynamoConfig(table_name="", region="")
_LIMITS = QueryLimits()


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="LOC_",
        env_ignore_empty=True,  # `LOC_DYNAMODB_ENDPOINT=` means "no endpoint", not ""
        frozen=True,
        extra="forbid",
        hide_input_in_errors=True,  # a refused value may be a secret, and errors reach logs
    )

    env: Env = "local"
    # The declared defaults are `local`'s; `_defaults_for_env` swaps in the row of another env.
    table_name: Annotated[str, Field(min_length=3, max_length=255)] = "local-loc-service"
    region: str = "us-west-2"
    dynamodb_endpoint: str | None = None

    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8000
    # How long an idle keep-alive connection stays open. Longer than the idle timeout of whatever
    # keeps connections to the service (an AWS load balancer's is 60 s): a server that closes an
    # idle connection first (uvicorn's default is 5 s) races the next request sent on it, which
    # then fails with a closed connection (a 502 behind a load balancer); likely what `make
    # test-races` saw as ReadErrors in the two-instance races (a server starved of CPU fires the
    # timer late).
    keep_alive_seconds: Annotated[float, Field(gt=0)] = 75.0
    data_dir: Path = Path(".data/dynamodb")

    auth_jwt_secret: SecretStr | None = None
    auth_jwt_public_key_file: Path | None = None
    auth_jwt_issuer: str | None = None
    auth_jwt_audience: str | None = None
    # An identity provider's JWKS (comma-separated URLs): a token's `kid` picks its key.
    auth_jwks_url: Annotated[tuple[str, ...], NoDecode] = ()
    # How long its keys are kept: the answer's Cache-Control max-age, within these seconds.
    auth_jwks_cache_min_seconds: Annotated[float, Field(gt=0)] = 60.0
    auth_jwks_cache_max_seconds: Annotated[float, Field(gt=0)] = 3600.0
    # A token with an unknown kid reads the set again, at most once in these seconds.
    auth_jwks_refresh_interval: Annotated[float, Field(gt=0)] = 5.0
    # Seconds a JWKS read may take (and a request with an unknown kid waits for one).
    auth_jwks_timeout: Annotated[float, Field(gt=0, le=10)] = 2.0
    # Which claim holds the user id, and which scope (in `scope` or `scp`) makes a service.
    auth_user_claim: Annotated[str, Field(min_length=1)] = "sub"
    auth_service_scope: Annotated[str, Field(min_length=1)] = "payments:service"
    # The scope of the federation gateway's own token: `/subgraph` runs its text (query plans)
    # as the client it forwards (X-Forwarded-Authorization), under every document policy.
    auth_gateway_scope: Annotated[str, Field(min_length=1)] = "payments:gateway"
    # The scope of the operators of webhooks: they see and manage every service client's
    # endpoints (each client sees its own), and give an owner to one stored before owners.
    auth_webhooks_admin_scope: Annotated[str, Field(min_length=1)] = "payments:webhooks-admin"
    # Cognito access tokens carry `client_id`, not `aud`: the app clients accepted (comma list).
    auth_jwt_client_ids: Annotated[tuple[str, ...], NoDecode] = ()
    # Seconds of clock skew allowed on `iat`, `nbf` and `exp`: a provider's clock drifts from
    # ours. At most 5 minutes, since each second is one more an expired token keeps working.
    auth_leeway_seconds: Annotated[float, Field(ge=0, le=300)] = 60.0

    cursor_secret: SecretStr = SecretStr(DEV_CURSOR_SECRET)

    max_attempts: Annotated[int, Field(ge=1)] = 3

    # Query limits (docs/callers-and-errors.md, "Security"); each refuses an operation before
    # anything runs.
    max_query_depth: Annotated[int, Field(ge=1)] = _LIMITS.max_depth
    max_query_aliases: Annotated[int, Field(ge=0)] = _LIMITS.max_aliases
    max_query_tokens: Annotated[int, Field(ge=1)] = _LIMITS.max_tokens
    max_query_cost: Annotated[int, Field(ge=1)] = _LIMITS.max_cost
    max_request_bytes: Annotated[int, Field(ge=1024)] = 64 * 1024

    # Budgets of query cost per caller (docs/callers-and-errors.md, "Budgets"): on or off; each
    # class's rate (cost a second) and burst (at most held; at least the max query cost); named
    # service clients' own (`client=rate/burst`, comma-separated); a mutation's least cost; the
    # least an operation costs whose text this instance parses, validates and plans anew (its
    # first parse: about 19 ms of CPU for a document of 15 aliases, the work of some hundred
    # units of reads), below which a caller's budget is refused before the text is read; the
    # instances a fleet without its broker divides each budget among; how long a charge may wait
    # on the broker before this instance's share takes over.
    budgets: bool = True
    budget_customer_rate: Annotated[float, Field(gt=0)] = 1000.0
    budget_customer_burst: Annotated[float, Field(gt=0)] = 10_000.0
    budget_service_rate: Annotated[float, Field(gt=0)] = 20_000.0
    budget_service_burst: Annotated[float, Field(gt=0)] = 100_000.0
    budget_overrides: Annotated[dict[str, tuple[float, float]], NoDecode] = Field(
        default_factory=dict
    )
    budget_mutation_cost: Annotated[int, Field(ge=1)] = 10
    budget_new_document_cost: Annotated[int, Field(ge=1)] = 100
    budget_expected_instances: Annotated[int, Field(ge=1)] = 1
    budget_broker_timeout: Annotated[float, Field(gt=0, le=1)] = 0.02
    # The open subscriptions a customer (its user) and a service (its client) may hold across
    # the fleet (docs/callers-and-errors.md, "Subscriptions"), and the seconds an instance's
    # count of them lasts in the broker unless renewed (a dead instance's stop counting within).
    budget_customer_max_subscriptions: Annotated[int, Field(ge=1)] = 100
    budget_service_max_subscriptions: Annotated[int, Field(ge=1)] = 1000
    budget_subscription_lease_seconds: Annotated[float, Field(gt=0)] = 15.0

    # Trusted documents (docs/protocols.md, "Trusted documents"): the manifests (comma-separated
    # paths), and who must name one of their documents; by default `any` outside prod,
    # `trusted-for-customers` in prod.
    trusted_documents: Annotated[tuple[Path, ...], NoDecode] = ()
    documents: Policy | None = None

    # Operating it (docs/operating.md).
    log_format: Literal["auto", "json", "text"] = "auto"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    metrics: Literal["off", "app", "port"] = "app"
    metrics_port: Annotated[int, Field(ge=1, le=65535)] = 9464
    # Seconds between two status lines (`process.status_log`: the breaker, the stream reader's
    # lag), which the deploy stack's alarms read; 0: none.
    status_log_interval: Annotated[float, Field(ge=0)] = 60.0
    # `loc_payments_field_usage_total{client, field}`: which client still uses which field.
    field_usage: bool = True
    # Traces (`process/tracing.py`): none (no tracer at all), otlp (OTLP over HTTP, where the
    # standard OTEL_EXPORTER_OTLP_* variables say) or console; and whether an operation's span
    # holds its document (never its variables).
    otel_exporter: Literal["none", "otlp", "console"] = "none"
    otel_graphql_document: bool = False

    dynamodb_max_pool_connections: Annotated[int, Field(ge=1)] = _DYNAMODB.max_pool_connections
    dynamodb_connect_timeout: Annotated[float, Field(gt=0)] = _DYNAMODB.connect_timeout
    dynamodb_read_timeout: Annotated[float, Field(gt=0)] = _DYNAMODB.read_timeout
    dynamodb_max_attempts: Annotated[int, Field(ge=1)] = _DYNAMODB.max_attempts
    dynamodb_retry_mode: Literal["standard", "adaptive"] = "standard"
    # Seconds one GraphQL operation may spend on DynamoDB, across all its calls and retries.
    dynamodb_budget: Annotated[float, Field(gt=0)] = 3.0
    # The circuit breaker: attempts without an answer in a row that open it; probe period.
    dynamodb_breaker_failures: Annotated[int, Field(ge=1)] = _DYNAMODB.breaker_failures
    dynamodb_breaker_probe_interval: Annotated[float, Field(gt=0)] = (
        _DYNAMODB.breaker_probe_interval
    )
    # Lookups by key that requests make at the same moment go out as one call (one BatchGetItem).
    dynamodb_coalesce_lookups: bool = _DYNAMODB.coalesce_lookups
    # `local`: the wait before restarting an embedded DynamoDB Local that exited (doubling).
    dynamodb_local_restart_backoff: Annotated[float, Field(gt=0)] = 0.5
    # Queries read eventually consistent (half the read units); true: every read strongly.
    strong_reads: bool = False
    # A listed payment's fields read from its item by the compiled plan (`schema.stored_payments`);
    # false: from the payment, each field converted (the same answers, more CPU).
    leaves_from_items: bool = True
    # GSI2's write shards (1: the seed's `GSI2PK = PAYMENT`), and layouts read as well besides
    # those the table's layout record names ("1" or "1,4"); the events feed's shards (GSI4: the
    # layout of a new table, or the one `loc-payments reshard` moves the feed to); how often an
    # instance reads the layout record again (docs/operating.md, "Resharding").
    gsi2_shards: Annotated[int, Field(ge=1, le=MAX_GSI2_SHARDS)] = DEFAULT_GSI2_SHARDS
    gsi2_read_shards: Annotated[tuple[int, ...], NoDecode] = ()
    events_shards: Annotated[int, Field(ge=1, le=MAX_FEED_SHARDS)] = DEFAULT_FEED_SHARDS
    layout_refresh_seconds: Annotated[float, Field(ge=1, le=600)] = 10.0
    # Live updates (GraphQL subscriptions fed by the table's DynamoDB Stream).
    live_updates: bool = True
    stream_poll_interval: Annotated[float, Field(gt=0)] = 0.5
    subscriber_queue_size: Annotated[int, Field(ge=1)] = 1000
    max_subscriptions_per_connection: Annotated[int, Field(ge=1)] = 20
    websocket_keep_alive_interval: Annotated[float, Field(gt=0)] = 15.0
    # Seconds a socket may stay open without `connection_init` (then 4408).
    websocket_init_timeout: Annotated[float, Field(gt=0)] = 10.0
    # A fleet's live updates (SPEC §17): the broker (`redis://` or `rediss://`, with AUTH as
    # `rediss://:<token>@host:6379`), how many entries its stream keeps, and the seconds the one
    # stream reader's lease lasts unless renewed (a dead reader is replaced within that).
    live_broker_url: SecretStr | None = None
    live_broker_stream_length: Annotated[int, Field(ge=1000)] = 100_000
    live_lease_seconds: Annotated[float, Field(ge=1)] = 10.0
    # Events out (SPEC §18, docs "Events for other services"): whether this instance delivers
    # webhooks; the waits between an event's attempts (comma-separated seconds; after the last,
    # it is given up); the seconds a receiver has to answer; how often an idle endpoint looks
    # for new events; the seconds an instance's lease on an endpoint lasts unless renewed (a
    # dead instance's endpoints are taken over within it); how long a rotated secret still
    # signs; and the seconds after which an event is settled and listed by the feed.
    webhooks: bool = True
    # Outside `local` receivers must be public https addresses (`public_webhook_targets_only`);
    # this loosens that for the project's own tests of `test`, never by default, never in prod.
    webhook_allow_private_targets: bool = False
    webhook_retry_schedule: Annotated[tuple[float, ...], NoDecode] = DEFAULT_RETRY_SCHEDULE
    webhook_timeout: Annotated[float, Field(gt=0, le=60)] = 10.0
    webhook_poll_interval: Annotated[float, Field(gt=0)] = 1.0
    webhook_lease_seconds: Annotated[float, Field(ge=1)] = 30.0
    webhook_secret_grace_seconds: Annotated[float, Field(ge=0)] = 24 * 3600.0
    events_settle_seconds: Annotated[float, Field(gt=0)] = 5.0
    # Attempts in flight at once per endpoint (its window: what a SIGKILL may send again), and
    # the days the events feed lists (older `createdAfter` or cursors are refused; event items
    # themselves never expire, they are the payments' history).
    webhook_max_in_flight: Annotated[int, Field(ge=1, le=1000)] = 32
    events_retention_days: Annotated[int, Field(ge=30)] = 30
    # A directory where each process appends the DynamoDB operations it makes, as the IAM
    # actions they need (`datasource.permissions`): what the least-privilege check reads.
    aws_operation_log: Path | None = None

    @field_validator("trusted_documents", mode="before")
    @classmethod
    def _paths(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(Path(part.strip()) for part in value.split(",") if part.strip())
        return value

    @field_validator("auth_jwks_url", "auth_jwt_client_ids", mode="before")
    @classmethod
    def _comma_separated_strings(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("webhook_retry_schedule", mode="before")
    @classmethod
    def _comma_separated_seconds(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(float(part) for part in value.split(",") if part.strip())
        return value

    @field_validator("budget_overrides", mode="before")
    @classmethod
    def _overrides(cls, value: Any) -> Any:
        """`client-a=200/2000,client-b=50/10000`: each client's rate and burst."""
        if not isinstance(value, str):
            return value
        overrides = {}
        for part in (part.strip() for part in value.split(",")):
            if not part:
                continue
            client, _, limit = part.partition("=")
            rate, _, burst = limit.partition("/")
            try:
                overrides[client.strip()] = (float(rate), float(burst))
            except ValueError:
                raise ValueError(
                    f"LOC_BUDGET_OVERRIDES: {part!r} is not client=rate/burst"
                ) from None
        return overrides

    @field_validator("gsi2_read_shards", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(int(part) for part in value.split(",") if part.strip())
        return value

    @model_validator(mode="before")
    @classmethod
    def _defaults_for_env(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        env = data.get("env", "local")
        if env in TABLE_AND_REGION:
            table_name, region = TABLE_AND_REGION[env]
            data = {"table_name": table_name, "region": region, **data}
        if env in DEPLOYED:
            # Behind a load balancer: every interface; and the metrics off the public port.
            data = {"host": "0.0.0.0", "metrics": "port", **data}
        no_key = (
            data.get("auth_jwt_secret") is None
            and data.get("auth_jwt_public_key_file") is None
            and not data.get("auth_jwks_url")
        )
        if env == "local" and no_key:
            data = {**data, "auth_jwt_secret": DEV_JWT_SECRET}
        return data

    @model_validator(mode="after")
    def _refuse_unsafe_values(self) -> Settings:
        if any(not 1 <= count <= MAX_GSI2_SHARDS for count in self.gsi2_read_shards):
            raise ValueError(
                f"LOC_GSI2_READ_SHARDS: each layout has 1 to {MAX_GSI2_SHARDS} shards, "
                f"not {self.gsi2_read_shards}"
            )
        self._check_budgets()
        if self.auth_jwt_secret is not None and self.auth_jwt_public_key_file is not None:
            raise ValueError(
                "set one of LOC_AUTH_JWT_SECRET (HS256) or LOC_AUTH_JWT_PUBLIC_KEY_FILE (RS256)"
            )
        if (
            self.auth_jwt_secret is None
            and self.auth_jwt_public_key_file is None
            and not self.auth_jwks_url
        ):
            raise ValueError(
                f"LOC_ENV={self.env} needs LOC_AUTH_JWKS_URL (an identity provider's keys), "
                "LOC_AUTH_JWT_SECRET (HS256) or LOC_AUTH_JWT_PUBLIC_KEY_FILE (RS256)"
            )
        for url in self.auth_jwks_url:
            scheme = urlsplit(url).scheme
            if scheme not in ("https", "http") or (self.env == "prod" and scheme != "https"):
                raise ValueError(
                    f"LOC_AUTH_JWKS_URL: {url!r} is not an https URL"
                    + ("" if self.env == "prod" else " (or http outside prod)")
                )
        if self.auth_gateway_scope == self.auth_service_scope:
            raise ValueError("LOC_AUTH_GATEWAY_SCOPE must differ from LOC_AUTH_SERVICE_SCOPE")
        if self.auth_webhooks_admin_scope in (self.auth_service_scope, self.auth_gateway_scope):
            raise ValueError(
                "LOC_AUTH_WEBHOOKS_ADMIN_SCOPE must differ from LOC_AUTH_SERVICE_SCOPE and "
                "LOC_AUTH_GATEWAY_SCOPE"
            )
        if self.auth_jwks_cache_min_seconds > self.auth_jwks_cache_max_seconds:
            raise ValueError(
                "LOC_AUTH_JWKS_CACHE_MIN_SECONDS must not exceed LOC_AUTH_JWKS_CACHE_MAX_SECONDS"
            )
        if (
            self.auth_jwt_public_key_file is not None
            and not self.auth_jwt_public_key_file.is_file()
        ):
            raise ValueError(
                f"LOC_AUTH_JWT_PUBLIC_KEY_FILE: no file at {self.auth_jwt_public_key_file}"
            )
        if not self.webhook_retry_schedule or any(
            not 0 < delay <= 7 * 24 * 3600 for delay in self.webhook_retry_schedule
        ):
            raise ValueError(
                "LOC_WEBHOOK_RETRY_SCHEDULE: at least one wait, each above 0 and at most a week"
            )
        if self.webhook_lease_seconds <= self.webhook_timeout:
            raise ValueError("LOC_WEBHOOK_LEASE_SECONDS must exceed LOC_WEBHOOK_TIMEOUT")
        if self.env == "prod" and self.webhook_allow_private_targets:
            raise ValueError(
                "LOC_WEBHOOK_ALLOW_PRIVATE_TARGETS is for tests: prod's receivers are public https"
            )
        broker = self.live_broker_url
        if broker is not None and urlsplit(broker.get_secret_value()).scheme not in (
            "redis",
            "rediss",
        ):
            raise ValueError("LOC_LIVE_BROKER_URL must be a redis:// or rediss:// URL")
        for name, secret in (
            ("AUTH_JWT_SECRET", self.auth_jwt_secret),
            ("CURSOR_SECRET", self.cursor_secret),
        ):
            if secret is not None and len(secret.get_secret_value().encode()) < MIN_SECRET_BYTES:
                raise ValueError(f"LOC_{name} must be at least {MIN_SECRET_BYTES} bytes")
        if self.env == "prod":
            if self.uses_development_jwt_secret:
                raise ValueError(
                    "LOC_AUTH_JWT_SECRET is the published development secret; "
                    "prod needs its own secret or a public key"
                )
            if self.cursor_secret.get_secret_value() == DEV_CURSOR_SECRET:
                raise ValueError(
                    "LOC_CURSOR_SECRET is the published development value; set a secret for prod"
                )
        return self

    def _check_budgets(self) -> None:
        """Every budget admits the costliest operation allowed, so none is refused forever."""
        least = max(self.max_query_cost, self.budget_mutation_cost, self.budget_new_document_cost)
        limits = {
            "LOC_BUDGET_CUSTOMER_*": (self.budget_customer_rate, self.budget_customer_burst),
            "LOC_BUDGET_SERVICE_*": (self.budget_service_rate, self.budget_service_burst),
        } | {f"LOC_BUDGET_OVERRIDES {client}": v for client, v in self.budget_overrides.items()}
        for name, (rate, burst) in limits.items():
            if not rate > 0 or not math.isfinite(rate) or not math.isfinite(burst):
                raise ValueError(f"{name}: the rate must be a positive number")
            if burst < least:
                raise ValueError(
                    f"{name}: the burst ({burst:g}) must be at least LOC_MAX_QUERY_COST, "
                    "LOC_BUDGET_MUTATION_COST and LOC_BUDGET_NEW_DOCUMENT_COST "
                    f"({least}), or such an operation is never admitted"
                )
        if any(not client for client in self.budget_overrides):
            raise ValueError("LOC_BUDGET_OVERRIDES: a client id is empty")

    @property
    def document_policy(self) -> Policy:
        if self.documents is not None:
            return self.documents
        return "trusted-for-customers" if self.env == "prod" else "any"

    @property
    def status_layout(self) -> StatusLayout:
        return StatusLayout(self.gsi2_shards, self.gsi2_read_shards)

    @property
    def uses_embedded_dynamodb(self) -> bool:
        """True when the service starts DynamoDB Local itself: `local` without an endpoint."""
        return self.env == "local" and self.dynamodb_endpoint is None

    @property
    def creates_missing_table(self) -> bool:
        # Elsewhere the table belongs to the infrastructure, and a typo must fail, not create.
        return self.env == "local"

    @property
    def public_webhook_targets_only(self) -> bool:
        """Receivers must be https on public addresses wherever the service runs on AWS (`test`
        too: a receiver's answer is shown to its caller, so an internal address would be read
        through it); in `local`, and where a test loosens it, loopback and http serve."""
        return self.env != "local" and not self.webhook_allow_private_targets

    @property
    def production(self) -> bool:
        """prod: no introspection, GraphiQL, GET queries or request accounting."""
        return self.env == "prod"

    @property
    def debug_dynamodb_header_allowed(self) -> bool:
        return self.env != "prod"

    @property
    def uses_development_jwt_secret(self) -> bool:
        secret = self.auth_jwt_secret
        return secret is not None and secret.get_secret_value() == DEV_JWT_SECRET

    def dynamo_config(self, endpoint_url: str | None = None) -> DynamoConfig:
        """How the datasource reaches the table.

        `endpoint_url` (the embedded DynamoDB's, known only once it runs) wins over
        `dynamodb_endpoint`. In `local` the credentials are the fixed `testkey` pair: botocore
        signs every request and so needs some, local never talks to AWS, and DynamoDB Local
        refuses keys with `_` or `-`. Elsewhere the standard AWS credential chain applies.
        """
        credentials = LOCAL_AWS_CREDENTIALS if self.env == "local" else {}
        return DynamoConfig(
            table_name=self.table_name,
            region=self.region,
            endpoint_url=endpoint_url or self.dynamodb_endpoint,
            max_pool_connections=self.dynamodb_max_pool_connections,
            connect_timeout=self.dynamodb_connect_timeout,
            read_timeout=self.dynamodb_read_timeout,
            max_attempts=self.dynamodb_max_attempts,
            retry_mode=self.dynamodb_retry_mode,
            breaker_failures=self.dynamodb_breaker_failures,
            breaker_probe_interval=self.dynamodb_breaker_probe_interval,
            coalesce_lookups=self.dynamodb_coalesce_lookups,
            operation_log=self.aws_operation_log,
            **credentials,
        )
