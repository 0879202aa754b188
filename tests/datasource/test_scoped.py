"""`Scoped`: the context variable of the call count and the time budget, set for a block."""

from __future__ import annotations

import asyncio
from contextvars import ContextVar

import pytest

from datasource.scoped import Scoped

VALUE: ContextVar[str | None] = ContextVar("test_scoped", default=None)


async def test_a_block_sets_the_value_for_itself_and_its_tasks_and_restores_the_one_before() -> (
    None
):
    with Scoped(VALUE, "outer") as outer:
        assert (outer, VALUE.get()) == ("outer", "outer")
        with Scoped(VALUE, "inner"):
            assert await asyncio.create_task(_read()) == "inner"
        assert VALUE.get() == "outer"
    assert VALUE.get() is None


def test_a_block_left_by_an_exception_restores_the_value() -> None:
    with pytest.raises(RuntimeError), Scoped(VALUE, "failing"):
        raise RuntimeError("out")
    assert VALUE.get() is None


async def _read() -> str | None:
    return VALUE.get()
