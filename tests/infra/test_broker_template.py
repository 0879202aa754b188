"""The fleet's broker as code (SPEC §17, `infra/broker.template.json`): lint-clean, and what
the service relies on: encryption in transit (`rediss://`), AUTH, a replica that takes over, and
no source but the service's security group."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cfnlint.api import ManualArgs, lint  # type: ignore[import-untyped]

TEMPLATE = Path(__file__).resolve().parents[2] / "infra" / "broker.template.json"
REGIONS = ["us-west-2", "us-east-2"]


def _lint(text: str) -> list[str]:
    return [
        str(match) for match in lint(text, config=ManualArgs(regions=REGIONS, include_checks=["I"]))
    ]


def _resources() -> dict[str, Any]:
    resources: dict[str, Any] = json.loads(TEMPLATE.read_text())["Resources"]
    return resources


def test_cfn_lint_finds_nothing_in_the_broker_template() -> None:
    assert _lint(TEMPLATE.read_text()) == []


def test_cfn_lint_is_really_checking_the_broker_template() -> None:
    broken = TEMPLATE.read_text().replace('"NumCacheClusters": 2', '"NumCacheClusters": "two"')
    assert any("two" in problem for problem in _lint(broken))


def test_the_broker_is_encrypted_authenticated_and_fails_over() -> None:
    broker = _resources()["LiveBroker"]["Properties"]

    assert broker["Engine"] == "valkey"
    assert broker["TransitEncryptionEnabled"] is True  # the service's URL is rediss://
    assert broker["AtRestEncryptionEnabled"] is True
    assert "LiveBrokerAuthSecret" in broker["AuthToken"]["Fn::Sub"]
    assert broker["AutomaticFailoverEnabled"] is True and broker["MultiAZEnabled"] is True
    assert broker["NumCacheClusters"] >= 2


def test_only_the_service_reaches_the_broker() -> None:
    [ingress] = _resources()["LiveBrokerSecurityGroup"]["Properties"]["SecurityGroupIngress"]

    assert (ingress["FromPort"], ingress["ToPort"]) == (6379, 6379)
    assert ingress["SourceSecurityGroupId"] == {"Ref": "ServiceSecurityGroupId"}
    assert "CidrIp" not in ingress
