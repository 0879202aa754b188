"""The committed CloudFormation template: generated from the one table definition, lint-clean."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint  # type: ignore[import-untyped]
from pydantic import SecretStr

from datasource.table import TTL_ATTRIBUTE, table_definition, time_to_live
from server.cli import TEMPLATE_COMMAND, TEMPLATE_PATH, main, table_template
from server.settings import Settings

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / TEMPLATE_PATH
# The regions of SPEC §2: test and local in us-west-2, prod in us-east-2.
REGIONS = ["us-west-2", "us-east-2"]


def _committed() -> dict[str, Any]:
    template: dict[str, Any] = json.loads(COMMITTED.read_text())
    return template


def _table(template: dict[str, Any]) -> dict[str, Any]:
    resource: dict[str, Any] = template["Resources"]["PaymentsTable"]
    return resource


def _lint(text: str) -> list[str]:
    # "I" adds cfn-lint's informational checks to its errors and warnings.
    matches = lint(text, config=ManualArgs(regions=REGIONS, include_checks=["I"]))
    return [str(match) for match in matches]


def test_the_committed_template_is_what_the_table_definition_generates() -> None:
    assert COMMITTED.read_text() == table_template(), (
        f"{TEMPLATE_PATH} is out of date with datasource/table.py; regenerate it with "
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
    properties = _table(_committed())["Properties"]
    definition = table_definition("any")

    for name in ("AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "BillingMode"):
        assert properties[name] == definition[name]
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
    properties = _table(_committed())["Properties"]

    # CreateTable turns a stream on with `StreamEnabled`; the resource has none, only the view.
    assert table_definition("any")["StreamSpecification"] == {
        "StreamEnabled": True,
        "StreamViewType": "NEW_IMAGE",
    }
    assert properties["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}


def test_the_table_is_protected_recoverable_and_encrypted() -> None:
    table = _table(_committed())
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
    template = _committed()

    names = {
        env: values["TableName"] for env, values in template["Mappings"]["Environments"].items()
    }

    assert names == {
        env: Settings(
            env=env, auth_jwt_secret=SecretStr("j" * 40), cursor_secret=SecretStr("c" * 40)
        ).table_name
        for env in ("local", "test", "prod")
    }
    assert template["Parameters"]["Environment"]["AllowedValues"] == ["local", "test", "prod"]


def test_cfn_lint_finds_nothing_in_the_committed_template() -> None:
    assert _lint(COMMITTED.read_text()) == []


def test_cfn_lint_is_really_checking() -> None:
    broken = COMMITTED.read_text().replace('"PAY_PER_REQUEST"', '"ON_DEMAND"')

    assert any("ON_DEMAND" in problem for problem in _lint(broken))
