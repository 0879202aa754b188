"""The engine through its public API (`engine`), on a tiny Strawberry schema of its own, as
graphql-jit's tests run on small schemas: no DynamoDB, no payments. A compiled plan answers what
Strawberry's own `execute` answers; limits and the document policy refuse before anything runs;
the hooks see what a service would."""

from __future__ import annotations

import asyncio
import functools
import gc
import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from typing import Annotated, Any

import pytest
import strawberry
from graphql import DocumentNode, GraphQLError, parse
from strawberry.types.execution import PreExecutionError
from strawberry.types.graphql import OperationType

from engine import (
    DocumentPolicy,
    DocumentRefused,
    Documents,
    Extensions,
    Hooks,
    MalformedDocumentRequest,
    Observed,
    OperationRunner,
    QueryLimits,
    Refusal,
    TrustedDocument,
    TrustedDocuments,
    compile_operation,
    graphql_schema,
)

QUERIES = [OperationType.QUERY, OperationType.MUTATION]


@strawberry.enum
class Size(Enum):
    SMALL = "small"
    LARGE = "large"


@strawberry.interface
class Animal:
    name: str


@strawberry.type
class Dog(Animal):
    barks: bool
    size: Size


@strawberry.type
class Cat(Animal):
    lives: int


Pet = Annotated[Dog | Cat, strawberry.union("Pet")]


@strawberry.type
class Item:
    number: int


@strawberry.type
class Box:
    label: str | None

    @strawberry.field
    def inner(self) -> str:
        raise ValueError("no inner")

    @strawberry.field
    def maybe_inner(self) -> str | None:
        raise ValueError("no inner either")

    @strawberry.field
    def item(self) -> Item:
        return Item(number=1)


ANIMALS: list[Animal] = [
    Dog(name="Rex", barks=True, size=Size.LARGE),
    Cat(name="Tom", lives=9),
]


@strawberry.type
class Query:
    @strawberry.field
    def animals(self) -> list[Animal]:
        return ANIMALS

    @strawberry.field
    def pets(self) -> list[Pet]:
        return [Cat(name="Felix", lives=7), Dog(name="Fido", barks=False, size=Size.SMALL)]

    @strawberry.field
    def box(self) -> Box | None:
        return Box(label="a box")

    @strawberry.field
    def broken(self) -> str:
        raise ValueError("broken")

    @strawberry.field
    def echo(self, text: str, times: int = 1) -> str:
        return text * times

    @strawberry.field
    async def later(self, value: int) -> int:
        await asyncio.sleep(0)
        return value

    @strawberry.field
    def items(self, first: int | None = None, last: int | None = None) -> list[Item]:
        return [Item(number=n) for n in range(first or last or 3)]

    @strawberry.field
    def by_size(self, size: Size) -> list[str]:
        return [a.name for a in ANIMALS if isinstance(a, Dog) and a.size is size]


@strawberry.type
class Mutation:
    @strawberry.mutation
    def shout(self, text: str) -> str:
        return text.upper()


SCHEMA = strawberry.Schema(query=Query, mutation=Mutation, types=[Dog, Cat])
SERVED = graphql_schema(SCHEMA)


def runner(
    *,
    limits: QueryLimits | None = None,
    production: bool = False,
    hooks: Hooks[Any] | None = None,
) -> OperationRunner[Any]:
    return OperationRunner(
        SERVED,
        compile_operation=functools.partial(compile_operation, SCHEMA),
        limits=limits,
        production=production,
        hooks=hooks,
    )


async def run(
    engine: OperationRunner[Any],
    query: str,
    variables: dict[str, Any] | None = None,
    *,
    context: Any = None,
    operation_name: str | None = None,
) -> Any:
    return await engine.run(
        query,
        variables=variables,
        context=context,
        operation_name=operation_name,
        allowed=QUERIES,
    )


def answer(result: Any) -> dict[str, Any]:
    """A result as a client reads it: data, and each error's message and path."""
    errors = [{"message": e.message, "path": e.path} for e in result.errors or ()]
    return {"data": result.data, "errors": errors}


