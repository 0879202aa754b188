"""The committed schema.graphql is the contract; a change to it must be deliberate. So is
schema.subgraph.graphql, the same schema as a federation composer reads it."""

import dataclasses
from pathlib import Path
from typing import Any

from graphql import (
    DirectiveDefinitionNode,
    EnumValueDefinitionNode,
    FieldDefinitionNode,
    InputValueDefinitionNode,
    Node,
    SchemaDefinitionNode,
    TypeDefinitionNode,
    Visitor,
    parse,
    print_ast,
    visit,
)

from schema import build_schema

SNAPSHOT = Path(__file__).parents[2] / "schema.graphql"
SUBGRAPH_SNAPSHOT = Path(__file__).parents[2] / "schema.subgraph.graphql"
ACCEPT = "If that is intended, accept it with `make schema` and commit the snapshots with it."
DESCRIBED = (
    SchemaDefinitionNode,
    TypeDefinitionNode,
    FieldDefinitionNode,
    InputValueDefinitionNode,
    EnumValueDefinitionNode,
    DirectiveDefinitionNode,
)


class _WithoutDescriptions(Visitor):
    def enter(self, node: Node, *_: Any) -> Node | None:
        if isinstance(node, DESCRIBED) and node.description is not None:
            return dataclasses.replace(node, description=None)
        return None


def without_descriptions(sdl: str) -> str:
    """`sdl` printed without its descriptions: each field with its arguments on one line."""
    return print_ast(visit(parse(sdl), _WithoutDescriptions()))


def test_schema_matches_the_committed_snapshot() -> None:
    printed = build_schema().as_str() + "\n"
    assert printed == SNAPSHOT.read_text(), "The GraphQL schema changed. " + ACCEPT


def test_subgraph_sdl_matches_its_committed_snapshot() -> None:
    printed = build_schema(subgraph=True).as_str() + "\n"
    assert printed == SUBGRAPH_SNAPSHOT.read_text(), "The subgraph's SDL changed. " + ACCEPT


def test_the_subgraph_sdl_is_the_schema_with_federations_directives() -> None:
    sdl, subgraph = SNAPSHOT.read_text(), SUBGRAPH_SNAPSHOT.read_text()
    assert subgraph.startswith(
        'schema @link(url: "https://specs.apollo.dev/federation/v2.9", import: ["@key"]) {'
    )
    for entity, key in [
        ("type Payment implements Node", '@key(fields: "id")'),
        ("type Loan implements Node", '@key(fields: "userId loanId")'),
        ("type Installment", '@key(fields: "installmentId", resolvable: false)'),
    ]:
        assert f"\n{entity} {key} {{\n" in subgraph, entity
        assert f"\n{entity} {{\n" in sdl, entity
    assert "@key" not in sdl
    assert "@link" not in sdl


def test_the_contract_names_of_the_spec_are_present() -> None:
    sdl = without_descriptions(SNAPSHOT.read_text())
    for line in [
        "node(id: ID!): Node",
        # The spec's arguments first; `last` and `before` (backward paging, ours) after them.
        "paymentsByStatus(status: PaymentStatus!, first: Int = null, after: String = null, ",
        "createPayment(input: CreatePaymentInput!): PaymentResult!",
        "submitPayment(input: SubmitPaymentInput!): PaymentResult!",
        "completePayment(input: CompletePaymentInput!): PaymentResult!",
        "schedulePaymentRetry(input: SchedulePaymentRetryInput!): PaymentResult!",
        "failPayment(input: FailPaymentInput!): PaymentResult!",
        "returnPayment(input: ReturnPaymentInput!): PaymentResult!",
        "chargeBackPayment(input: ChargeBackPaymentInput!): PaymentResult!",
        "skipPayment(input: SkipPaymentInput!): PaymentResult!",
        "type Loan implements Node",
        "type Payment implements Node",
        "interface UserError",
        "enum PaymentMethod",
    ]:
        assert line in sdl, line
