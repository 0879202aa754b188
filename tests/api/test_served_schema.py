"""The schema a client downloads is the snapshot (SPEC §6): introspection of `/graphql`, printed,
is schema.graphql text for text; federation's names live at `/subgraph` only (§15); and every
object type with an `id: ID!` is a `Node`, so that Relay's store, which normalizes records by
`id`, never merges two unrelated ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from graphql import (
    GraphQLObjectType,
    GraphQLSchema,
    build_client_schema,
    get_introspection_query,
)
from graphql import build_schema as build_sdl_schema

from datasource import DynamoConfig
from schema.federation import public_sdl
from tests.api.conftest import (
    ALICE,
    PROD_SETTINGS,
    SERVICE,
    Api,
    api_client,
    error_codes,
    prod_token,
)

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT = REPO / "schema.graphql"
# Everything a client's introspection may ask, as codegen's and Relay's loaders do.
INTROSPECTION = get_introspection_query(
    descriptions=True,
    specified_by_url=True,
    directive_is_repeatable=True,
    schema_description=True,
    input_value_deprecation=True,
)
FEDERATION_NAMES = {"_Any", "_Entity", "_Service", "_FieldSet", "link__Import", "link__Purpose"}
FEDERATION_DIRECTIVES = {"key", "link"}


async def introspected(api: Api, endpoint: str) -> GraphQLSchema:
    """The schema `endpoint` serves, as a client builds it from introspection (no token)."""
    body = await api.at(endpoint).post(INTROSPECTION, as_=None)
    assert "errors" not in body, body["errors"]
    return build_client_schema(body["data"])


def ids_outside_node(schema: GraphQLSchema) -> list[str]:
    """The object types with an `id: ID!` field that do not implement `Node`."""
    return sorted(
        named.name
        for named in schema.type_map.values()
        if isinstance(named, GraphQLObjectType)
        and not named.name.startswith("__")
        and "id" in named.fields
        and str(named.fields["id"].type) == "ID!"
        and "Node" not in {interface.name for interface in named.interfaces}
    )


async def test_introspection_of_graphql_prints_the_committed_snapshot(api: Api) -> None:
    served = await introspected(api, "/graphql")
    assert public_sdl(served) + "\n" == SNAPSHOT.read_text()


async def test_graphql_holds_none_of_federations_names(api: Api) -> None:
    served = await introspected(api, "/graphql")
    assert not FEDERATION_NAMES & set(served.type_map)
    assert not FEDERATION_DIRECTIVES & {directive.name for directive in served.directives}
    assert served.query_type is not None
    assert not {"_service", "_entities"} & set(served.query_type.fields)


async def test_the_subgraph_serves_federations_names_beside_the_public_schema(api: Api) -> None:
    public, subgraph = await introspected(api, "/graphql"), await introspected(api, "/subgraph")
    assert {"_Any", "_Entity", "_Service"} <= set(subgraph.type_map)
    assert subgraph.query_type is not None and public.query_type is not None
    assert set(subgraph.query_type.fields) == set(public.query_type.fields) | {
        "_service",
        "_entities",
    }
    assert set(public.type_map) <= set(subgraph.type_map)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("{ _service { sdl } }", "_service"),
        (
            '{ _entities(representations: [{__typename: "Loan", userId: "u", loanId: "l"}]) '
            "{ __typename } }",
            "_entities",
        ),
    ],
)
async def test_federation_fields_at_graphql_are_a_validation_error_naming_them(
    api: Api, query: str, field: str
) -> None:
    as_json = await api.post(query, as_=SERVICE)
    as_graphql_response = await api.http.post(
        "/graphql",
        json={"query": query},
        headers={
            "Authorization": f"Bearer {SERVICE}",
            "Accept": "application/graphql-response+json",
        },
    )

    assert "data" not in as_json
    assert [error["message"] for error in as_json["errors"]] == [
        f"Cannot query field '{field}' on type 'Query'."
    ]
    assert as_graphql_response.status_code == 400
    assert as_graphql_response.json()["errors"] == as_json["errors"]


async def test_the_subgraph_without_a_token_is_unauthenticated(api: Api) -> None:
    body = await api.at("/subgraph").post('{ loan(loanId: "loan-1") { loanId } }', as_=None)
    assert body["data"] is None
    assert error_codes(body) == ["UNAUTHENTICATED"]


async def test_the_subgraph_serves_the_walkthroughs_operations_as_graphql_does(api: Api) -> None:
    created = await api.create(user="alice", loan="loan-1")
    query = """query($loanId: ID!) { loan(loanId: $loanId) {
      payments(first: 5) { edges { node { paymentId amountCents } } } } }"""
    answers: list[dict[str, Any]] = [
        await api.at(endpoint).data(query, {"loanId": "loan-1"}, as_=ALICE)
        for endpoint in ("/graphql", "/subgraph")
    ]
    assert answers[0] == answers[1]
    [edge] = answers[0]["loan"]["payments"]["edges"]
    assert edge["node"]["paymentId"] == created["paymentId"]


async def test_every_object_type_with_an_id_implements_node(api: Api) -> None:
    for endpoint in ("/graphql", "/subgraph"):
        served = await introspected(api, endpoint)
        assert ids_outside_node(served) == [], endpoint


def test_the_node_check_finds_an_id_outside_node() -> None:
    # The check itself, on the schema as it stood before installments were keyed by
    # `installmentId`: `type Installment { id: ID! }` was the one type Relay could merge.
    before = build_sdl_schema(
        "interface Node { id: ID! } type Payment implements Node { id: ID! } "
        "type Installment { id: ID! } type Query { node(id: ID!): Node i: Installment }"
    )
    assert ids_outside_node(before) == ["Installment"]


async def test_the_subgraph_keeps_the_document_policy_and_the_limits(
    moto_config: DynamoConfig,
) -> None:
    deep = '{ loan(loanId: "l") { payments { edges { node { loan { loanId } } } } } }'
    async with api_client(moto_config, **PROD_SETTINGS, max_query_depth=4) as prod:
        for endpoint in ("/graphql", "/subgraph"):
            text = await prod.at(endpoint).post(
                '{ loan(loanId: "loan-1") { loanId } }', as_=prod_token("alice")
            )
            too_deep = await prod.at(endpoint).post(deep, as_=prod_token("svc", service=True))

            assert error_codes(text) == ["DOCUMENT_NOT_TRUSTED"], endpoint
            assert "exceeds maximum operation depth" in too_deep["errors"][0]["message"], endpoint