COVERED = {
    "fields and aliases": '{ a: echo(text: "x", times: 2) b: echo(text: "y") __typename }',
    "interfaces": "{ animals { __typename name ... on Dog { barks size } ... on Cat { lives } } }",
    "unions": "{ pets { __typename ... on Dog { name size } ... on Cat { lives } } }",
    "fragments": "query { animals { ...A } } fragment A on Animal { name ... on Cat { lives } }",
    "variables": "query($t: String!, $n: Int) { echo(text: $t, times: $n) }",
    "enums as arguments": "{ bySize(size: LARGE) }",
    "skip and include": "query($yes: Boolean!) { box { label @include(if: $yes) } "
    "animals @skip(if: $yes) { name } }",
    "async fields": "{ one: later(value: 1) two: later(value: 2) }",
    "null in the middle": "{ box { label maybeInner } }",
    "non-null error up to a nullable parent": "{ box { label inner } }",
    "non-null error up to the root": '{ echo(text: "x") broken }',
    "mutations": 'mutation { first: shout(text: "a") second: shout(text: "b") }',
}
VARIABLES = {"t": "hi", "n": 3, "yes": True}


@pytest.mark.parametrize("query", COVERED.values(), ids=COVERED.keys())
async def test_a_plan_covers_the_operation_and_answers_what_strawberry_answers(
    query: str,
) -> None:
    document = parse(query)
    variables = {k: v for k, v in VARIABLES.items() if f"${k}" in query}
    assert compile_operation(SCHEMA, document, None).covered
    expected = await SCHEMA.execute(query, variable_values=variables)

    assert answer(await run(runner(), query, variables)) == answer(expected)


async def test_a_non_null_field_that_fails_nulls_its_nearest_nullable_parent() -> None:
    result = await run(runner(), '{ box { label inner } echo(text: "x") }')

    assert result.data == {"box": None, "echo": "x"}
    assert [(e.message, e.path) for e in result.errors] == [("no inner", ["box", "inner"])]
    result = await run(runner(), '{ echo(text: "x") broken }')
    assert result.data is None


async def test_variables_that_do_not_coerce_refuse_the_operation_before_it_runs() -> None:
    result = await run(runner(), 'query($n: Int) { echo(text: "x", times: $n) }', {"n": "two"})

    assert isinstance(result, PreExecutionError) and result.data is None and result.errors
    assert "Int cannot represent" in result.errors[0].message


async def test_what_the_plans_do_not_cover_is_answered_by_graphql_core_alike() -> None:
    query = "{ __schema { queryType { name } } }"
    plan = compile_operation(SCHEMA, parse(query), None)

    assert not plan.covered and plan.fallback_reason
    assert answer(await run(runner(), query)) == answer(await SCHEMA.execute(query))


@pytest.mark.parametrize(
    ("limits", "query", "code"),
    [
        (QueryLimits(max_depth=2), "{ box { item { number } } animals { name } }", None),
        (
            QueryLimits(max_depth=1),
            "{ box { item { number } } }",
            "exceeds maximum operation depth",
        ),
        (QueryLimits(max_aliases=1), '{ a: echo(text: "x") b: echo(text: "y") }', "aliases"),
        (QueryLimits(max_tokens=5), '{ echo(text: "x") }', "more than 5 tokens"),
        (QueryLimits(max_cost=10), "{ items(first: 9) { number } }", None),
        (QueryLimits(max_cost=10), "{ items(first: 10) { number } }", "QUERY_TOO_COSTLY"),
        # Without `first` or `last`, a list costs as the default page: 1 + 20 x 1.
        (QueryLimits(max_cost=20), "{ items { number } }", "QUERY_TOO_COSTLY"),
        (QueryLimits(max_cost=20, default_page_size=5), "{ items { number } }", None),
        # A page larger than the largest costs as the largest.
        (QueryLimits(max_cost=10, max_page_size=5), "{ items(first: 50) { number } }", None),
    ],
)
async def test_limits_refuse_an_operation_before_any_field_runs(
    limits: QueryLimits, query: str, code: str | None
) -> None:
    calls: list[str] = []
    hooks: Hooks[Any] = Hooks(before=lambda context, kind, selected: calls.append("ran"))
    result = await run(runner(limits=limits, hooks=hooks), query)

    if code is None:
        assert result.errors is None and calls == ["ran"]
        return
    assert isinstance(result, PreExecutionError) and result.errors and calls == []
    error = result.errors[0]
    assert code in error.message or (error.extensions or {}).get("code") == code


