"""Trusted documents through the API (SPEC §14): manifests of each format loaded at start, their
documents run by every kind of id over POST and GET, the policies of `LOC_DOCUMENTS`, Apollo's
automatic persisted queries, and every refusal answered in JSON with nothing written."""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from graphql.language import parser

from datasource import DynamoConfig
from engine import ManifestsRefused
from tests.api.conftest import (
    PROD_SETTINGS,
    SERVICE,
    Api,
    api_client,
    error_codes,
    payment_items,
    prod_token,
    without_cost,
)

LOAN = """query Loan($userId: ID, $loanId: ID!) {
  loan(userId: $userId, loanId: $loanId) { payments(first: 5) { edges { node { paymentId } } } }
}"""
CREATE = """mutation Create($input: CreatePaymentInput!) {
  createPayment(input: $input) { __typename ... on PaymentPayload { payment { paymentId } } }
}"""
FORBIDDEN = "query Retry { paymentsByStatus(status: RETRY) { edges { cursor } } }"
NOT_TRUSTED = "query Typename { __typename }"
GRAPHQL_RESPONSE = "application/graphql-response+json"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


@pytest.fixture
def manifests(tmp_path: Path) -> list[Path]:
    """One manifest of each format: Apollo's (LOAN), Relay's with md5 ids (CREATE), GraphQL Code
    Generator's with sha256 ids (FORBIDDEN), and a custom id."""
    apollo = tmp_path / "apollo.json"
    apollo.write_text(
        json.dumps(
            {
                "format": "apollo-persisted-query-manifest",
                "version": 1,
                "operations": [{"id": sha256(LOAN), "name": "Loan", "type": "query", "body": LOAN}],
            }
        )
    )
    relay = tmp_path / "persisted_queries.json"
    relay.write_text(json.dumps({md5(CREATE): CREATE}))
    codegen = tmp_path / "persisted-documents.json"
    codegen.write_text(json.dumps({sha256(FORBIDDEN): FORBIDDEN, "loan-page-v1": LOAN}))
    return [apollo, relay, codegen]


def settings_of(manifests: list[Path], **more: Any) -> dict[str, Any]:
    return {"trusted_documents": ",".join(str(path) for path in manifests), **more}


@pytest.fixture
async def prod(moto_config: DynamoConfig, manifests: list[Path]) -> AsyncIterator[Api]:
    async with api_client(moto_config, **settings_of(manifests, **PROD_SETTINGS)) as api:
        yield api


async def request(
    api: Api,
    body: dict[str, Any],
    *,
    as_: str | None,
    method: str = "POST",
    accept: str = "application/json",
) -> httpx.Response:
    headers = {"Accept": accept}
    if as_ is not None:
        headers["Authorization"] = f"Bearer {as_}"
    if method == "GET":
        params = {
            name: json.dumps(value) if isinstance(value, dict) else value
            for name, value in body.items()
        }
        return await api.http.get("/graphql", params=params, headers=headers)
    return await api.http.post("/graphql", json=body, headers=headers)


LOAN_VARIABLES = {"userId": "alice", "loanId": "loan-1"}


@pytest.mark.parametrize("method", ["POST", "GET"])
@pytest.mark.parametrize(
    "named",
    [
        {"documentId": f"sha256:{sha256(LOAN)}"},
        {"documentId": "loan-page-v1"},
        {"doc_id": "loan-page-v1"},
        {"extensions": {"persistedQuery": {"version": 1, "sha256Hash": sha256(LOAN)}}},
    ],
    ids=["documentId-sha256", "documentId-custom", "relay-doc_id", "apollo-persistedQuery"],
)
async def test_a_customer_in_prod_runs_a_trusted_query_by_id(
    prod: Api, named: dict[str, Any], method: str
) -> None:
    alice = prod_token("alice")
    created = await prod.create(user="alice", as_=prod_token("svc", service=True))

    response = await request(
        prod, {**named, "variables": {"loanId": "loan-1"}}, as_=alice, method=method
    )

    assert response.status_code == 200, response.text
    assert response.json()["data"]["loan"]["payments"]["edges"] == [
        {"node": {"paymentId": created["paymentId"]}}
    ]


