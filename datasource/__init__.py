"""The only code that talks to DynamoDB."""

from datasource.accounting import CallCount, count_calls
from datasource.config import DynamoConfig
from datasource.pages import Edge, Page
from datasource.store import PaymentStore, open_store

__all__ = ["CallCount", "DynamoConfig", "Edge", "Page", "PaymentStore", "count_calls", "open_store"]
