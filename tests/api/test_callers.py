"""Who may do what (SPEC §7): tokens, customers against each other, services."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from datasource import DynamoConfig
from process.settings import Settings
from tests.api.conftest import (
    ALICE,
    BOB,
    SERVICE,
    Api,
    api_client,
    error_codes,
    payment_items,
    stored_items,
    token,
)

ROOT_QUERIES = [
    'query { payment(loanId: "l", paymentId: "0190f5a4-0000-7000-8000-000000000000") { id } }',
    'query { loan(loanId: "l") { payments { edges { cursor } } } }',
    'query { paymentByConfirmation(confirmationId: "c") { id } }',
    "query { paymentsByStatus(status: RETRY) { edges { cursor } } }",
    'query { node(id: "UGF5bWVudA") { id } }',
]

TRANSITIONS = [
    ("submitPayment", {"confirmationId": "conf-1"}),
    ("completePayment", {}),
    ("schedulePaymentRetry", {"returnCode": "R01"}),
    ("failPayment", {}),
    ("returnPayment", {"returnCode": "R01"}),
    ("chargeBackPayment", {}),
    ("skipPayment", {}),
]


@pytest.mark.parametrize("query", ROOT_QUERIES)
async def test_no_token_is_unauthenticated(api: Api, query: str) -> None:
    body = await api.post(query, as_=None)
    assert error_codes(body) == ["UNAUTHENTICATED"]


@pytest.mark.parametrize(
    "query", ["{ __typename }", "{ __schema { queryType { name } } }"], ids=["typename", "schema"]
)
async def test_without_a_token_the_schema_alone_answers_reading_and_charging_nothing(
    api: Api, query: str
) -> None:
    """docs/callers-and-errors.md's Budgets table: a request with no valid token reads nothing
    and is charged nothing; only what the schema itself answers is answered."""
    body = await api.post(query, as_=None, debug=True)
    assert "errors" not in body and body["data"]
    assert body["extensions"]["dynamodb"]["requests"] == 0
    assert "cost" not in body["extensions"]


@pytest.mark.parametrize(
    "bad_token",
    [
        token("alice", ttl=-10 - int(Settings().auth_leeway_seconds)),  # past the clock skew
        jwt.encode({"sub": "alice", "exp": int(time.time()) + 60}, "x" * 40, algorithm="HS256"),
        jwt.encode({"sub": "alice"}, "loc-payments-local-development-secret-0123456789"),
        "not-a-jwt",
    ],
    ids=["expired", "wrong-secret", "no-exp", "garbage"],
)
async def test_invalid_tokens_are_unauthenticated(api: Api, bad_token: str) -> None:
    body = await api.post(ROOT_QUERIES[0], as_=bad_token)
    assert error_codes(body) == ["UNAUTHENTICATED"]


async def test_a_customer_sees_none_of_another_users_data(api: Api) -> None:
    bobs = await api.create(user="bob", loan="loan-b", method="ACH")
    await api.move("submitPayment", bobs, confirmationId="conf-bob")
    vars_ = {"u": "bob", "l": "loan-b", "p": bobs["paymentId"]}

    seen = await api.data(
        """query($u: ID, $l: ID!, $p: ID!) {
          payment(userId: $u, loanId: $l, paymentId: $p) { id }
          loan(userId: $u, loanId: $l) { payments { edges { node { id } } } }
          byStatus: loan(userId: $u, loanId: $l) {
            payments(status: ACHSENT) { edges { node { id } } } }
          paymentByConfirmation(userId: $u, confirmationId: "conf-bob") { id }
        }""",
        vars_,
        as_=ALICE,
    )
    assert seen == {
        "payment": None,
        "loan": {"payments": {"edges": []}},
        "byStatus": {"payments": {"edges": []}},
        "paymentByConfirmation": None,
    }
    node_query = "query($id: ID!) { node(id: $id) { id } }"
    for node_id in (bobs["id"], bobs["loan"]["id"]):
        assert (await api.data(node_query, {"id": node_id}, as_=ALICE))["node"] is None
        assert (await api.data(node_query, {"id": node_id}, as_=BOB))["node"] is not None


async def test_another_users_payment_reads_like_a_missing_one(api: Api) -> None:
    bobs = await api.create(user="bob", loan="loan-b")
    query = 'query($u: ID, $p: ID!) { payment(userId: $u, loanId: "loan-b", paymentId: $p) { id } }'
    missing = "0190f5a4-0000-7000-8000-000000000000"

    theirs = await api.post(query, {"u": "bob", "p": bobs["paymentId"]}, as_=ALICE)
    nothing = await api.post(query, {"u": "bob", "p": missing}, as_=ALICE)

    assert theirs == nothing == {"data": {"payment": None}}


async def test_a_cursor_of_another_users_list_is_refused(api: Api) -> None:
    for user in ("alice", "bob"):
        for _ in range(2):
            await api.create(user=user, loan="loan-1")
    page = (
        'query($a: String) { loan(loanId: "loan-1") { payments(first: 1, after: $a) {'
        " pageInfo { endCursor } edges { node { userId } } } } }"
    )
    bobs_cursor = (await api.data(page, as_=BOB))["loan"]["payments"]["pageInfo"]["endCursor"]

    body = await api.post(page, {"a": bobs_cursor}, as_=ALICE)

    assert error_codes(body) == ["INVALID_INPUT"]
    assert "bob" not in str(body)


async def test_customers_create_manual_payments_on_their_own_loans_only(
    api: Api, moto_config: DynamoConfig
) -> None:
    base = {"loanId": "loan-1", "amountCents": 100, "method": "ACH"}

    own = await api.mutate("createPayment", base, as_=ALICE)
    assert own["payment"]["userId"] == "alice"
    others = await api.mutate("createPayment", {**base, "userId": "bob"}, as_=ALICE)
    assert (others["__typename"], others["code"]) == ("NotFoundError", "NOT_FOUND")
    body = await api.post(
        'mutation { createPayment(input: {loanId: "loan-1", amountCents: 100, method: ACH,'
        " process: AUTO}) { __typename } }",
        as_=ALICE,
    )
    assert error_codes(body) == ["FORBIDDEN"]
    assert len(payment_items(moto_config)) == 1


@pytest.mark.parametrize(("mutation", "extra"), TRANSITIONS)
async def test_transitions_are_for_services_only(
    api: Api, moto_config: DynamoConfig, mutation: str, extra: dict[str, Any]
) -> None:
    payment = await api.create(user="alice")
    before = stored_items(moto_config)
    named = {k: payment[k] for k in ("userId", "loanId", "paymentId")}
    type_name = mutation[0].upper() + mutation[1:] + "Input"
    query = f"mutation($i: {type_name}!) {{ {mutation}(input: $i) {{ __typename }} }}"
    variables = {"i": {**named, "reason": "r", **extra}}

    assert error_codes(await api.post(query, variables, as_=ALICE)) == ["FORBIDDEN"]
    assert error_codes(await api.post(query, variables, as_=None)) == ["UNAUTHENTICATED"]
    assert stored_items(moto_config) == before


async def test_payments_by_status_is_for_services(api: Api) -> None:
    body = await api.post(ROOT_QUERIES[3], as_=ALICE)
    assert error_codes(body) == ["FORBIDDEN"]
    assert error_codes(await api.post(ROOT_QUERIES[3], as_=SERVICE)) == []


async def test_rs256_tokens_from_a_public_key_file(
    moto_config: DynamoConfig, tmp_path: Path
) -> None:
    from tests.api.conftest import api_client

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = tmp_path / "jwt.pub"
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    claims = {"sub": "svc", "scope": "payments:service", "iss": "idp", "aud": "payments"}

    async with api_client(
        moto_config,
        env="test",
        auth_jwt_public_key_file=public,
        auth_jwt_issuer="idp",
        auth_jwt_audience="payments",
        cursor_secret="a-test-cursor-secret-of-enough-bytes",
    ) as api:
        good = jwt.encode({**claims, "exp": int(time.time()) + 60}, key, algorithm="RS256")
        wrong_aud = jwt.encode(
            {**claims, "aud": "other", "exp": int(time.time()) + 60}, key, algorithm="RS256"
        )
        hs = token("svc", service=True)
        assert error_codes(await api.post(ROOT_QUERIES[3], as_=good)) == []
        assert error_codes(await api.post(ROOT_QUERIES[3], as_=wrong_aud)) == ["UNAUTHENTICATED"]
        assert error_codes(await api.post(ROOT_QUERIES[3], as_=hs)) == ["UNAUTHENTICATED"]


async def test_a_token_accepted_once_is_refused_when_it_expires(moto_config: DynamoConfig) -> None:
    now = time.time()
    async with api_client(moto_config, token_clock=lambda: now) as api:
        short = token("svc", service=True, ttl=60)
        # From the token's own making: the app's start may have taken more than a second.
        now = time.time()
        query = ROOT_QUERIES[3]
        assert error_codes(await api.post(query, as_=short)) == []

        now += 61  # past `exp`, within the clock skew allowed
        assert error_codes(await api.post(query, as_=short)) == []

        now += Settings().auth_leeway_seconds
        assert error_codes(await api.post(query, as_=short)) == ["UNAUTHENTICATED"]
