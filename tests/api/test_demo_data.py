"""The first local start fills a new table with demonstration payments, and only the first."""

from __future__ import annotations

import dataclasses
import uuid

import boto3

from datasource import DynamoConfig
from domain.enums import PaymentStatus
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
