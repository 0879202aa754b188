"""A query's lists read only the fields of Payment its document selects (`schema.projection`),
and the compiled plan reads a listed payment's fields from its item (`schema.stored_payments`):
the answer must be exactly what a full read answers, and what the plan answers reading each
payment instead (`LOC_LEAVES_FROM_ITEMS=false`), for every selection; a payment listed in part
must never answer a field of the same document that the list did not read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import schema.projection
from datasource import DynamoConfig, PaymentStore
from domain.enums import PaymentMethod, PaymentStatus
from tests.api.conftest import Api, api_client
from tests.api.raw_table import raw_client
from tests.hypothesis_profiles import examples
from tests.payment_samples import full_payment, payment_in, sample_payment, stored_new

USER, LOAN = "alice", "loan-1"
SCALARS = [
    "id",
    "paymentId",
    "userId",
    "loanId",
    "amountCents",
    "status",
    "method",
    "process",
    "confirmationId",
    "accountLastFour",
    "intendedInstallmentId",
    "attempts",
    "updateReason",
    "returnCode",
    "version",
    "createdAt",
    "updatedAt",
    "firstPresentedAt",
    "completedAt",
    "__typename",
]
NESTED = [
    "applications { paymentId installmentId amountCents paymentDate "
    "installment { installmentId } }",
    "loan { id loanId }",
    "history(first: 3) { edges { node { version toStatus } } }",
    "allowedTransitions",
    "retryEligibility { eligible attemptsRemaining deadline reason }",
]
selections = st.lists(st.sampled_from(SCALARS + NESTED), min_size=1, max_size=6, unique=True)


@pytest.fixture
async def stored(moto_store: PaymentStore) -> list[str]:
    """A loan whose payments differ in every optional field: their ids, newest first."""
    payments = [
        sample_payment(user_id=USER, loan_id=LOAN),
        payment_in(PaymentStatus.RETRY, PaymentMethod.ACH, user_id=USER, loan_id=LOAN),
        full_payment(user_id=USER, loan_id=LOAN, account_last_four="6789"),
        payment_in(PaymentStatus.COMPLETED, PaymentMethod.PINLESS, user_id=USER, loan_id=LOAN),
    ]
    for payment in payments:
        await stored_new(moto_store, payment)
    return sorted((payment.payment_id for payment in payments), reverse=True)


@pytest.fixture
async def api(moto_config: DynamoConfig, stored: list[str]) -> AsyncIterator[Api]:
    async with api_client(moto_config) as client:
        yield client


@pytest.fixture
async def from_payments(moto_config: DynamoConfig, stored: list[str]) -> AsyncIterator[Api]:
    """The same table served with each listed payment's fields read from the payment."""
    async with api_client(moto_config, leaves_from_items=False) as client:
        yield client


# What reads the whole payment (rules over many fields).
WHOLE = {"allowedTransitions", "retryEligibility { eligible attemptsRemaining deadline reason }"}


def _lists(params: dict[str, Any]) -> bool:
    """Whether a Query's parameters are a list's (GSI2's, or a loan's), not a history's."""
    prefix = params.get("ExpressionAttributeValues", {}).get(":prefix", {}).get("S", "")
    return params.get("IndexName") == "GSI2" or prefix == f"LOAN#{LOAN}#PAYMENT#"


def _document(listed: list[str], looked_up: list[str] | None, by_status: bool) -> str:
    node = " ".join(listed)
    lists = (
        f"paymentsByStatus(status: PENDING, first: 10) {{ edges {{ node {{ {node} }} }} }}"
        if by_status
        else f'loan(loanId: "{LOAN}", userId: "{USER}") '
        f"{{ payments(first: 10) {{ edges {{ cursor node {{ {node} }} }} }} }}"
    )
    lookup = ""
    if looked_up is not None:
        # A payment the list read too: answered from the list's read within the request.
        lookup = f"one: nodes(ids: [$id]) {{ ... on Payment {{ {' '.join(looked_up)} }} }}"
    head = "query Projected($id: ID!)" if looked_up is not None else "query Projected"
    return f"{head} {{ {lists} {lookup} }}"


