"""The only code that talks to the stores: DynamoDB and the Redis broker. Outside this package
and its tests, it is entered only here: the names below are what the service, the jobs, the
harness and the bench may use; its modules may change without them noticing."""

from datasource.accounting import (
    READ_OPERATIONS,
    WRITE_OPERATIONS,
    CallCount,
    count_calls,
    counting,
)
from datasource.batch import BATCH_SIZE
from datasource.breaker import CircuitBreaker
from datasource.client import open_client, open_streams_client
from datasource.config import DynamoConfig
from datasource.cursors import CursorCodec, ListScope
from datasource.deadline import current_deadline, storage_budget
from datasource.errors import LeaseLost, SinkRefused
from datasource.events import settled_before
from datasource.history import HistoryPage, event_from_item, event_item
from datasource.items import (
    Item,
    ProjectedPayment,
    primary_key,
    projected_attributes,
    stored_attribute,
    to_item,
)
from datasource.layouts import CLOCK_MARGIN_SECONDS, switch_at
from datasource.live_broker import Entry, RedisBroker, open_live_broker
from datasource.pages import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, EdgeOf, Page, PageOf, read_limit
from datasource.permissions import (
    COLLECT_JOB,
    LOCAL_SETUP,
    RESHARD_JOB,
    SERVICE,
    SERVICE_GRANTS,
    STREAM,
    TABLE,
    Grant,
    Operation,
    acting_as,
    granted,
    operations_of,
    required,
)
from datasource.retries import Throttles
from datasource.shards import Placed
from datasource.shared_budgets import SharedBudgets, open_shared_budgets
from datasource.status_groups import GroupPage, StatusPosition
from datasource.store import PaymentStore, loan_query, open_store, status_query
from datasource.streams import DynamoDBStreamSource, Received, ShardPosition
from datasource.subscription_slots import KEY_PREFIX, SharedSlots, open_shared_slots
from datasource.table import (
    GSI1,
    GSI1PK,
    GSI2,
    GSI2PK,
    GSI2SK,
    GSI3,
    GSI3PK,
    GSI4,
    GSI4PK,
    GSI4SK,
    PK,
    SK,
    TTL_ATTRIBUTE,
    cloudformation_template,
    create_table_if_missing,
    page_key_attributes,
    table_definition,
    time_to_live,
)
from datasource.tracing import (
    NO_SPAN,
    PROPAGATOR,
    CurrentSpan,
    internal_span,
    traceparent_of,
    write_link,
)
from datasource.webhooks import (
    Commit,
    DueRetry,
    EndpointState,
    WebhookStore,
    WrittenPlainly,
    delivery_item,
    retry_item,
)

__all__ = [
    "BATCH_SIZE",
    "CLOCK_MARGIN_SECONDS",
    "COLLECT_JOB",
    "DEFAULT_PAGE_SIZE",
    "GSI1",
    "GSI1PK",
    "GSI2",
    "GSI2PK",
    "GSI2SK",
    "GSI3",
    "GSI3PK",
    "GSI4",
    "GSI4PK",
    "GSI4SK",
    "KEY_PREFIX",
    "LOCAL_SETUP",
    "MAX_PAGE_SIZE",
    "NO_SPAN",
    "PK",
    "PROPAGATOR",
    "READ_OPERATIONS",
    "RESHARD_JOB",
    "SERVICE",
    "SERVICE_GRANTS",
    "SK",
    "STREAM",
    "TABLE",
    "TTL_ATTRIBUTE",
    "WRITE_OPERATIONS",
    "CallCount",
    "CircuitBreaker",
    "Commit",
    "CurrentSpan",
    "CursorCodec",
    "DueRetry",
    "DynamoConfig",
    "DynamoDBStreamSource",
    "EdgeOf",
    "EndpointState",
    "Entry",
    "Grant",
    "GroupPage",
    "HistoryPage",
    "Item",
    "LeaseLost",
    "ListScope",
    "Operation",
    "Page",
    "PageOf",
    "PaymentStore",
    "Placed",
    "ProjectedPayment",
    "Received",
    "RedisBroker",
    "ShardPosition",
    "SharedBudgets",
    "SharedSlots",
    "SinkRefused",
    "StatusPosition",
    "Throttles",
    "WebhookStore",
    "WrittenPlainly",
    "acting_as",
    "cloudformation_template",
    "count_calls",
    "counting",
    "create_table_if_missing",
    "current_deadline",
    "delivery_item",
    "event_from_item",
    "event_item",
    "granted",
    "internal_span",
    "loan_query",
    "open_client",
    "open_live_broker",
    "open_shared_budgets",
    "open_shared_slots",
    "open_store",
    "open_streams_client",
    "operations_of",
    "page_key_attributes",
    "primary_key",
    "projected_attributes",
    "read_limit",
    "required",
    "retry_item",
    "settled_before",
    "status_query",
    "storage_budget",
    "stored_attribute",
    "switch_at",
    "table_definition",
    "time_to_live",
    "to_item",
    "traceparent_of",
    "write_link",
]
