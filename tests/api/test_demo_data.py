"""The first local start fills a new table with demonstration payments, and only the first."""

from __future__ import annotations

import dataclasses
import logging
import uuid

import boto3
import pytest

from datasource import DynamoConfig
from domain.enums import PaymentMethod, PaymentStatus
from domain.transitions import RULES
from tests.api.conftest import api_client, stored_items

EVERY_STATUS = """query($s: PaymentStatus!) { paymentsByStatus(status: $s, first: 100) {
  edges { node { userId confirmationId applications { amountCents } amountCents } } } }"""


async def test_a_new_local_table_gets_payments_in_every_status(moto_config: DynamoConfig) -> None:
    fresh = dataclasses.replace(moto_config, table_name=f"demo-{uuid.uuid4().hex[:12]}")

    async with api_client(fresh, seed_demo_data=True) as api:
        for status in PaymentStatus:
            data = await api.data(EVERY_STATUS, {"s": status.name})
            edges = data["paymentsByStatus"]["edges"]
            assert edges, f"no demonstration payment is {status.name}"
            for edge in edges:
                node = edge["node"]
                if status is PaymentStatus.COMPLETED:
                    assert node["confirmationId"]
                    applied = sum(a["amountCents"] for a in node["applications"])
                    assert applied == node["amountCents"]
    seeded = len(stored_items(fresh))
    ttl = boto3.client(
        "dynamodb",
        region_name=fresh.region,
        endpoint_url=fresh.endpoint_url,
        aws_access_key_id="testkey",
        aws_secret_access_key="testkey",
    ).describe_time_to_live(TableName=fresh.table_name)["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "loc_expires_at"}

    async with api_client(fresh, seed_demo_data=True):
        pass
    assert len(stored_items(fresh)) == seeded


LOAN_PAYMENTS = """query($u: ID!, $l: ID!) { loan(userId: $u, loanId: $l) { payments(first: 20) {
  edges { node { status method attempts confirmationId version
    history(first: 10) { complete edges { node { version fromStatus toStatus actorKind actorId } } }
  } } } } }"""


def _reachable(method: PaymentMethod) -> list[PaymentStatus]:
    targets = {rule.target for rule in RULES if method in rule.methods}
    return [
        status for status in PaymentStatus if status is PaymentStatus.PENDING or status in targets
    ]


async def test_each_loan_has_one_payment_in_every_status_its_method_can_reach(
    moto_config: DynamoConfig,
) -> None:
    fresh = dataclasses.replace(moto_config, table_name=f"demo-{uuid.uuid4().hex[:12]}")
    loans = {"loan-1": ("user-1", PaymentMethod.ACH), "loan-2": ("user-2", PaymentMethod.PINLESS)}

    async with api_client(fresh, seed_demo_data=True) as api:
        for loan, (user, method) in loans.items():
            data = await api.data(LOAN_PAYMENTS, {"u": user, "l": loan})
            payments = [edge["node"] for edge in data["loan"]["payments"]["edges"]]

            assert {payment["method"] for payment in payments} == {method.name}
            statuses = sorted(
                (PaymentStatus[payment["status"]] for payment in payments),
                key=list(PaymentStatus).index,
            )
            assert statuses == _reachable(method), loan
            failed = [p for p in payments if p["status"] == PaymentStatus.FAILED.name]
            assert [p["attempts"] for p in failed] == [3], "failed only when presented 3 times"
            confirmation_ids = [p["confirmationId"] for p in payments if p["confirmationId"]]
            assert len(set(confirmation_ids)) == len(confirmation_ids)
            # Written through the one workflow: every payment has its whole history, by the job.
            for payment in payments:
                history = payment["history"]
                events = [edge["node"] for edge in history["edges"]]
                assert history["complete"] is True
                assert [event["version"] for event in events] == list(
                    range(1, payment["version"] + 1)
                )
                assert events[-1]["toStatus"] == payment["status"]
                assert {(e["actorKind"], e["actorId"]) for e in events} == {
                    ("JOB", "loc-payments-demo-data")
                }
    assert _reachable(PaymentMethod.ACH) == [
        PaymentStatus.PENDING,
        PaymentStatus.ACHSENT,
        PaymentStatus.COMPLETED,
        PaymentStatus.RETRY,
        PaymentStatus.SKIPPED,
        PaymentStatus.FAILED,
        PaymentStatus.RETURNED,
    ]
    assert _reachable(PaymentMethod.PINLESS) == [
        PaymentStatus.PENDING,
        PaymentStatus.COMPLETED,
        PaymentStatus.RETRY,
        PaymentStatus.SKIPPED,
        PaymentStatus.FAILED,
        PaymentStatus.CHARGED_BACK,
    ]


async def test_the_demonstration_data_logs_one_line_not_a_line_per_write(
    moto_config: DynamoConfig, caplog: pytest.LogCaptureFixture
) -> None:
    fresh = dataclasses.replace(moto_config, table_name=f"demo-{uuid.uuid4().hex[:12]}")

    with caplog.at_level(logging.INFO):
        async with api_client(fresh, seed_demo_data=True) as api:
            await api.create(user="user-9")

    demo = [r.getMessage() for r in caplog.records if r.name == "loc_payments.demo"]
    assert demo == [
        "demonstration data: 13 payments of user-1 (loan-1) and user-2 (loan-2) in all 8 "
        "statuses; each payment's history holds its writes"
    ]
    # The seeding's writes are quiet; a request's write afterwards is audited as always.
    audited = [r for r in caplog.records if r.name == "loc_payments.audit"]
    assert [(r.__dict__["user_id"], r.__dict__["event"]) for r in audited] == [
        ("user-9", "payment.created")
    ]
