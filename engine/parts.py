"""An answer in parts as the runner hands it over (`OperationRunner.run_in_parts`): one task
makes the parts (`send_parts`, from graphql-core's incremental results) into a queue of one,
and its reader takes them from `Parts`. A reader that leaves early, or drops `Parts` unread,
cancels what is left; a failure of the task is raised to its reader, never waited on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from graphql import GraphQLError
from graphql.execution import ExperimentalIncrementalExecutionResults
from strawberry.types import ExecutionResult

from engine.incremental import Merged

__all__ = ["Part", "PartErrors", "Parts", "handing_over_failure", "send_parts"]


@dataclass
class Part(ExecutionResult):
    """One part of an answer in parts (`OperationRunner.stream`), its `payload` as the protocol
    sends it."""

    payload: dict[str, Any] = field(default_factory=dict)


class Parts:
    """An operation answered in parts: `first`, the first payload, then `rest()`, each later one
    as it is made, in graphql-js 17's format (`engine.incremental`). Leaving `rest` before its
    end (a client that went away) cancels what is left of the operation."""

    def __init__(
        self, first: dict[str, Any], queue: asyncio.Queue[object], task: asyncio.Task[None]
    ) -> None:
        self.first = first
        self._queue = queue
        self._task = task

    async def rest(self) -> AsyncGenerator[dict[str, Any], None]:
        queue = self._queue
        try:
            has_next = bool(self.first.get("hasNext"))
            while has_next:
                payload = await queue.get()
                if isinstance(payload, BaseException):  # the operation failed unexpectedly
                    queue.task_done()
                    raise payload
                assert isinstance(payload, dict)
                has_next = bool(payload.get("hasNext"))
                try:
                    yield payload
                finally:
                    queue.task_done()  # sent (or abandoned): the operation may end
            await self._task
        finally:
            if not self._task.done():
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task

    def __del__(self) -> None:
        # Dropped unread (an answer whose body was never written: its client went away first),
        # what is left would wait for ever to hand over its next part.
        if not self._task.done():
            self._task.cancel()

    async def aclose(self) -> None:
        """Cancel what is left (a client gone before `rest` was read)."""
        if not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@dataclass(slots=True)
class PartErrors:
    """The errors of an operation's parts so far: as made (for its trace) and as `words` puts
    them for its caller (for its observers)."""

    words: Callable[[Sequence[GraphQLError]], list[GraphQLError]]
    errors: list[GraphQLError] = field(default_factory=list)
    public: list[GraphQLError] = field(default_factory=list)

    def formatted(self, errors: Sequence[GraphQLError] | None) -> list[Any]:
        if not errors:
            return []
        public = self.words(errors)
        self.errors += errors
        self.public += public
        return [error.formatted for error in public]


async def send_parts(
    answered: ExperimentalIncrementalExecutionResults,
    opening: dict[str, Any] | None,
    closing: Callable[[Any], dict[str, Any]],
    errors: PartErrors,
    out: asyncio.Queue[object],
) -> None:
    """Each part's payload put in `out` as graphql-core gives it, its errors worded for the
    caller: the first with `opening` as its extensions, the last with `closing` of the data all
    the parts gave. Returns once the last part is taken and sent (`Parts.rest`)."""
    initial = answered.initial_result
    first: dict[str, Any] = {"data": initial.data}
    if initial.errors:
        first["errors"] = errors.formatted(initial.errors)
    first["pending"] = [pending.formatted for pending in initial.pending]
    first["hasNext"] = initial.has_next
    if opening:
        first["extensions"] = opening
    merged = Merged(first)
    await out.put(first)
    subsequent = answered.subsequent_results
    try:
        has_next = initial.has_next
        while has_next:
            later = await anext(subsequent)
            payload: dict[str, Any] = {"hasNext": later.has_next}
            if later.pending:
                payload["pending"] = [pending.formatted for pending in later.pending]
            if later.incremental:
                payload["incremental"] = [
                    _part(entry, errors.formatted(entry.errors)) for entry in later.incremental
                ]
            if later.completed:
                payload["completed"] = [
                    _completed(done.id, errors.formatted(done.errors)) for done in later.completed
                ]
            merged.apply(payload)
            has_next = later.has_next
            if not has_next:
                payload["extensions"] = closing(merged.data)
            await out.put(payload)
        await out.join()  # the last part sent
    finally:
        await subsequent.aclose()


async def handing_over_failure(produce: Awaitable[None], out: asyncio.Queue[object]) -> None:
    """`produce`, whose unexpected failure is put in `out` for its reader to raise (it would
    otherwise wait for a part that never comes)."""
    try:
        await produce
    except Exception as error:
        await out.put(error)


def _part(entry: Any, errors: list[Any]) -> dict[str, Any]:
    formatted: dict[str, Any] = entry.formatted
    part = {key: value for key, value in formatted.items() if key != "errors"}
    if errors:
        part["errors"] = errors
    return part


def _completed(part_id: str, errors: list[Any]) -> dict[str, Any]:
    return {"id": part_id, "errors": errors} if errors else {"id": part_id}