async def test_each_format_runs_its_documents_by_its_own_ids(
    moto_config: DynamoConfig, manifests: list[Path]
) -> None:
    async with api_client(moto_config, **settings_of(manifests)) as api:
        created = await request(
            api,
            {
                "documentId": md5(CREATE),  # Relay's md5 id
                "variables": {
                    "input": {
                        "userId": "alice",
                        "loanId": "loan-1",
                        "amountCents": 100,
                        "method": "ACH",
                        "idempotencyKey": "k1",
                    }
                },
            },
            as_=SERVICE,
        )
        listed = await request(
            api, {"documentId": sha256(LOAN), "variables": LOAN_VARIABLES}, as_=SERVICE
        )
        retries = await request(api, {"documentId": sha256(FORBIDDEN)}, as_=SERVICE)

    payment = created.json()["data"]["createPayment"]["payment"]
    assert listed.json()["data"]["loan"]["payments"]["edges"] == [{"node": payment}]
    assert without_cost(retries.json()) == {"data": {"paymentsByStatus": {"edges": []}}}


@pytest.mark.parametrize("accept", ["application/json", GRAPHQL_RESPONSE])
async def test_a_customers_text_in_prod_is_refused_and_writes_nothing(
    prod: Api, moto_config: DynamoConfig, accept: str
) -> None:
    create = {
        "query": CREATE,
        "variables": {
            "input": {
                "loanId": "loan-1",
                "amountCents": 100,
                "method": "ACH",
                "idempotencyKey": "k2",
            }
        },
    }

    refused = await request(prod, create, as_=prod_token("alice"), accept=accept)
    anonymous = await request(prod, {"query": LOAN, "variables": LOAN_VARIABLES}, as_=None)

    assert refused.status_code == (400 if accept == GRAPHQL_RESPONSE else 200)
    assert refused.headers["content-type"] == accept
    assert "data" not in refused.json()
    assert error_codes(refused.json()) == ["DOCUMENT_NOT_TRUSTED"]
    # Without a valid token the text is refused for the token: what the caller must fix first.
    assert error_codes(anonymous.json()) == ["UNAUTHENTICATED"]
    assert payment_items(moto_config) == []


async def test_a_service_in_prod_sends_text_and_a_customer_meets_the_usual_refusals(
    prod: Api,
) -> None:
    service = await request(prod, {"query": NOT_TRUSTED}, as_=prod_token("svc", service=True))
    forbidden = await request(
        prod, {"documentId": f"sha256:{sha256(FORBIDDEN)}"}, as_=prod_token("alice")
    )
    anonymous = await request(
        prod, {"documentId": "loan-page-v1", "variables": LOAN_VARIABLES}, as_=None
    )

    assert without_cost(service.json()) == {"data": {"__typename": "Query"}}
    assert error_codes(forbidden.json()) == ["FORBIDDEN"]
    assert error_codes(anonymous.json()) == ["UNAUTHENTICATED"]


async def test_get_with_text_in_prod_is_405_and_get_by_id_is_served(prod: Api) -> None:
    text = await request(
        prod,
        {"query": LOAN, "variables": LOAN_VARIABLES},
        as_=prod_token("svc", service=True),
        method="GET",
    )

    assert text.status_code == 405
    assert text.headers["allow"] == "POST"
    assert "errors" in text.json()


