"""Who still uses a field (SPEC §19): `loc_payments_field_usage_total{client, field}` counts,
per operation run for an authenticated caller, each schema coordinate it selected, by the client
its trusted document's manifest or else its headers name."""

from __future__ import annotations

import functools
import json
import logging
import random
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from prometheus_client import generate_latest

from datasource import DynamoConfig
from engine import Observed
from resolvers.callers import Caller
from resolvers.context import Context
from schema import build_schema
from server.request_records import Metrics
from tests.api.conftest import (
    PROD_SETTINGS,
    SERVICE,
    Api,
    api_client,
    error_codes,
    prod_token,
)
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


async def test_a_trusted_document_counts_for_its_manifest_whatever_client_the_headers_name(
    moto_config: DynamoConfig, tmp_path: Path
) -> None:
    manifest = tmp_path / "checkout-web.json"
    manifest.write_text(json.dumps({"loan-page-v1": PAGE}))
    async with api_client(moto_config, trusted_documents=str(manifest)) as api:
        response = await api.http.post(
            "/graphql",
            json={"documentId": "loan-page-v1", "variables": {"l": "loan-1"}},
            headers={"Authorization": f"Bearer {SERVICE}", "apollographql-client-name": "spoofed"},
        )
        text = await scraped(api)

    assert "errors" not in response.json()
    assert metric(text, USAGE, client="checkout-web", field="Query.loan") == 1
    assert 'client="spoofed"' not in text


async def test_refused_and_unauthenticated_operations_count_nothing_and_take_no_label(
    moto_config: DynamoConfig, tmp_path: Path
) -> None:
    by_status = "{ paymentsByStatus(status: PENDING, first: 1) { edges { node { paymentId } } } }"
    manifest = tmp_path / "checkout-web.json"
    manifest.write_text(json.dumps({"loan-page-v1": PAGE, "by-status-v1": by_status}))
    settings = {**PROD_SETTINGS, "trusted_documents": str(manifest), "metrics": "app"}
    customer = {"Authorization": f"Bearer {prod_token('alice')}"}
    service = {"Authorization": f"Bearer {prod_token('collections-job', service=True)}"}
    refusals: list[tuple[str | None, dict[str, Any], dict[str, str]]] = [
        # No token, a trusted document: it runs, and its field refuses the caller.
        ("UNAUTHENTICATED", {"documentId": "loan-page-v1", "variables": {"l": "loan-1"}}, {}),
        ("FORBIDDEN", {"documentId": "by-status-v1"}, customer),
        ("DOCUMENT_NOT_TRUSTED", {"query": PAGE, "variables": {"l": "loan-1"}}, customer),
        (None, {"query": "{ loan(loanId: 1) { nope } }"}, service),  # does not validate
    ]
    async with api_client(moto_config, **settings) as api:
        # More client names than there are labels (50), each on a refused operation.
        for number in range(26):
            for code, body, headers in refusals:
                response = await api.http.post(
                    "/graphql",
                    json=body,
                    headers={**headers, "apollographql-client-name": f"{code}-{number}"},
                )
                assert error_codes(response.json()) == [code], response.text
        ran = await api.http.post(
            "/graphql",
            json={"query": PAGE, "variables": {"l": "loan-1"}},
            headers={**service, "apollographql-client-name": "collections"},
        )
        text = await scraped(api)

    assert "errors" not in ran.json(), ran.text
    # Its own label: the refused operations took none of the fifty.
    assert metric(text, USAGE, client="collections", field="Query.loan") == 1
    counted = {line.split('client="')[1].split('"')[0] for line in text.splitlines()
               if line.startswith(USAGE + "{")}  # fmt: skip
    assert counted == {"collections"}


def test_random_selections_leave_the_memory_and_the_scrape_flat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """However many distinct selections clients make, what is kept is one count per client and
    schema coordinate: the memory stays flat and so does the scrape."""
    # The request log's lines are pytest's to keep when it captures logs: not the metrics' memory.
    monkeypatch.setattr(logging.getLogger("loc_payments.request"), "disabled", True)
    coordinates = sorted(build_schema().selected_fields(SELECT_ALL))
    assert len(coordinates) > 20
    metrics = Metrics()
    draw = random.Random(55)
    contexts = [observing(f"client-{number}") for number in range(3)]

    def run(operations: int) -> None:
        for _ in range(operations):
            selection = frozenset(draw.sample(coordinates, 8))
            context = draw.choice(contexts)
            metrics.observe(
                Observed(
                    "Page", context, [], 0.001, selected=functools.partial(frozenset, selection)
                )
            )

    run(3_000)  # every client has met every coordinate by now
    series = generate_latest(metrics.registry).decode().count(USAGE + "{")
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        run(20_000)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()

    # 20,000 distinct selections kept as such would hold megabytes.
    assert grown < 64 * 1024, f"{grown} bytes more after 20,000 random selections"
    assert generate_latest(metrics.registry).decode().count(USAGE + "{") == series
    assert series == len(contexts) * len(coordinates)


# Every field of a payment's loan page, and a few arguments and enum values.
SELECT_ALL = """query All($l: ID!) {
  loan(userId: "alice", loanId: $l) { id loanId userId
    payments(first: 10, status: PENDING) { edges { cursor node {
      id paymentId userId loanId amountCents status method process confirmationId
      accountLastFour intendedInstallmentId attempts updateReason returnCode version
      createdAt updatedAt firstPresentedAt completedAt allowedTransitions } } } } }"""


def observing(client: str) -> Context:
    """The context of an operation run for a service, as `Metrics.observe` reads it."""
    context = Context(
        store=cast(Any, None),  # `observe` reads no store
        max_attempts=3,
        clock=lambda: datetime.now(UTC),
        authenticated=Caller("collections-job", is_service=True),
    )
    context.client = client
    return context
