"""The only code that talks to the stores: DynamoDB and the Redis broker."""

from datasource.accounting import CallCount, count_calls
from datasource.config import DynamoConfig
from datasource.history import HistoryPage
from datasource.items import ProjectedPayment, stored_attribute
from datasource.pages import Page, PageOf
from datasource.status_groups import GroupPage, StatusPosition
from datasource.store import PaymentStore, open_store

__all__ = [
    "CallCount",
    "DynamoConfig",
    "GroupPage",
    "HistoryPage",
    "Page",
    "PageOf",
    "PaymentStore",
    "ProjectedPayment",
    "StatusPosition",
    "count_calls",
    "open_store",
    "stored_attribute",
]
