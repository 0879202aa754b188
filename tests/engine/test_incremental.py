"""`@defer` and `@stream` in the engine (`engine.incremental`, `OperationRunner.run_in_parts`), on
a tiny schema of its own: a plan reads past them (the plain answer, for a client that reads one
body) and says once per document that they are there; the parts run inside the operation's one
scope (its deadline) from the first to the last; the operation is observed once, when its last
part is taken; a client that goes away cancels what is left."""

from __future__ import annotations

import asyncio
import functools
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import pytest
import strawberry
from graphql import GraphQLSchema, parse, specified_directives
from strawberry.types.execution import PreExecutionError
from strawberry.types.graphql import OperationType

from engine import (
    INCREMENTAL_DIRECTIVES,
    Extensions,
    Hooks,
    Merged,
    Observed,
    OperationRunner,
    Parts,
    compile_operation,
    graphql_schema,
)

QUERIES = [OperationType.QUERY]
SCOPE: ContextVar[str | None] = ContextVar("scope", default=None)


class Slow:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False


@strawberry.type
class Query:
    @strawberry.field
    def fast(self) -> str:
        return "fast"

    @strawberry.field
    async def scoped(self) -> str | None:
        await asyncio.sleep(0)
        return SCOPE.get()

    @strawberry.field
    async def slow(self, info: strawberry.Info) -> str:
        slow: Slow = info.context
        slow.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            slow.cancelled = True
            raise
        return "never"

    @strawberry.field
    def numbers(self) -> list[int]:
        return list(range(7))


SCHEMA = strawberry.Schema(query=Query)
_BUILT = graphql_schema(SCHEMA)
SERVED = GraphQLSchema(
    query=_BUILT.query_type, directives=(*specified_directives, *INCREMENTAL_DIRECTIVES)
)


@contextmanager
def scope(context: object) -> Iterator[Extensions]:
    token = SCOPE.set("in scope")
    try:
        yield lambda: {"scope": "closed"}
    finally:
        SCOPE.reset(token)


def runner(observed: list[Observed[Any]]) -> OperationRunner[Any]:
    return OperationRunner(
        SERVED,
        compile_operation=functools.partial(compile_operation, SCHEMA, served=SERVED),
        hooks=Hooks(scope=scope, observers=[observed.append]),
    )


async def in_parts(engine: OperationRunner[Any], query: str, context: Any = None) -> Any:
    return await engine.run_in_parts(
        query, variables=None, context=context, operation_name=None, allowed=QUERIES
    )


def test_a_plan_reads_past_the_directives_and_says_once_they_are_there() -> None:
    document = "{ fast ... @defer { scoped } numbers @stream(initialCount: 2) }"

    plan = compile_operation(SCHEMA, parse(document), None, served=SERVED)
    plain = compile_operation(SCHEMA, parse("{ fast scoped numbers }"), None, served=SERVED)

    assert plan.covered and plan.incremental
    assert plain.covered and not plain.incremental


async def test_an_operation_without_them_is_answered_whole() -> None:
    observed: list[Observed[Any]] = []

    result = await in_parts(runner(observed), "{ fast numbers }")

    assert not isinstance(result, Parts)
    assert result.data == {"fast": "fast", "numbers": list(range(7))}
    assert len(observed) == 1


async def test_the_parts_run_in_one_scope_and_are_observed_when_the_last_is_taken() -> None:
    observed: list[Observed[Any]] = []

    parts = await in_parts(
        runner(observed), "{ fast ... @defer { scoped } numbers @stream(initialCount: 2) }"
    )

    assert isinstance(parts, Parts)
    assert parts.first["data"] == {"fast": "fast", "numbers": [0, 1]}
    assert observed == []
    later = [payload async for payload in parts.rest()]
    merged = Merged(parts.first)
    for payload in later:
        merged.apply(payload)
    # The deferred field ran inside the operation's scope, after the first part was made.
    assert merged.data == {"fast": "fast", "scoped": "in scope", "numbers": list(range(7))}
    assert later[-1]["hasNext"] is False
    assert later[-1]["extensions"] == {"scope": "closed"}
    assert len(observed) == 1 and observed[0].errors == []


