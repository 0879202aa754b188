"""`LOC_ENV=prod`: nothing for explorers, nothing leaked, nothing debug."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from datasource import DynamoConfig
from tests.api.conftest import PROD_SETTINGS, Api, api_client, error_codes, prod_token

PAYMENT_ID = "0190f5a4-0000-7000-8000-000000000000"


@pytest.fixture
async def prod(moto_config: DynamoConfig) -> AsyncIterator[Api]:
    async with api_client(moto_config, **PROD_SETTINGS) as api:
        yield api


async def test_introspection_is_off(prod: Api) -> None:
    body = await prod.post("{ __schema { types { name } } }", as_=prod_token("svc", service=True))
    assert body.get("data") is None
    assert "introspection" in body["errors"][0]["message"].lower()


async def test_the_subgraph_sdl_is_off_like_introspection(prod: Api) -> None:
    service = prod_token("gateway", service=True)
    entities = """query($representations: [_Any!]!) {
      _entities(representations: $representations) { ... on Loan { loanId } } }"""
    subgraph = prod.at("/subgraph")

    sdl = await subgraph.post("{ _service { sdl } }", as_=service)
    loans = await subgraph.post(
        entities,
        {"representations": [{"__typename": "Loan", "userId": "u", "loanId": "l"}]},
        as_=service,
    )

    assert sdl.get("data") is None
    assert "schema.subgraph.graphql" in sdl["errors"][0]["message"]
    assert loans == {"data": {"_entities": [{"loanId": "l"}]}}


async def test_graphiql_and_get_queries_are_off(prod: Api) -> None:
    page = await prod.http.get("/graphql", headers={"Accept": "text/html"})
    assert page.status_code != 200 or "graphiql" not in page.text.lower()
    query = await prod.http.get(
        "/graphql",
        params={"query": "{ __typename }"},
        headers={"Authorization": f"Bearer {prod_token('svc', service=True)}"},
    )
    assert query.status_code in (400, 404, 405)


async def test_the_development_tokens_are_refused(prod: Api) -> None:
    body = await prod.post("query { paymentsByStatus(status: RETRY) { edges { cursor } } }")
    # The default token of `api.post` is signed with the published development secret.
    assert error_codes(body) == ["UNAUTHENTICATED"]


async def test_unexpected_errors_are_masked_and_leak_nothing(
    prod: Api, monkeypatch: pytest.MonkeyPatch, moto_config: DynamoConfig
) -> None:
    async def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"Traceback: table {moto_config.table_name} "
            "arn:aws:dynamodb:us-east-2:123456789012:table/prod-loc-service at /app/datasource"
        )

    monkeypatch.setattr(prod.app.state.store, "batch_get", boom)
    body = await prod.post(
        f'query {{ payment(userId: "u", loanId: "l", paymentId: "{PAYMENT_ID}") {{ id }} }}',
        as_=prod_token("svc", service=True),
    )

    assert body["errors"][0]["message"] == "Unexpected error."
    assert body["errors"][0]["extensions"] == {"code": "INTERNAL"}
    text = str(body)
    for leak in ("Traceback", moto_config.table_name, "arn:aws", "/app/", "RuntimeError"):
        assert leak not in text


async def test_expected_failures_still_come_through(prod: Api) -> None:
    customer = prod_token("alice")
    service = prod_token("svc", service=True)
    ghost = {"userId": "u", "loanId": "l", "paymentId": PAYMENT_ID, "reason": "r"}

    missing = await prod.mutate("skipPayment", ghost, as_=service)
    assert missing["code"] == "NOT_FOUND"
    # A customer names trusted documents in prod (tests/api/test_trusted_documents.py has
    # FORBIDDEN and UNAUTHENTICATED through them); its text is refused as untrusted.
    untrusted = await prod.post(
        "query { paymentsByStatus(status: RETRY) { edges { cursor } } }", as_=customer
    )
    assert error_codes(untrusted) == ["DOCUMENT_NOT_TRUSTED"]
    bad = await prod.mutate(
        "createPayment",
        {"userId": "u", "loanId": "l#1", "amountCents": 5, "method": "ACH"},
        as_=service,
    )
    assert (bad["code"], bad["field"]) == ("INVALID_INPUT", "loanId")


async def test_request_accounting_is_off(prod: Api) -> None:
    body = await prod.post(
        "query { paymentsByStatus(status: RETRY) { edges { cursor } } }",
        as_=prod_token("svc", service=True),
        debug=True,
    )
    assert "errors" not in body
    assert "dynamodb" not in body.get("extensions", {})


CREATE = "mutation($input: CreatePaymentInput!) { createPayment(input: $input) { __typename } }"
CREATE_INPUT = {"loanId": "l", "amountCents": 5, "method": "ACH"}
# Each misspelling graphql-core would answer with "Did you mean ...?", and the name it misspells.
MISSPELLINGS: dict[str, tuple[str, str, dict[str, Any] | None]] = {
    "field": ("paymentz", "{ paymentz }", None),
    "argument": (
        "paymentIdd",
        f'{{ payment(loanId: "l", paymentIdd: "{PAYMENT_ID}") {{ id }} }}',
        None,
    ),
    "input field, literal": (
        "amountCent",
        'mutation { createPayment(input: {loanId: "l", amountCent: 5, method: ACH})'
        " { __typename } }",
        None,
    ),
    "input field, variable": ("proces", CREATE, {"input": {**CREATE_INPUT, "proces": "AUTO"}}),
    "enum value, literal": (
        "ACHH",
        'mutation { createPayment(input: {loanId: "l", amountCents: 5, method: ACHH})'
        " { __typename } }",
        None,
    ),
    "enum value, variable": ("ACHH", CREATE, {"input": {**CREATE_INPUT, "method": "ACHH"}}),
    "fragment type": (
        "Paymnt",
        f'{{ payment(loanId: "l", paymentId: "{PAYMENT_ID}") {{ ...f }} }}'
        " fragment f on Paymnt { id }",
        None,
    ),
    "variable type": (
        "PaymentStatuss",
        "query($s: PaymentStatuss) { paymentsByStatus(status: $s) { edges { cursor } } }",
        None,
    ),
}


@pytest.fixture
async def any_text(moto_config: DynamoConfig) -> AsyncIterator[Api]:
    """prod, with `LOC_DOCUMENTS=any`: every caller may send text, a token or not."""
    async with api_client(moto_config, **PROD_SETTINGS, documents="any") as api:
        yield api


def _error_messages(body: dict[str, Any]) -> str:
    assert body.get("errors"), body
    return "\n".join(error["message"] for error in body["errors"])


@pytest.mark.parametrize("service", [True, False], ids=["service token", "no token"])
@pytest.mark.parametrize(
    ("misspelled", "query", "variables"), MISSPELLINGS.values(), ids=MISSPELLINGS.keys()
)
async def test_suggestions_do_not_map_the_schema(
    prod: Api,
    any_text: Api,
    api: Api,
    service: bool,
    misspelled: str,
    query: str,
    variables: dict[str, Any] | None,
) -> None:
    as_ = prod_token("svc", service=True) if service else None
    # Without a token, text reaches validation only where the policy lets anyone send it.
    target = prod if service else any_text
    refused = _error_messages(await target.post(query, variables, as_=as_))
    assert misspelled in refused
    assert "Did you mean" not in refused
    # Outside production the same request gets its hint: the check above can fail.
    assert "Did you mean" in _error_messages(await api.post(query, variables))
