"""A context variable set for a block and reset after it, as a small class: every operation
enters two of these (its call count, its time budget) and every coalesced call one, where a
`contextlib.contextmanager` generator costs several times more to enter and leave."""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Generic, TypeVar

__all__ = ["Scoped"]

V = TypeVar("V")


class Scoped(Generic[V]):
    """`var` holds `value` inside the block (and in tasks started there, which copy the
    context); `with` gives `value`."""

    __slots__ = ("_token", "_value", "_var")

    def __init__(self, var: ContextVar[V | None], value: V) -> None:
        self._var = var
        self._value = value

    def __enter__(self) -> V:
        self._token: Token[V | None] = self._var.set(self._value)
        return self._value

    def __exit__(self, *_: object) -> None:
        self._var.reset(self._token)
