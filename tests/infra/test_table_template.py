"""The table in the committed stack (`infra/stack.template.json`): generated from the one table
definition, lint-clean."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from cli.main import main
from datasource import TTL_ATTRIBUTE, table_definition, time_to_live
from infra.stack import TEMPLATE_COMMAND, TEMPLATE_PATH, stack_template_text
from process.settings import Settings
from tests.infra.committed import COMMITTED, committed, lint_problems, resources


def test_the_committed_template_is_what_the_table_definition_generates() -> None:
    assert COMMITTED.read_text() == stack_template_text(), (
        f"{TEMPLATE_PATH} is out of date with the code; regenerate it with "
        f"`.venv/bin/{TEMPLATE_COMMAND}` and commit it"
    )


def test_the_template_command_prints_it_without_any_settings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # prod without its secrets is refused by Settings; printing the template needs none.
    monkeypatch.setenv("LOC_ENV", "prod")

    assert main(["template"]) == 0

    assert capsys.readouterr().out == COMMITTED.read_text()


def test_the_table_has_the_keys_indexes_and_billing_of_the_definition() -> None:
    properties = resources()["PaymentsTable"]["Properties"]
    definition = table_definition("any")

    for name in ("AttributeDefinitions", "KeySchema", "BillingMode"):
        assert properties[name] == definition[name]
    # The stack adds Contributor Insights to each index (test_stack.py); the rest is as defined.
    indexes = [
        {key: value for key, value in index.items() if key != "ContributorInsightsSpecification"}
        for index in properties["GlobalSecondaryIndexes"]
    ]
    assert indexes == definition["GlobalSecondaryIndexes"]
    assert [index["IndexName"] for index in properties["GlobalSecondaryIndexes"]] == [
        "GSI1",
        "GSI2",
        "GSI3",
        "GSI4",
    ]
    projections = {
        index["IndexName"]: index["Projection"] for index in properties["GlobalSecondaryIndexes"]
    }
    assert {name: p["ProjectionType"] for name, p in projections.items()} == {
        "GSI1": "ALL",
        "GSI2": "ALL",
        "GSI3": "ALL",
        "GSI4": "INCLUDE",
    }
    # The feed carries every attribute of an event but the payment it holds.
    assert "loc_payment" not in projections["GSI4"]["NonKeyAttributes"]
    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert properties["TimeToLiveSpecification"] == {
        "AttributeName": TTL_ATTRIBUTE,
        "Enabled": True,
    }
    assert properties["TimeToLiveSpecification"] == time_to_live("any")["TimeToLiveSpecification"]


def test_the_table_streams_new_images_as_cloudformation_spells_it() -> None:
    properties = resources()["PaymentsTable"]["Properties"]

    # CreateTable turns a stream on with `StreamEnabled`; the resource has none, only the view.
    assert table_definition("any")["StreamSpecification"] == {
        "StreamEnabled": True,
        "StreamViewType": "NEW_IMAGE",
    }
    assert properties["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}


def test_the_table_is_protected_recoverable_and_encrypted() -> None:
    table = resources()["PaymentsTable"]
    properties = table["Properties"]

    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert properties["DeletionProtectionEnabled"] is True
    assert properties["SSESpecification"]["SSEEnabled"] is True
    assert properties["SSESpecification"]["SSEType"] == "KMS"
    # Deleting or replacing the stack must never delete the payments.
    assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("Retain", "Retain")


def test_each_environment_gets_the_table_name_the_service_uses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LOC_TABLE_NAME", raising=False)
    template = committed()

    names = {
        env: values["TableName"] for env, values in template["Mappings"]["Environments"].items()
    }

    assert names == {
        env: Settings(
            env=env, auth_jwt_secret=SecretStr("j" * 40), cursor_secret=SecretStr("c" * 40)
        ).table_name
        for env in ("test", "prod")
    }
    # The stack deploys to AWS: `local` is a developer's machine.
    assert template["Parameters"]["Environment"]["AllowedValues"] == ["test", "prod"]


def test_cfn_lint_finds_nothing_in_the_committed_template() -> None:
    assert lint_problems(COMMITTED.read_text()) == []


def test_cfn_lint_is_really_checking() -> None:
    broken = COMMITTED.read_text().replace('"PAY_PER_REQUEST"', '"ON_DEMAND"')

    assert any("ON_DEMAND" in problem for problem in lint_problems(broken))