async def test_the_trusted_policy_refuses_a_services_text_too(
    moto_config: DynamoConfig, manifests: list[Path]
) -> None:
    async with api_client(moto_config, **settings_of(manifests, documents="trusted")) as api:
        text = await request(api, {"query": NOT_TRUSTED}, as_=SERVICE)
        by_id = await request(
            api, {"documentId": "loan-page-v1", "variables": LOAN_VARIABLES}, as_=SERVICE
        )

    assert error_codes(text.json()) == ["DOCUMENT_NOT_TRUSTED"]
    assert without_cost(by_id.json()) == {"data": {"loan": {"payments": {"edges": []}}}}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"documentId": "sha256:" + "0" * 64}, "PERSISTED_QUERY_NOT_IN_LIST"),
        ({"documentId": "no-such-document"}, "PERSISTED_QUERY_NOT_IN_LIST"),
        ({"doc_id": "no-such-document"}, "PERSISTED_QUERY_NOT_IN_LIST"),
        # A customer may not register: an unknown hash will not be found by sending the text.
        (
            {"extensions": {"persistedQuery": {"version": 1, "sha256Hash": sha256(NOT_TRUSTED)}}},
            "PERSISTED_QUERY_NOT_IN_LIST",
        ),
        (
            {
                "query": NOT_TRUSTED,
                "extensions": {"persistedQuery": {"version": 1, "sha256Hash": sha256(NOT_TRUSTED)}},
            },
            "DOCUMENT_NOT_TRUSTED",
        ),
    ],
    ids=["sha256", "custom", "doc_id", "apq-hash", "apq-register"],
)
async def test_a_document_not_in_the_list_is_refused_as_such(
    prod: Api, body: dict[str, Any], code: str
) -> None:
    refused = await request(prod, body, as_=prod_token("alice"), accept=GRAPHQL_RESPONSE)

    assert refused.status_code == 400
    assert "data" not in refused.json()
    assert error_codes(refused.json()) == [code]


@pytest.mark.parametrize(
    "body",
    [
        {"documentId": "sha256:abc"},
        {"documentId": "sha256:" + "A" * 64},
        {"documentId": ""},
        {"documentId": 5},
        {"doc_id": ["loan-page-v1"]},
        {"documentId": "loan-page-v1", "doc_id": "loan-page-v1"},
        {"documentId": "loan-page-v1", "query": NOT_TRUSTED},
        {"extensions": {"persistedQuery": {"version": 2, "sha256Hash": sha256(LOAN)}}},
        {"extensions": {"persistedQuery": {"version": True, "sha256Hash": sha256(LOAN)}}},
        {"extensions": {"persistedQuery": {"version": 1, "sha256Hash": 5}}},
        {"extensions": {"persistedQuery": {"version": 1}}},
        {"extensions": {"persistedQuery": "yes"}},
        {
            "extensions": {"persistedQuery": {"version": 1, "sha256Hash": sha256(LOAN)}},
            "query": NOT_TRUSTED,
        },
    ],
)
@pytest.mark.parametrize("method", ["POST", "GET"])
async def test_a_malformed_document_request_is_a_400_in_json(
    prod: Api, body: dict[str, Any], method: str
) -> None:
    if method == "GET" and not all(isinstance(value, (str, dict)) for value in body.values()):
        pytest.skip("a query string holds strings only")
    refused = await request(prod, body, as_=prod_token("svc", service=True), method=method)

    assert refused.status_code == 400 or (method == "GET" and refused.status_code == 405)
    assert refused.headers["content-type"] == "application/json"
    assert refused.json()["errors"][0]["message"]


async def test_automatic_persisted_queries_miss_register_and_hit(api: Api) -> None:
    persisted = {"persistedQuery": {"version": 1, "sha256Hash": sha256(NOT_TRUSTED)}}

    miss = await request(api, {"extensions": persisted}, as_=SERVICE, method="GET")
    registered = await request(api, {"query": NOT_TRUSTED, "extensions": persisted}, as_=SERVICE)
    hit = await request(api, {"extensions": persisted}, as_=SERVICE, method="GET")

    assert miss.status_code == 200
    assert miss.headers["cache-control"] == "private, no-cache, must-revalidate"
    assert without_cost(miss.json()) == {
        "errors": [
            {
                "message": "PersistedQueryNotFound",
                "extensions": {"code": "PERSISTED_QUERY_NOT_FOUND"},
            }
        ]
    }
    assert (
        without_cost(registered.json())
        == without_cost(hit.json())
        == {"data": {"__typename": "Query"}}
    )


async def test_automatic_persisted_queries_register_only_valid_documents(api: Api) -> None:
    invalid = "query { nope }"
    persisted = {"persistedQuery": {"version": 1, "sha256Hash": sha256(invalid)}}

    first = await request(api, {"query": invalid, "extensions": persisted}, as_=SERVICE)
    again = await request(api, {"extensions": persisted}, as_=SERVICE)

    assert "Cannot query field 'nope'" in first.json()["errors"][0]["message"]
    assert error_codes(again.json()) == ["PERSISTED_QUERY_NOT_FOUND"]


