"""moto's models freed when moto drops them, as in any program.

moto keeps every model instance it ever makes in a class-level list, for its dashboard
(`moto.core.model_instances`): every table, index and item, and every deep copy of a table that
a TransactWriteItems takes to roll back by. Tests delete their tables, but the list kept them,
and every copy: a run of the API and security tests ended holding 3,435 tables and 1.1 million
attribute values, and the collector's full passes over them stalled the test process (moto's
server threads and the app alike) for seconds at a time. No test reads the dashboard.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from moto.core.common_models import BaseModel


def _untracked_new(cls: type[BaseModel], *args: Any, **kwargs: Any) -> BaseModel:
    # `BaseModel.__new__` without its bookkeeping: no list keeps the instance.
    return object.__new__(cls)


@contextmanager
def models_untracked() -> Iterator[None]:
    """moto models made inside the block are kept by moto's own state alone."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BaseModel, "__new__", staticmethod(_untracked_new))
        yield
