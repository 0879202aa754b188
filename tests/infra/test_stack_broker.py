"""The fleet's broker in the stack (SPEC §17): what the service relies on: encryption in transit
(`rediss://`), AUTH, a replica that takes over, and no source but the service's tasks."""

from __future__ import annotations

from tests.infra.committed import COMMITTED, lint_problems, resources


def test_cfn_lint_is_really_checking_the_broker() -> None:
    broken = COMMITTED.read_text().replace('"NumCacheClusters": 2', '"NumCacheClusters": "two"')
    assert any("two" in problem for problem in lint_problems(broken))


def test_the_broker_is_encrypted_authenticated_and_fails_over() -> None:
    broker = resources()["LiveBroker"]["Properties"]

    assert broker["Engine"] == "valkey"
    assert broker["TransitEncryptionEnabled"] is True  # the service's URL is rediss://
    assert broker["AtRestEncryptionEnabled"] is True
    assert "LiveBrokerAuthSecret" in broker["AuthToken"]["Fn::Sub"]
    assert broker["AutomaticFailoverEnabled"] is True and broker["MultiAZEnabled"] is True
    assert broker["NumCacheClusters"] >= 2


def test_only_the_service_reaches_the_broker() -> None:
    group = resources()["LiveBrokerSecurityGroup"]["Properties"]
    [ingress] = group["SecurityGroupIngress"]

    assert (ingress["FromPort"], ingress["ToPort"]) == (6379, 6379)
    assert ingress["SourceSecurityGroupId"] == {"Fn::GetAtt": ["ServiceSecurityGroup", "GroupId"]}
    assert "CidrIp" not in ingress


def test_the_service_gets_the_brokers_url_with_its_token_from_a_secret() -> None:
    url = resources()["LiveBrokerUrlSecret"]["Properties"]["SecretString"]["Fn::Sub"]
    [container] = resources()["TaskDefinition"]["Properties"]["ContainerDefinitions"]

    assert url.startswith("rediss://:{{resolve:secretsmanager:${LiveBrokerAuthSecret}")
    assert url.endswith("@${LiveBroker.PrimaryEndPoint.Address}:${LiveBroker.PrimaryEndPoint.Port}")
    assert {"Name": "LOC_LIVE_BROKER_URL", "ValueFrom": {"Ref": "LiveBrokerUrlSecret"}} in (
        container["Secrets"]
    )
