"""Who still uses a field (SPEC §19): `loc_payments_field_usage_total{client, field}` counts,
per operation run, each schema coordinate it selected, by the client its headers or its trusted
document's manifest name."""

from __future__ import annotations

import json
from pathlib import Path

from datasource import DynamoConfig
from tests.api.conftest import SERVICE, Api, api_client
from tests.api.metrics import metric

USAGE = "loc_payments_field_usage_total"
PAGE = """query LoanPage($l: ID!) { loan(userId: "alice", loanId: $l) {
  payments(first: 10) { edges { node { paymentId status } } } } }"""


async def page(api: Api, headers: dict[str, str]) -> None:
    response = await api.http.post(
        "/graphql",
        json={"query": PAGE, "variables": {"l": "loan-1"}},
        headers={"Authorization": f"Bearer {SERVICE}", **headers},
    )
    assert "errors" not in response.json(), response.json()


async def scraped(api: Api) -> str:
    return (await api.http.get("/metrics")).text


async def test_each_field_counts_once_per_operation_by_the_clients_name(api: Api) -> None:
    for _ in range(3):
        await api.create(user="alice", loan="loan-1")
    web = {"apollographql-client-name": "web", "apollographql-client-version": "2.4.0"}

    await page(api, web)
    await page(api, web)
    await page(api, {})
    text = await scraped(api)

    # Three payments on the page, two operations: each field twice, not six times.
    assert metric(text, USAGE, client="web@2.4.0", field="Payment.status") == 2
    assert metric(text, USAGE, client="web@2.4.0", field="Query.loan") == 2
    assert metric(text, USAGE, client="web@2.4.0", field="Loan.payments(first:)") == 2
    # The creations above named no client either; they select no loan.
    assert metric(text, USAGE, client="(unknown)", field="Query.loan") == 1
    assert f'{USAGE}{{client="web@2.4.0",field="Payment.amountCents"}}' not in text


async def test_a_trusted_document_is_counted_for_its_manifest(
    moto_config: DynamoConfig, tmp_path: Path
) -> None:
    manifest = tmp_path / "checkout-web.json"
    manifest.write_text(json.dumps({"loan-page-v1": PAGE}))
    async with api_client(moto_config, trusted_documents=str(manifest)) as api:
        response = await api.http.post(
            "/graphql",
            json={"documentId": "loan-page-v1", "variables": {"l": "loan-1"}},
            headers={"Authorization": f"Bearer {SERVICE}"},
        )
        text = await scraped(api)

    assert "errors" not in response.json()
    assert metric(text, USAGE, client="checkout-web", field="Query.loan") == 1


async def test_client_names_past_the_limit_count_as_other(api: Api) -> None:
    for number in range(52):
        await page(api, {"apollographql-client-name": f"client-{number}"})
    text = await scraped(api)

    assert metric(text, USAGE, client="client-49", field="Query.loan") == 1
    assert metric(text, USAGE, client="(other)", field="Query.loan") == 2
    assert 'client="client-50"' not in text


async def test_an_operation_that_does_not_validate_counts_nothing(api: Api) -> None:
    await api.post("{ loan(loanId: 1) { nope } }")
    assert USAGE + "{" not in await scraped(api)
