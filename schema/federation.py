"""The schema as an Apollo Federation 2 subgraph (SPEC §15), by Strawberry's own federation.

`Payment` (`@key(fields: "id")`, read through the payments loader) and `Loan` (`@key(fields:
"userId loanId")`, its ids: no read) are resolved here; `Installment` is a key the loans service
resolves. `_entities` answers by the rules of `node`: another user's payment or loan, or one that
does not exist, is null; a malformed representation is INVALID_INPUT at its place in the list.
Two schemas of one set of types: the subgraph (`/subgraph`, with `@defer` and `@stream` by
`served_subgraph`; `subgraph_sdl`, pinned by schema.subgraph.graphql, declares neither) and
`public_schema` (`/graphql`; `public_sdl`, schema.graphql), the subgraph without federation's
root fields, types and directives. `NoSubgraphSdlRule` refuses `_service` where introspection
is refused.

How a gateway uses it: docs/federation.md.
"""

from __future__ import annotations

from typing import Literal

import strawberry
from graphql import (
    FieldNode,
    GraphQLError,
    GraphQLObjectType,
    GraphQLSchema,
    ValidationRule,
    is_introspection_type,
    is_specified_directive,
    is_specified_scalar_type,
    print_directive,
    print_type,
    specified_directives,
)
from strawberry.federation.schema import FederationAny
from strawberry.printer import print_schema

from domain.errors import InvalidInput
from engine import INCREMENTAL_DIRECTIVES
from resolvers import queries
from resolvers.context import Context
from resolvers.entities import entity_refs

__all__ = [
    "FEDERATION_VERSION",
    "FederatedSchema",
    "NoSubgraphSdlRule",
    "public_schema",
    "public_sdl",
    "served_subgraph",
    "subgraph_sdl",
]

Info = strawberry.Info[Context, None]

# The newest Federation version @theguild/federation-composition (0.27) composes; Strawberry's
# default, 2.11, it refuses (UNKNOWN_FEDERATION_LINK_VERSION). Only @key is used: 2.0's.
FEDERATION_VERSION: Literal["2.9"] = "2.9"
# The root fields a gateway asks a subgraph; never in the public schema.
FEDERATION_FIELDS = frozenset({"_service", "_entities"})


class FederatedSchema(strawberry.federation.Schema):
    def entities_resolver(
        self, info: Info, representations: list[FederationAny]
    ) -> list[FederationAny]:
        """Each representation's answer: its refusal, or an awaitable that graphql-core awaits
        with the others (so the payments' lookups meet in the loader's one batch)."""
        context = info.context
        context.caller()
        return [
            FederationAny(
                ref if isinstance(ref, InvalidInput) else queries.node_by_ref(context, ref)
            )
            for ref in entity_refs(representations)
        ]


def subgraph_sdl(schema: strawberry.federation.Schema) -> str:
    """What `_service { sdl }` answers: the schema with its federation directives, without
    `@defer` and `@stream`: a gateway plans deferral itself and sends its subgraphs none."""
    return print_schema(schema)


def served_subgraph(subgraph: GraphQLSchema) -> GraphQLSchema:
    """What `/subgraph` runs: `subgraph` with `@defer` and `@stream` (`engine.incremental`), so
    a client of the subgraph itself gets parts as one of `/graphql` does. The same types."""
    return GraphQLSchema(
        query=subgraph.query_type,
        mutation=subgraph.mutation_type,
        subscription=subgraph.subscription_type,
        types=list(subgraph.type_map.values()),
        directives=(*subgraph.directives, *INCREMENTAL_DIRECTIVES),
        description=subgraph.description,
        extensions=subgraph.extensions,
        ast_node=subgraph.ast_node,
    )


class NoSubgraphSdlRule(ValidationRule):
    """Refuses `_service` (the whole schema in SDL), as production refuses introspection."""

    def enter_field(self, node: FieldNode, *_: object) -> None:
        if node.name.value == "_service" and self.context.get_parent_type() is (
            self.context.schema.query_type
        ):
            self.report_error(
                GraphQLError(
                    "The subgraph's SDL is not served here; compose from schema.subgraph.graphql.",
                    node,
                )
            )


def public_schema(subgraph: GraphQLSchema) -> GraphQLSchema:
    """The schema a client sees: `subgraph` without `_service`, `_entities`, the scalars and
    types only they reach (`_Any`, `_Entity`, `_Service`) and federation's directives with their
    types (`@key`, `@link`, `_FieldSet`, `link__*`), and with `@defer` and `@stream`
    (`engine.incremental`). Every other type is the subgraph's own
    object, so resolvers and compiled plans serve both."""
    query = subgraph.query_type
    assert query is not None  # a federation schema always has one
    public_query = GraphQLObjectType(
        query.name,
        fields={name: f for name, f in query.fields.items() if name not in FEDERATION_FIELDS},
        interfaces=query.interfaces,
        description=query.description,
        extensions=query.extensions,
        ast_node=query.ast_node,
    )
    # Only what the public roots and their implementations reach is collected: federation's
    # types hang off its fields and directives alone.
    implementations = [
        named
        for named in subgraph.type_map.values()
        if isinstance(named, GraphQLObjectType) and named.interfaces
    ]
    return GraphQLSchema(
        query=public_query,
        mutation=subgraph.mutation_type,
        subscription=subgraph.subscription_type,
        types=implementations,
        directives=(*specified_directives, *INCREMENTAL_DIRECTIVES),
        description=subgraph.description,
    )


def public_sdl(schema: GraphQLSchema) -> str:
    """The SDL of schema.graphql: every type by name, each as graphql-core prints it, so that a
    schema built from introspection prints the same text as the schema it was read from."""
    types = sorted(
        (
            named
            for named in schema.type_map.values()
            if not is_introspection_type(named) and not is_specified_scalar_type(named)
        ),
        key=lambda named: named.name,
    )
    directives = [d for d in schema.directives if not is_specified_directive(d)]
    return "\n\n".join([*map(print_directive, directives), *map(print_type, types)])
