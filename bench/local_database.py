"""DynamoDB Local for the bench's passes: a JVM of each pass's own, or one for a whole run.

`make bench` starts one per pass (each measured on a database nothing else has loaded). The smoke
test's miniature run (`python -m bench --quick`) enters `shared()` once and every pass after the
engine's and the local pass's uses that one (issue 65: each start cost about 2.5 s and 1.9 s of
CPU, eleven of them). Passes name their tables uniquely (`table`), so sharing changes nothing they
read.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from process.embedded_dynamodb import EmbeddedDynamoDB

__all__ = ["dynamodb", "shared", "table"]

SHARED_HEAP = "512m"

_shared: list[str] = []


@contextlib.contextmanager
def shared() -> Iterator[str]:
    """One DynamoDB Local that `dynamodb()` hands to every pass until this context ends."""
    with EmbeddedDynamoDB(data_dir=None, heap=SHARED_HEAP) as database:
        _shared.append(database.endpoint_url)
        try:
            yield database.endpoint_url
        finally:
            _shared.pop()


@contextlib.contextmanager
def dynamodb() -> Iterator[str]:
    """The endpoint of a DynamoDB Local for one pass: the shared one if a run entered `shared()`,
    else one started for the pass and stopped after it."""
    if _shared:
        yield _shared[-1]
        return
    with EmbeddedDynamoDB(data_dir=None) as database:
        yield database.endpoint_url


def table(stem: str) -> str:
    """A table name of `stem` no other pass uses."""
    return f"{stem}-{uuid.uuid4().hex[:12]}"
