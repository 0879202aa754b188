"""The parts of the least-privilege check (`tests/least_privilege.py`): what a call needs, what
the stack's task role grants, and the verdict. The check itself runs at the end of every session."""

from __future__ import annotations

import asyncio
from pathlib import Path

from datasource import (
    COLLECT_JOB,
    LOCAL_SETUP,
    SERVICE,
    SERVICE_GRANTS,
    DynamoConfig,
    Operation,
    acting_as,
    granted,
    operations_of,
    required,
)
from domain.payment import PaymentRef
from process.bootstrap import payment_store
from process.settings import Settings
from tests.api.conftest import api_client
from tests.infra.committed import committed
from tests.least_privilege import policy_grants, problems

TABLE_NAME = "payments"


def test_the_task_role_grants_exactly_the_services_grants_and_nothing_else() -> None:
    template = committed()
    statements = [
        statement
        for policy in template["Resources"]["TaskRole"]["Properties"]["Policies"]
        for statement in policy["PolicyDocument"]["Statement"]
    ]

    assert policy_grants(template) == granted(SERVICE_GRANTS)
    assert template["Resources"]["TaskRole"]["Properties"].get("ManagedPolicyArns") is None
    assert all(statement["Effect"] == "Allow" for statement in statements)
    assert not any("*" in str(statement) for statement in statements)
    assert all(action.startswith("dynamodb:") for s in statements for action in s["Action"])


def test_a_transaction_needs_the_actions_of_its_items_not_transact_write_items() -> None:
    params = {
        "TransactItems": [
            {"Put": {"TableName": TABLE_NAME, "Item": {}}},
            {"Update": {"TableName": TABLE_NAME, "Key": {}}},
            {"ConditionCheck": {"TableName": TABLE_NAME, "Key": {}}},
        ]
    }

    assert required("TransactWriteItems", params, table_name=TABLE_NAME) == {
        ("dynamodb:PutItem", "table"),
        ("dynamodb:UpdateItem", "table"),
        ("dynamodb:ConditionCheckItem", "table"),
    }


def test_a_query_on_an_index_needs_the_index_and_another_table_is_named_in_full() -> None:
    on_index = {"TableName": TABLE_NAME, "IndexName": "GSI2"}
    elsewhere = {"TableName": "someone-elses", "IndexName": "GSI2"}

    assert required("Query", on_index, table_name=TABLE_NAME) == {("dynamodb:Query", "index/GSI2")}
    assert required("Query", elsewhere, table_name=TABLE_NAME) == {
        ("dynamodb:Query", "table:someone-elses/index/GSI2")
    }
    assert required("GetRecords", {"ShardIterator": "x"}, table_name=TABLE_NAME) == {
        ("dynamodb:GetRecords", "stream")
    }


def test_the_verdict_names_what_is_not_granted_and_with_the_whole_suite_what_is_unused() -> None:
    grants = {("dynamodb:GetItem", "table"), ("dynamodb:Query", "index/GSI1")}
    recorded = {
        Operation(SERVICE, "dynamodb:GetItem", "table"),
        Operation(SERVICE, "dynamodb:Scan", "table"),
        # The local table's creation is never made in AWS.
        Operation(LOCAL_SETUP, "dynamodb:CreateTable", "table"),
    }

    assert problems(recorded, grants, whole_suite=False) == [
        "not granted to the task role: dynamodb:Scan on table"
    ]
    assert problems(recorded, grants, whole_suite=True) == [
        "not granted to the task role: dynamodb:Scan on table",
        "granted but never made: dynamodb:Query on index/GSI1",
    ]


async def test_the_service_records_what_a_request_makes_as_its_own_and_setup_apart(
    moto_config: DynamoConfig, tmp_path: Path
) -> None:
    async with api_client(moto_config, aws_operation_log=tmp_path) as api:
        await api.create()

    recorded = operations_of(tmp_path)
    made = {(op.action, op.resource) for op in recorded if op.role == SERVICE}
    assert ("dynamodb:PutItem", "table") in made  # the payment, in its transaction
    assert made <= granted(SERVICE_GRANTS)
    # `local` looked for its table first, as setup, not as the service.
    assert Operation(LOCAL_SETUP, "dynamodb:DescribeTable", "table") in recorded


async def test_a_lookup_that_other_lookups_share_is_made_as_its_callers_role(
    moto_config: DynamoConfig, tmp_path: Path
) -> None:
    # A coalesced call runs in a context of its own (no caller's deadline or accounting): a
    # job's reads must still be recorded as the job's, or its operator would lack a grant.
    settings = Settings(
        table_name=moto_config.table_name,
        dynamodb_endpoint=moto_config.endpoint_url,
        aws_operation_log=tmp_path,
    )
    refs = [PaymentRef("u", "loan", f"p{n}") for n in range(2)]
    with acting_as(COLLECT_JOB):
        async with payment_store(settings) as (store, _created):
            await asyncio.gather(store.batch_get(refs[:1]), store.batch_get(refs[1:]))

    made = {(op.role, op.action) for op in operations_of(tmp_path)}
    assert (COLLECT_JOB, "dynamodb:BatchGetItem") in made
    assert not any(role == SERVICE for role, _action in made)