async def test_a_cost_set_by_a_variable_is_counted_with_the_requests_value() -> None:
    engine = runner(limits=QueryLimits(max_cost=10))
    query = "query($n: Int) { items(first: $n) { number } }"

    assert (await run(engine, query, {"n": 9})).errors is None
    refused = await run(engine, query, {"n": 10})
    assert refused.errors[0].extensions == {"code": "QUERY_TOO_COSTLY", "cost": 11}


async def test_production_refuses_introspection_and_gives_no_hints() -> None:
    engine = runner(production=True)

    refused = await run(engine, "{ __schema { queryType { name } } }")
    assert "introspection" in refused.errors[0].message.lower()
    misspelt = await run(engine, "{ animal { name } }")
    assert "Did you mean" not in misspelt.errors[0].message
    assert "Did you mean" in (await run(runner(), "{ animal { name } }")).errors[0].message


async def test_the_hooks_see_each_operation_as_a_service_would() -> None:
    seen: dict[str, Any] = {"scopes": [], "traces": [], "logged": [], "observed": [], "before": []}

    @contextmanager
    def scope(context: dict[str, Any]) -> Iterator[Extensions]:
        seen["scopes"].append(context["id"])
        yield lambda: {"calls": 2}

    class Trace:
        def __init__(self, name: str | None) -> None:
            self.name = name

        def __enter__(self) -> None:
            return None

        def __exit__(self, *_: object) -> None:
            return None

        def end(self, errors: Sequence[GraphQLError]) -> None:
            seen["traces"].append((self.name, [e.message for e in errors]))

    def trace(
        context: object, document: DocumentNode | None, name: str | None, query: str, _: float
    ) -> Trace:
        return Trace(name)

    def public(error: GraphQLError) -> GraphQLError:
        return GraphQLError("masked", path=error.path, extensions={"code": "INTERNAL"})

    def observe(observed: Observed[Any]) -> None:
        seen["observed"].append((observed.operation, observed.fields))

    hooks: Hooks[dict[str, Any]] = Hooks(
        scope=scope,
        trace=trace,
        on_errors=lambda errors: seen["logged"].extend(e.message for e in errors),
        public_error=public,
        before=lambda context, kind, selected: seen["before"].append((kind, selected())),
        observers=[observe],
    )
    engine = runner(hooks=hooks)
    query = 'query Q { echo(text: "x") box { inner } }'
    result = await run(engine, query, context={"id": 7}, operation_name="Q")

    assert result.data == {"echo": "x", "box": None}
    assert [e.message for e in result.errors] == ["masked"]
    assert result.extensions == {"calls": 2}
    assert seen["scopes"] == [7]
    assert seen["traces"] == [("Q", ["no inner"])]  # the trace ends before errors are worded
    assert seen["logged"] == ["no inner"]
    coordinates = {"Query.echo", "Query.echo(text:)", "Query.box", "Box.inner"}
    assert seen["before"] == [(OperationType.QUERY, coordinates)]
    assert seen["observed"] == [("Q", coordinates)]


async def test_a_refusal_costs_no_more_than_its_answer() -> None:
    """An operation `admit` refuses (a flood of them is what budgets are for) enters no scope,
    runs no `before`, is observed with its error as made (not worded again), and leaves no
    reference cycle for the collector: its traceback held the frame that held it."""
    seen: dict[str, list[Any]] = {"scopes": [], "before": [], "worded": [], "observed": []}

    @contextmanager
    def scope(context: object) -> Iterator[Extensions]:
        seen["scopes"].append(context)
        yield lambda: None

    async def admit(context: object, kind: OperationType, cost: int) -> None:
        raise Refusal(GraphQLError("over budget", extensions={"code": "THROTTLED"}))

    def public(error: GraphQLError) -> GraphQLError:
        seen["worded"].append(error.message)
        return error

    engine = runner(
        hooks=Hooks(
            scope=scope,
            admit=admit,
            public_error=public,
            before=lambda context, kind, selected: seen["before"].append(kind),
            observers=[lambda observed: seen["observed"].extend(observed.errors)],
        )
    )
    with pytest.raises(Refusal):
        await run(engine, '{ echo(text: "x") }')  # its document prepared
    gc.collect()
    gc.disable()
    try:
        with pytest.raises(Refusal) as refused:
            await run(engine, '{ echo(text: "x") }')
        error = refused.value.error
        del refused
        assert gc.collect() == 0
    finally:
        gc.enable()

    assert seen["scopes"] == seen["before"] == seen["worded"] == []
    assert seen["observed"][-1] is error


