"""Which fields of Payment a query reads: its lists read only those (a DynamoDB projection),
and convert only those (`datasource.items.StoredPayment`).

From the schema coordinates the operation's document selects (`engine.usage`: every selection,
through fragments, whatever `@include` and `@skip` decide, so a superset of what one run reads),
computed once a document. A field of `Payment` reads the field of the domain's `Payment` of the
same name, but for those below; a field not known here reads the whole payment, so a field added
to the schema is never answered from a payment read in part. Mutations and subscriptions read in
full: what they write or announce is read for more than the document selects.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from typing import Any

from strawberry.types.graphql import OperationType

from domain.payment import Payment
from resolvers.context import Context

__all__ = ["payment_fields", "read_only_selected"]

_PAYMENT_FIELDS = frozenset(field.name for field in dataclasses.fields(Payment))
# Fields of the GraphQL Payment whose resolvers read other fields than their name's: the ids
# are always read (they name the payment). None: the whole payment (rules over many fields).
_READS: dict[str, frozenset[str] | None] = {
    "__typename": frozenset(),
    "id": frozenset(),
    "loan": frozenset(),
    "history": frozenset({"history_from"}),
    "allowedTransitions": None,
    "retryEligibility": None,
}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@functools.lru_cache(maxsize=1024)
def payment_fields(selected: frozenset[str]) -> frozenset[str] | None:
    """The fields of Payment that the coordinates `selected` read; None: every field."""
    fields: set[str] = set()
    for coordinate in selected:
        type_name, _, name = coordinate.partition(".")
        if type_name != "Payment" or "(" in name:  # an argument's coordinate: its field's there
            continue
        reads = _READS.get(name, frozenset({_snake(name)}))
        if reads is None or not reads <= _PAYMENT_FIELDS:
            return None
        fields |= reads
    return frozenset(fields)


def read_only_selected(
    context: Any, operation_type: OperationType, selected: Callable[[], frozenset[str]]
) -> None:
    """An `OperationHook`: a query's lists read only the fields of Payment it selects."""
    if operation_type is not OperationType.QUERY or not isinstance(context, Context):
        return
    fields = payment_fields(selected())
    if fields is not None:
        context.loaders.read_only(fields)
