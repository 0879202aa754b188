"""The schema as an Apollo Federation 2 subgraph (SPEC §15), by Strawberry's own federation.

    Payment      @key(fields: "id")                     resolved here, through the payments loader
    Loan         @key(fields: "userId loanId")          resolved here: a loan is its ids (no read)
    Installment  @key(fields: "id", resolvable: false)  named by PaymentApplication.installment,
                                                        resolved by the loans service

`_entities` resolves what a gateway sends by the rules of `node`: a customer's representation of
another user's payment or loan is null, as is a payment that does not exist, and a malformed one
is INVALID_INPUT at its place in the list. The payments of one `_entities` are read in one batch
with the request's other lookups (`resolvers.loaders`).

Two prints of the one schema: `subgraph_sdl`, what `_service { sdl }` answers a composer (pinned
by schema.subgraph.graphql), and `as_str`, the schema as its clients see it (schema.graphql):
introspection shows no directive applications, so that print leaves federation's out. In
production `_service` is refused as introspection is (`NoSubgraphSdlRule`): a gateway there
serves a supergraph composed from the pinned SDL, and needs only `_entities`.
"""

from __future__ import annotations

from typing import Literal

import strawberry
from graphql import (
    DirectiveNode,
    FieldNode,
    GraphQLError,
    SchemaDefinitionNode,
    StringValueNode,
    ValidationRule,
    Visitor,
    parse,
    visit,
)
from strawberry.federation.schema import FederationAny
from strawberry.printer import print_schema

from domain.errors import InvalidInput
from resolvers import queries
from resolvers.context import Context
from resolvers.entities import entity_refs

Info = strawberry.Info[Context, None]

# The newest Federation version @theguild/federation-composition (0.27) composes; Strawberry's
# default, 2.11, it refuses (UNKNOWN_FEDERATION_LINK_VERSION). Only @key is used: 2.0's.
FEDERATION_VERSION: Literal["2.9"] = "2.9"


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

    def as_str(self) -> str:
        """The schema as its clients see it: the subgraph SDL without federation's directives."""
        return without_federation(subgraph_sdl(self))


def subgraph_sdl(schema: strawberry.federation.Schema) -> str:
    """What `_service { sdl }` answers: the schema with its federation directives."""
    return print_schema(schema)


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


class _FederationDirectives(Visitor):
    """The source spans of `@link` and the directives it imports, each with its leading space."""

    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names = names
        self.spans: list[tuple[int, int]] = []

    def enter_directive(self, node: DirectiveNode, *_: object) -> None:
        if node.name.value in self.names and node.loc is not None:
            self.spans.append((node.loc.start - 1, node.loc.end))


def without_federation(sdl: str) -> str:
    """`sdl` with its `schema @link(...)` definition and every directive that `@link` imports
    cut out where they stand, the rest exactly as printed."""
    document = parse(sdl)
    names = {"link"}
    spans: list[tuple[int, int]] = []
    for definition in document.definitions:
        if not isinstance(definition, SchemaDefinitionNode):
            continue
        for directive in definition.directives or ():
            if directive.name.value != "link":
                raise ValueError(f"a schema directive other than @link: @{directive.name.value}")
            names.update(_imports(directive))
        roots = {op.operation.value: op.type.name.value for op in definition.operation_types}
        if any(name != kind.capitalize() for kind, name in roots.items()):
            raise ValueError(f"root types not named after their operations: {roots}")
        assert definition.loc is not None
        spans.append((definition.loc.start, definition.loc.end + len("\n\n")))
    collector = _FederationDirectives(names)
    visit(document, collector)
    spans.extend(collector.spans)
    kept, position = [], 0
    for start, end in sorted(spans):
        if start >= position:  # not inside a span already cut (the schema definition's @link)
            kept.append(sdl[position:start])
            position = end
    kept.append(sdl[position:])
    return "".join(kept)


def _imports(link: DirectiveNode) -> set[str]:
    for argument in link.arguments or ():
        if argument.name.value == "import":
            values = getattr(argument.value, "values", ())
            return {
                value.value.removeprefix("@")
                for value in values
                if isinstance(value, StringValueNode)
            }
    return set()