async def test_a_client_that_goes_away_cancels_what_is_left() -> None:
    observed: list[Observed[Any]] = []
    slow = Slow()

    parts = await in_parts(runner(observed), "{ fast ... @defer { slow } }", slow)
    assert isinstance(parts, Parts)
    await asyncio.wait_for(slow.started.wait(), 5)
    await parts.aclose()

    assert slow.cancelled
    assert len(observed) == 1


@pytest.mark.parametrize(
    "query",
    [
        "{ numbers @stream(initialCount: -1) }",
        '{ ... @defer(label: "a") { fast } ... @defer(label: "a") { scoped } }',
        "{ fast @stream }",
    ],
)
async def test_misplaced_directives_are_refused_before_anything_runs(query: str) -> None:
    observed: list[Observed[Any]] = []

    result = await in_parts(runner(observed), query)

    assert not isinstance(result, Parts)
    assert result.errors and result.data is None


@pytest.mark.parametrize("in_parts_too", [False, True])
async def test_a_negative_initial_count_from_a_variable_is_refused_before_it_runs(
    in_parts_too: bool,
) -> None:
    engine = runner([])
    query = "query($n: Int) { numbers @stream(initialCount: $n) }"

    def ask(count: int) -> Any:
        if in_parts_too:
            return engine.run_in_parts(
                query, variables={"n": count}, context=None, operation_name=None, allowed=QUERIES
            )
        return engine.run(
            query, variables={"n": count}, context=None, operation_name=None, allowed=QUERIES
        )

    refused = await ask(-1)
    answered = await ask(2)

    assert isinstance(refused, PreExecutionError)
    assert refused.errors and "initialCount must not be negative" in refused.errors[0].message
    first = answered.first if isinstance(answered, Parts) else {"data": answered.data}
    assert first["data"]["numbers"][:2] == [0, 1]
    if isinstance(answered, Parts):
        await answered.aclose()


class Broken(Exception):
    pass


def _fail(*_: object) -> None:
    raise Broken


@contextmanager
def failing_scope(context: object) -> Iterator[Extensions]:
    def extensions() -> dict[str, Any] | None:
        raise Broken

    yield extensions


async def test_an_unexpected_failure_before_the_first_part_is_raised_not_waited_on() -> None:
    engine = OperationRunner(
        SERVED,
        compile_operation=functools.partial(compile_operation, SCHEMA, served=SERVED),
        hooks=Hooks(before=_fail),
    )

    with pytest.raises(Broken):
        await asyncio.wait_for(in_parts(engine, "{ fast ... @defer { scoped } }"), 5)


async def test_an_unexpected_failure_after_the_first_part_ends_the_rest() -> None:
    engine = OperationRunner(
        SERVED,
        compile_operation=functools.partial(compile_operation, SCHEMA, served=SERVED),
        hooks=Hooks(scope=failing_scope),
    )
    parts = await in_parts(engine, "{ fast ... @defer { scoped } }")
    assert isinstance(parts, Parts)

    with pytest.raises(Broken):
        await asyncio.wait_for(_drain(parts), 5)


async def _drain(parts: Parts) -> None:
    async for _ in parts.rest():
        pass


async def test_parts_dropped_unread_cancel_what_is_left() -> None:
    slow = Slow()
    parts = await in_parts(runner([]), "{ fast ... @defer { slow } }", slow)
    assert isinstance(parts, Parts)
    await asyncio.wait_for(slow.started.wait(), 5)

    del parts  # an answer whose body was never written
    gc.collect()
    for _ in range(5):  # the cancellation reaches the deferred field in a few turns of the loop
        await asyncio.sleep(0)

    assert slow.cancelled
