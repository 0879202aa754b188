"""Request accounting (SPEC §8): how many DynamoDB API calls one GraphQL operation made.

``count_calls`` puts a ``CallCount`` in a context variable; the store's client has one botocore
``before-call`` hook that adds to it. botocore emits that event once per API call, before its own
retry loop, so a retried call counts once. Tasks created inside the ``with`` copy the context and
so share the same ``CallCount``: a DataLoader's batch counts toward the request that caused it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

# botocore's hierarchical event names: every operation of the dynamodb service.
BEFORE_CALL_EVENT = "before-call.dynamodb"
AFTER_CALL_EVENT = "after-call.dynamodb"
ACCOUNTING_HOOK_ID = "loc-payments-request-accounting"


@dataclass(slots=True)
class CallCount:
    requests: int = 0
    operations: dict[str, int] = field(default_factory=dict)
    # (API name, "ok" or DynamoDB's error code) -> answers; a call with no answer (a lost
    # connection) is in `operations` and not here.
    outcomes: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, operation: str) -> None:
        self.requests += 1
        self.operations[operation] = self.operations.get(operation, 0) + 1

    def answered(self, operation: str, outcome: str) -> None:
        key = (operation, outcome)
        self.outcomes[key] = self.outcomes.get(key, 0) + 1


_current: ContextVar[CallCount | None] = ContextVar("dynamodb_call_count", default=None)


@contextmanager
def count_calls() -> Iterator[CallCount]:
    """Count the DynamoDB calls made inside the block (and in tasks it starts)."""
    count = CallCount()
    token = _current.set(count)
    try:
        yield count
    finally:
        _current.reset(token)


def record_call(model: Any, **_: Any) -> None:
    """The botocore hook; ``model`` is the operation model, its ``name`` e.g. ``BatchGetItem``."""
    count = _current.get()
    if count is not None:
        count.add(str(model.name))


def record_answer(model: Any, http_response: Any = None, parsed: Any = None, **_: Any) -> None:
    """The botocore hook after a call's final answer (after its retries): "ok" or the error code."""
    count = _current.get()
    if count is None:
        return
    error = (parsed or {}).get("Error", {}) if isinstance(parsed, dict) else {}
    status = getattr(http_response, "status_code", 200)
    outcome = "ok" if status < 400 else str(error.get("Code") or status)
    count.answered(str(model.name), outcome)