async def _answer(api: Api, document: str, variables: dict[str, Any]) -> dict[str, Any]:
    body = await api.post(document, variables)
    assert "errors" not in body, (document, body["errors"])
    return body


@settings(
    max_examples=examples(20),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
# A field with arguments (its coordinate and its arguments' coordinates): always tried.
@example(listed=["status", NESTED[2]], looked_up=None, by_status=False)
@given(
    listed=selections,
    looked_up=st.none() | selections,
    by_status=st.booleans(),
)
async def test_a_projected_list_answers_what_a_full_read_answers(
    api: Api,
    from_payments: Api,
    stored: list[str],
    monkeypatch: pytest.MonkeyPatch,
    listed: list[str],
    looked_up: list[str] | None,
    by_status: bool,
) -> None:
    document = _document(listed, looked_up, by_status)
    lookup = (
        f'{{ p: payment(userId: "{USER}", loanId: "{LOAN}", paymentId: "{stored[1]}") {{ id }} }}'
    )
    node_id = (await api.data(lookup))["p"]["id"]
    variables = {"id": node_id} if looked_up is not None else {}

    sent: list[dict[str, Any]] = []
    events = api.app.state.store.client.meta.events
    events.register("provide-client-params.dynamodb.Query", lambda params, **_: sent.append(params))

    projected = await _answer(api, document, variables)
    projections = [params.get("ProjectionExpression") for params in sent if _lists(params)]
    sent.clear()
    with monkeypatch.context() as patch:
        patch.setattr(schema.projection, "payment_fields", lambda _selected: None)
        full = await _answer(api, document, variables)

    assert projected == full, document
    assert await _answer(from_payments, document, variables) == projected, document
    assert not any(_lists(params) and "ProjectionExpression" in params for params in sent)
    whole = any(name in WHOLE for name in [*listed, *(looked_up or [])])
    assert all((projection is None) == whole for projection in projections), projections


@pytest.mark.parametrize(
    ("field", "attribute", "value", "code"),
    [
        # Nullable: the field alone is null, the page answers the other payments.
        ("firstPresentedAt", "loc_first_presented_date", "last week", "INVALID_INPUT"),
        # Not nullable, nor is any field above it: the null reaches the answer's data.
        ("status", "loc_status", "MISLAID", "INTERNAL"),
    ],
)
async def test_a_corrupt_item_fails_the_field_it_cannot_answer_with_a_typed_error(
    api: Api,
    from_payments: Api,
    moto_config: DynamoConfig,
    stored: list[str],
    field: str,
    attribute: str,
    value: str,
    code: str,
) -> None:
    raw_client(moto_config).update_item(
        TableName=moto_config.table_name,
        Key={"PK": {"S": f"USER#{USER}"}, "SK": {"S": f"LOAN#{LOAN}#PAYMENT#{stored[1]}"}},
        UpdateExpression="SET #corrupt = :value",
        ExpressionAttributeNames={"#corrupt": attribute},
        ExpressionAttributeValues={":value": {"S": value}},
    )
    document = (
        f'{{ loan(loanId: "{LOAN}", userId: "{USER}") '
        f"{{ payments(first: 10) {{ edges {{ node {{ paymentId {field} }} }} }} }} }}"
    )

    answered = await api.post(document)

    assert answered == await from_payments.post(document)
    (error,) = answered["errors"]
    assert error["extensions"]["code"] == code
    assert error["path"] == ["loan", "payments", "edges", 1, "node", field]
    if field == "status":
        assert answered["data"] is None
    else:
        edges = answered["data"]["loan"]["payments"]["edges"]
        assert [edge["node"]["paymentId"] for edge in edges] == stored
        assert edges[1]["node"][field] is None
