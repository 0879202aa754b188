"""The actual cost a service is charged once an operation has run (`Hooks.admit`'s charge,
settled): a page that returned k items costs what the same operation asking for k costs, whatever
the selection of each item (fragments, `@include`), less what the nulls in them left unread."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import strawberry
from hypothesis import given, settings
from hypothesis import strategies as st
from strawberry.types.graphql import OperationType

from engine import Hooks, OperationRunner, compile_operation, graphql_schema
from tests.hypothesis_profiles import examples


@strawberry.type
class Tag:
    label: str


@strawberry.type
class Thing:
    name: str
    size: int
    tag: Tag
    maybe_tag: Tag | None


@strawberry.type
class ThingEdge:
    cursor: str
    node: Thing


@strawberry.type
class PageInfo:
    has_next_page: bool


@strawberry.type
class ThingConnection:
    edges: list[ThingEdge]
    page_info: PageInfo


@strawberry.type
class Query:
    @strawberry.field
    def things(self, first: int, returned: int) -> ThingConnection:
        edges = [
            ThingEdge(
                cursor=str(n),
                node=Thing(
                    name=f"t{n}",
                    size=n,
                    tag=Tag(label="x"),
                    maybe_tag=Tag(label="y") if n % 2 else None,
                ),
            )
            for n in range(min(first, returned))
        ]
        return ThingConnection(edges=edges, page_info=PageInfo(has_next_page=False))


SCHEMA = strawberry.Schema(query=Query)

NODE_PARTS = [
    "name",
    "size",
    "__typename",
    "tag { label }",
    "maybeTag { label }",
    "name @include(if: true)",
    "...T",
    "... on Thing { size }",
]


class _Charge:
    def __init__(self, costs: dict[str, int], requested: int) -> None:
        costs["requested"] = requested
        self._costs = costs

    def settle(self, actual: int) -> dict[str, Any]:
        self._costs["actual"] = actual
        return {}


async def _costs(query: str) -> dict[str, int]:
    costs: dict[str, int] = {}

    async def admit(context: Any, operation: OperationType, cost: int) -> _Charge:
        return _Charge(costs, cost)

    runner: OperationRunner[Any] = OperationRunner(
        graphql_schema(SCHEMA),
        compile_operation=functools.partial(compile_operation, SCHEMA),
        hooks=Hooks(admit=admit),
    )
    result = await runner.run(
        query, variables=None, context=None, operation_name=None, allowed=[OperationType.QUERY]
    )
    assert not result.errors, result.errors
    return costs


def _query(node: list[str], first: int, returned: int, cursor: bool) -> str:
    edge = ("cursor " if cursor else "") + f"node {{ {' '.join(node)} }}"
    fragment = "\nfragment T on Thing { name tag { label } }" if "...T" in node else ""
    return (
        f"{{ things(first: {first}, returned: {returned}) "
        f"{{ edges {{ {edge} }} pageInfo {{ hasNextPage }} }} }}{fragment}"
    )


@settings(max_examples=examples(30), deadline=None)
@given(
    node=st.lists(st.sampled_from(NODE_PARTS), min_size=1, max_size=4, unique=True),
    first=st.integers(1, 30),
    returned=st.integers(0, 30),
    cursor=st.booleans(),
)
def test_a_page_costs_what_asking_for_the_items_it_returned_costs(
    node: list[str], first: int, returned: int, cursor: bool
) -> None:
    got = min(first, returned)
    ran = asyncio.run(_costs(_query(node, first, returned, cursor)))
    asked_for_what_came = asyncio.run(_costs(_query(node, max(got, 1), returned, cursor)))

    # An item's `maybeTag` is null on every other item (the first included): 1, not 2.
    nulls = (got + 1) // 2 if "maybeTag { label }" in node else 0
    if got:
        assert ran["actual"] == asked_for_what_came["requested"] - nulls
    else:
        assert ran["actual"] < asked_for_what_came["requested"]
