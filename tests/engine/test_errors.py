"""What the engine raises is one tree (`engine.errors`): a caller catches `RequestError` for
every request refused before it runs, `EngineError` for anything; the request errors a run can
meet are also the ones Strawberry's views catch around `Schema.execute`, which answer them as
Strawberry answers its own."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import httpx
import pytest
import strawberry
from strawberry.asgi import GraphQL
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

import engine
from engine import (
    DocumentPolicy,
    DocumentRefused,
    EngineError,
    MalformedDocumentRequest,
    MissingQuery,
    NoSuchOperation,
    OperationRunner,
    OperationTypeNotAllowed,
    RequestError,
    UntestedStrawberry,
    check_version,
    compile_operation,
    graphql_schema,
)
from tests.engine.test_engine import QUERIES, Cat, Dog, Mutation, Query, documents, runner
from tests.engine.test_engine import text_for as text_of

TWO_OPERATIONS = "query A { __typename } query B { __typename }"


async def refused(
    query: str | None,
    *,
    operation_name: str | None = None,
    allowed: Iterable[OperationType] = QUERIES,
) -> EngineError:
    with pytest.raises(EngineError) as raised:
        await runner().run(
            query, variables=None, context=None, operation_name=operation_name, allowed=allowed
        )
    return raised.value


def refused_text(**request: Any) -> RequestError:
    with pytest.raises(RequestError) as raised:
        text_of(documents(DocumentPolicy.TRUSTED), **request)
    return raised.value


async def test_every_request_refused_before_it_runs_is_a_request_error() -> None:
    missing = await refused(None)
    unknown = await refused(TWO_OPERATIONS, operation_name="C")
    mutation = await refused('mutation { shout(text: "a") }', allowed=[OperationType.QUERY])
    not_trusted = refused_text(query="{ __typename }", is_service=True)
    malformed = refused_text(document_id="echo-1", query="{ __typename }")

    assert [type(error) for error in (missing, unknown, mutation)] == [
        MissingQuery,
        NoSuchOperation,
        OperationTypeNotAllowed,
    ]
    assert isinstance(not_trusted, DocumentRefused) and not_trusted.code == "DOCUMENT_NOT_TRUSTED"
    assert isinstance(malformed, MalformedDocumentRequest)
    assert isinstance(unknown, NoSuchOperation)
    assert unknown.as_http_error_reason() == 'Unknown operation named "C".'
    assert isinstance(mutation, OperationTypeNotAllowed)
    assert mutation.as_http_error_reason("GET") == "mutations are not allowed when using GET"


def test_what_stops_a_start_is_an_engine_error_too() -> None:
    with pytest.raises(EngineError) as raised:
        check_version("0.0.1")
    assert isinstance(raised.value, UntestedStrawberry) and isinstance(raised.value, RuntimeError)
    assert "0.0.1" in str(raised.value)


def test_every_exception_the_engine_exports_is_in_its_tree() -> None:
    exported = [getattr(engine, name) for name in engine.__all__]
    errors = {
        value for value in exported if isinstance(value, type) and issubclass(value, Exception)
    }
    assert {MissingQuery, DocumentRefused, UntestedStrawberry} < errors
    assert {error for error in errors if not issubclass(error, EngineError)} == set()


class RunByTheEngine(strawberry.Schema):
    """The engine's test schema behind Strawberry's own view, its operations run by the engine."""

    def __init__(self) -> None:
        super().__init__(query=Query, mutation=Mutation, types=[Dog, Cat])
        self.runner: OperationRunner[Any] = OperationRunner(
            graphql_schema(self), compile_operation=functools.partial(compile_operation, self)
        )

    async def execute(
        self,
        query: str | None,
        variable_values: dict[str, Any] | None = None,
        context_value: Any | None = None,
        root_value: Any | None = None,
        operation_name: str | None = None,
        allowed_operation_types: Iterable[OperationType] | None = None,
        operation_extensions: dict[str, Any] | None = None,
    ) -> ExecutionResult:
        return await self.runner.run(
            query,
            variables=variable_values,
            context=context_value,
            operation_name=operation_name,
            allowed=allowed_operation_types or QUERIES,
        )


async def test_strawberrys_view_answers_the_engines_request_errors_with_400() -> None:
    view = GraphQL[None, None](RunByTheEngine())
    transport = httpx.ASGITransport(app=view)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        answered = await client.post("/", json={"query": "{ __typename }"})
        unknown = await client.post("/", json={"query": TWO_OPERATIONS, "operationName": "C"})
        mutation = await client.get("/", params={"query": 'mutation { shout(text: "a") }'})

    assert (answered.status_code, answered.json()) == (200, {"data": {"__typename": "Query"}})
    assert (unknown.status_code, unknown.text) == (400, 'Unknown operation named "C".')
    assert mutation.status_code == 400
    assert mutation.text == "mutations are not allowed when using GET"
