"""What a store's client sends while its breaker refuses calls: for the tests that an open
breaker refuses a call before anything goes out (test_breaker, test_coalesce), without timing it.

botocore's public `before-send` event sees every request about to leave. The breaker's probe,
which an open breaker lets through, is left out: `CircuitBreaker.refuses()` is false in its task.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from datasource import PaymentStore

_EVENT = "before-send.dynamodb"
_HANDLER_ID = "tests-sent-while-refusing"


@contextlib.contextmanager
def sends_counted(store: PaymentStore) -> Iterator[list[str]]:
    """The operations (`DynamoDB_20120810.GetItem`, …) sent inside the block by anything but
    the probe while the breaker refused calls."""
    breaker = store.breaker
    assert breaker is not None, "the store has no breaker"
    sent: list[str] = []

    def record(request: Any, **_: Any) -> None:
        if breaker.refuses():
            sent.append(request.headers.get("X-Amz-Target", b"").decode() or request.url)

    events = store.client.meta.events
    events.register(_EVENT, record, unique_id=_HANDLER_ID)
    try:
        yield sent
    finally:
        events.unregister(_EVENT, unique_id=_HANDLER_ID)