@pytest.mark.parametrize(
    ("query", "refused"),
    [
        ('query($n: Int) { echo(text: "x") }', "Variable '$n' is never used."),
        ("{ echo(text: $t) }", "Variable '$t' is not defined."),
        (
            "query($t: Int) { echo(text: $t) }",
            "Variable '$t' of type 'Int' used in position expecting type 'String!'.",
        ),
        ("query($t: String!) { echo(text: $t) }", None),
        ('{ echo(text: "$5") }', None),
        ('{ echo(text: "x") }', None),
    ],
)
async def test_the_rules_about_variables_hold_wherever_a_text_names_one(
    query: str, refused: str | None
) -> None:
    """A text without a `$` skips them (it has no variable to check); any other keeps them."""
    result = await run(runner(), query, {"t": "y"})

    assert [error.message for error in result.errors or ()] == ([refused] if refused else [])


TRUSTED = '{ echo(text: "trusted") }'
TRUSTED_SHA256 = hashlib.sha256(TRUSTED.encode()).hexdigest()


def documents(policy: DocumentPolicy) -> Documents:
    trusted = TrustedDocuments([TrustedDocument(id="echo-1", text=TRUSTED, source="web.json")])
    return Documents(trusted, policy, is_valid=runner().is_valid)


def text_for(documents: Documents, *, is_service: bool = False, **request: Any) -> str | None:
    given = {"query": None, "document_id": None, "doc_id": None, "extensions": None, **request}
    return documents.text_for(is_service=is_service, **given)


def test_the_document_policy_says_which_text_a_request_runs() -> None:
    any_text, trusted_only = documents(DocumentPolicy.ANY), documents(DocumentPolicy.TRUSTED)
    for policy in (any_text, trusted_only):
        assert text_for(policy, document_id="echo-1") == TRUSTED
        assert text_for(policy, document_id=f"sha256:{TRUSTED_SHA256}") == TRUSTED
    assert text_for(any_text, query="{ __typename }") == "{ __typename }"
    with pytest.raises(DocumentRefused) as refused:
        text_for(trusted_only, query="{ __typename }", is_service=True)
    assert refused.value.code == "DOCUMENT_NOT_TRUSTED"
    with pytest.raises(DocumentRefused) as unknown:
        text_for(trusted_only, document_id="echo-2")
    assert unknown.value.code == "PERSISTED_QUERY_NOT_IN_LIST"
    with pytest.raises(MalformedDocumentRequest):
        text_for(any_text, document_id="echo-1", query="{ __typename }")


def test_automatic_persisted_queries_register_a_valid_text_and_then_answer_its_hash() -> None:
    policy = documents(DocumentPolicy.ANY)
    text = "{ box { label } }"
    persisted = {
        "persistedQuery": {"version": 1, "sha256Hash": hashlib.sha256(text.encode()).hexdigest()}
    }

    with pytest.raises(DocumentRefused) as missing:
        text_for(policy, extensions=persisted)
    assert missing.value.code == "PERSISTED_QUERY_NOT_FOUND"
    assert text_for(policy, extensions=persisted, query=text) == text
    assert text_for(policy, extensions=persisted) == text
    invalid = "{ nothing }"
    hashed = {
        "persistedQuery": {"version": 1, "sha256Hash": hashlib.sha256(invalid.encode()).hexdigest()}
    }
    text_for(policy, extensions=hashed, query=invalid)
    with pytest.raises(DocumentRefused):  # not registered: it does not validate
        text_for(policy, extensions=hashed)


def test_a_pinned_document_is_prepared_once_and_its_problems_returned() -> None:
    engine = runner(limits=QueryLimits(max_cost=5))

    assert engine.pin(TRUSTED) == []
    [problem] = engine.pin("{ items(first: 10) { number } }")
    assert problem.extensions == {"code": "QUERY_TOO_COSTLY", "cost": 11}
    assert [e.message for e in engine.pin("{ nothing }")] == [
        "Cannot query field 'nothing' on type 'Query'."
    ]