async def test_a_trusted_documents_request_does_no_parse_or_validation(
    moto_config: DynamoConfig, manifests: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counted in graphql-core, where every parse and validation starts, whoever calls it (the
    # module graphql.validation.validate, which the function of that name hides in its package).
    calls: list[str] = []
    validation = importlib.import_module("graphql.validation.validate")
    for module, name, counted_as in (
        (parser, "Parser", "parse"),
        (validation, "ValidationContext", "validate"),
    ):
        original = getattr(module, name)

        def counted(
            *args: Any, _original: Any = original, _name: str = counted_as, **kwargs: Any
        ) -> Any:
            calls.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    async with api_client(moto_config, **settings_of(manifests)) as api:
        at_start = list(calls)
        calls.clear()
        for body in (
            {"documentId": "loan-page-v1", "variables": LOAN_VARIABLES},
            {"documentId": "loan-page-v1", "variables": LOAN_VARIABLES, "operationName": "Loan"},
            {"documentId": f"sha256:{sha256(FORBIDDEN)}"},
        ):
            answered = await request(api, body, as_=SERVICE)
            assert "errors" not in answered.json(), answered.json()
        by_id = list(calls)
        await request(api, {"query": NOT_TRUSTED}, as_=SERVICE)

    # Each distinct text of the manifests, once for each endpoint's schema (`/graphql` and the
    # federation subgraph's `/subgraph`).
    assert at_start.count("parse") == 3 * 2
    assert by_id == []
    assert calls == ["parse", "validate"]


def write(path: Path, content: Any) -> Path:
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "is not JSON"),
        (
            {"format": "apollo-persisted-query-manifest", "version": 2, "operations": []},
            "has format 'apollo-persisted-query-manifest' version 2; expected",
        ),
        ({"format": "relay", "version": 1}, "has format 'relay'"),
        (
            {
                "format": "apollo-persisted-query-manifest",
                "version": 1,
                "operations": [{"id": 5, "body": LOAN}],
            },
            "operations[0]: needs string id",
        ),
        ([LOAN], "is neither a manifest object nor an id-to-text map"),
        ({"q1": 5}, "q1: its document is not a string"),
        ({md5(LOAN): CREATE}, f"{md5(LOAN)}: the id is not the md5 of its document"),
        ({sha256(LOAN): CREATE}, f"{sha256(LOAN)}: the id is not the sha256 of its document"),
        ({"bad": "query { nope }"}, "bad: Cannot query field 'nope' on type 'Query'."),
        ({"unparsable": "query {"}, "unparsable: Syntax Error"),
        (
            {
                "costly": "{ paymentsByStatus(status: RETRY, first: 100) { edges { node { history("
                "first: 100) { edges { node { version } } } } } } }"
            },
            "costly: The query costs",
        ),
    ],
    ids=[
        "not-json",
        "apollo-version",
        "format",
        "id-type",
        "array",
        "text-type",
        "md5",
        "sha256",
        "invalid",
        "unparsable",
        "costly",
    ],
)
async def test_a_bad_manifest_stops_the_start_naming_file_and_entry(
    moto_config: DynamoConfig, tmp_path: Path, content: Any, words: str
) -> None:
    path = write(tmp_path / "manifest.json", content)

    with pytest.raises(ManifestsRefused) as refused:
        async with api_client(moto_config, trusted_documents=str(path)):
            pass

    assert f"{path}: {words}" in str(refused.value)


async def test_one_id_for_two_texts_stops_the_start(
    moto_config: DynamoConfig, tmp_path: Path
) -> None:
    first = write(tmp_path / "a.json", {"shared": LOAN})
    second = write(tmp_path / "b.json", {"shared": FORBIDDEN})

    with pytest.raises(ManifestsRefused) as refused:
        async with api_client(moto_config, trusted_documents=f"{first},{second}"):
            pass

    assert f"{second}: shared: the id names another document too (in {first})" in str(refused.value)


async def test_graphiql_keeps_sending_text_in_local(api: Api) -> None:
    body = await api.post("{ __typename }")

    assert without_cost(body) == {"data": {"__typename": "Query"}}
