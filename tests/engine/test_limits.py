"""The cost bounds what an operation answers and reads (`engine.limits`): a list with no size
argument costs its cap, a sharded page what it reads beyond its items, introspection what it
answers over the schema; the actual cost counts the same over the answer, never above."""

from __future__ import annotations

import strawberry
from graphql import get_introspection_query, graphql_sync, parse

from engine import QueryLimits, actual_cost, graphql_schema, operation_cost
from engine.limits import fixed_cost, uncapped_lists


@strawberry.type
class Tag:
    label: str
    weight: int


@strawberry.type
class TagEdge:
    node: Tag


@strawberry.type
class TagConnection:
    edges: list[TagEdge]


@strawberry.type
class Query:
    @strawberry.field
    def capped(self) -> list[Tag]:
        return [Tag(label=str(n), weight=n) for n in range(3)]

    @strawberry.field
    def uncapped(self) -> list[Tag]:
        return []

    @strawberry.field
    def labels(self) -> list[str]:
        return []

    @strawberry.field
    def sharded(self, first: int | None = None) -> TagConnection:
        return TagConnection(edges=[TagEdge(node=Tag(label="a", weight=1))])


SCHEMA = graphql_schema(strawberry.Schema(query=Query))
LIMITS = QueryLimits(
    list_caps={"Query.capped": 5},
    page_reads={"Query.sharded": lambda size: 10 * size},
)


def cost(query: str, variables: dict[str, object] | None = None) -> int:
    return operation_cost(SCHEMA, parse(query), None, variables or {}, LIMITS)


def fields(value: object) -> int:
    """The fields in an answer: what a selection costs over it, list by list."""
    if isinstance(value, dict):
        return sum(1 + fields(inner) for inner in value.values())
    if isinstance(value, list):
        return sum(fields(inner) for inner in value)
    return 0


def test_a_list_with_no_size_costs_its_cap_of_items() -> None:
    assert cost("{ capped { label weight } }") == 1 + 5 * 2
    assert cost("{ uncapped { label weight } }") == 1 + 2  # its costliest item


def test_the_lists_of_objects_nothing_bounds_are_named() -> None:
    # Not a connection's edges (its page), not a list of scalars, not a capped one.
    assert uncapped_lists(SCHEMA, LIMITS) == ["Query.uncapped"]


def test_a_sharded_page_adds_what_it_reads_beyond_its_items() -> None:
    assert cost("{ sharded(first: 3) { edges { node { label } } } }") == 1 + 3 * 3 + 30
    assert cost("query($n: Int = 4) { sharded(first: $n) { edges { node { label } } } }") == (
        1 + 4 * 3 + 40
    )


def test_introspection_costs_every_field_it_answers() -> None:
    query = get_introspection_query(descriptions=True)
    answer = graphql_sync(SCHEMA, query)
    assert answer.data is not None
    assert cost(query) == fields(answer.data)
    assert fixed_cost(SCHEMA, parse(query), None, LIMITS) == cost(query)


def test_a_type_looked_up_by_a_variable_is_costed_per_request() -> None:
    query = "query($name: String!) { __type(name: $name) { name fields { name } } }"
    assert fixed_cost(SCHEMA, parse(query), None, LIMITS) is None
    tag = graphql_sync(SCHEMA, query, variable_values={"name": "Tag"}).data
    assert cost(query, {"name": "Tag"}) == fields(tag) == 1 + 1 + 1 + 2 * 1
    assert cost(query, {"name": "Nothing"}) == 1


def test_the_actual_cost_counts_the_items_and_the_answer_returned() -> None:
    document = parse("{ capped { label } sharded(first: 3) { edges { node { label } } } }")
    data = {
        "capped": [{"label": "0"}, {"label": "1"}],
        "sharded": {"edges": [{"node": {"label": "a"}}]},
    }
    # Each capped item; the page as a page of one, with what a page of one reads.
    assert actual_cost(SCHEMA, document, None, LIMITS, data) == (1 + 2) + (1 + 3 + 10)
    query = "{ __schema { types { name } } }"
    answer = graphql_sync(SCHEMA, query).data
    assert actual_cost(SCHEMA, parse(query), None, LIMITS, answer) == cost(query)
