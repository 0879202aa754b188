"""The service in the stack (`infra/stack.template.json`): what reaches it, how it runs, how it
scales, and what wakes an operator. Least privilege: `test_least_privilege.py`."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

from datasource import CircuitBreaker, table_definition
from infra.stack import ALARMS, APP_PORT, KEEP_ALIVE
from process.logs import configure_logging
from process.settings import Settings
from process.status_log import log_status
from tests.infra.committed import COMMITTED, lint_problems, resources


def _properties(name: str) -> dict[str, Any]:
    found: dict[str, Any] = resources()[name]["Properties"]
    return found


def _container() -> dict[str, Any]:
    [container] = _properties("TaskDefinition")["ContainerDefinitions"]
    found: dict[str, Any] = container
    return found


def test_cfn_lint_finds_nothing_in_the_stack() -> None:
    assert lint_problems(COMMITTED.read_text()) == []


def test_cfn_lint_is_really_checking_the_service() -> None:
    broken = COMMITTED.read_text().replace('"LaunchType": "FARGATE"', '"LaunchType": "FARGATTE"')

    assert any("FARGATTE" in problem for problem in lint_problems(broken))


def test_only_the_load_balancer_is_public_and_it_speaks_https() -> None:
    https = _properties("HttpsListener")
    http = _properties("HttpListener")
    balancer = _properties("LoadBalancer")

    assert (https["Protocol"], https["Port"]) == ("HTTPS", 443)
    assert https["Certificates"] == [{"CertificateArn": {"Ref": "CertificateArn"}}]
    assert https["SslPolicy"].startswith("ELBSecurityPolicy-TLS13")
    [redirect] = http["DefaultActions"]
    assert redirect["RedirectConfig"]["Protocol"] == "HTTPS"
    assert balancer["Scheme"] == "internet-facing"
    assert balancer["Subnets"] == [{"Ref": "PublicSubnetA"}, {"Ref": "PublicSubnetB"}]


def test_the_tasks_take_the_api_port_from_the_load_balancer_alone_and_keep_metrics_inside() -> None:
    [ingress] = _properties("ServiceSecurityGroup")["SecurityGroupIngress"]
    network = _properties("Service")["NetworkConfiguration"]["AwsvpcConfiguration"]

    assert (ingress["FromPort"], ingress["ToPort"]) == (APP_PORT, APP_PORT)
    assert ingress["SourceSecurityGroupId"] == {
        "Fn::GetAtt": ["LoadBalancerSecurityGroup", "GroupId"]
    }
    assert "CidrIp" not in ingress
    assert network["AssignPublicIp"] == "DISABLED"
    assert network["Subnets"] == [{"Ref": "PrivateSubnetA"}, {"Ref": "PrivateSubnetB"}]
    # The metrics port (LOC_METRICS=port in test and prod) is in no mapping and no rule.
    assert _container()["PortMappings"] == [{"ContainerPort": APP_PORT, "Protocol": "tcp"}]
    assert Settings.model_fields["metrics_port"].default != APP_PORT


def test_the_load_balancer_checks_healthz_and_outlasts_a_websockets_keep_alive() -> None:
    group = _properties("TargetGroup")
    attributes = {
        a["Key"]: a["Value"] for a in _properties("LoadBalancer")["LoadBalancerAttributes"]
    }

    assert group["HealthCheckPath"] == "/healthz"
    assert (group["Port"], group["TargetType"]) == (APP_PORT, "ip")
    assert int(attributes["idle_timeout.timeout_seconds"]) > 2 * KEEP_ALIVE


def test_the_container_is_configured_by_settings_that_exist_and_secrets_it_does_not_see() -> None:
    container = _container()
    names = [
        variable.get("Name") or _conditional_name(variable) for variable in container["Environment"]
    ]
    secrets = {secret["Name"] for secret in container["Secrets"]}

    for name in [*names, *secrets]:
        assert name.removeprefix("LOC_").lower() in Settings.model_fields, name
    assert {"LOC_ENV", "LOC_TABLE_NAME", "LOC_AUTH_JWKS_URL", "LOC_TRUSTED_DOCUMENTS"} <= set(names)
    assert secrets == {"LOC_CURSOR_SECRET", "LOC_LIVE_BROKER_URL"}
    # ECS reads the secrets with its execution role; the service's own role cannot.
    [policy] = _properties("ExecutionRole")["Policies"]
    [statement] = policy["PolicyDocument"]["Statement"]
    assert statement["Action"] == "secretsmanager:GetSecretValue"
    assert statement["Resource"] == [{"Ref": "CursorSecret"}, {"Ref": "LiveBrokerUrlSecret"}]


def _conditional_name(variable: dict[str, Any]) -> str:
    _condition, given, _otherwise = variable["Fn::If"]
    name: str = given["Name"]
    return name


def test_the_service_scales_on_cpu_between_the_bounds_given() -> None:
    target = _properties("ScalableTarget")
    scaling = _properties("CpuScaling")["TargetTrackingScalingPolicyConfiguration"]

    assert (target["MinCapacity"], target["MaxCapacity"]) == (
        {"Ref": "MinTasks"},
        {"Ref": "MaxTasks"},
    )
    assert scaling["PredefinedMetricSpecification"]["PredefinedMetricType"] == (
        "ECSServiceAverageCPUUtilization"
    )


def test_every_alarm_notifies_the_topic() -> None:
    for name, _meaning in ALARMS:
        alarm = _properties(name)
        assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}], name


def test_the_status_line_the_service_logs_feeds_the_alarms_metric_filters() -> None:
    """CloudWatch's JSON filter `{ $.field >= 0 }` selects a line whose `field` is a number;
    the service's own line (as `LOC_LOG_FORMAT=json` writes it) must have each one."""
    stream = io.StringIO()
    handler = configure_logging(log_format="json", local=False, stream=stream)
    try:
        log_status(
            CircuitBreaker(failures=5, probe_interval=0.5), throttled=3, stream_seconds_behind=0.7
        )
    finally:
        logging.getLogger().removeHandler(handler)
    [line] = [json.loads(text) for text in stream.getvalue().splitlines()]

    for name in ("BreakerOpenMetric", "StreamBehindMetric", "ThrottlesMetric"):
        metric_filter = _properties(name)
        field = metric_filter["FilterPattern"].removeprefix("{ $.").removesuffix(" >= 0 }")
        assert isinstance(line[field], int | float), (name, line)
        [transformation] = metric_filter["MetricTransformations"]
        assert transformation["MetricValue"] == f"$.{field}"
    assert line["breaker_open"] == 0 and line["stream_seconds_behind"] == 0.7
    assert line["dynamodb_throttles"] == 3


def test_the_stack_deploys_inline_without_a_bucket() -> None:
    # `aws cloudformation deploy` sends a template of up to 51,200 bytes itself; a larger one
    # needs an S3 bucket, which an empty account does not have.
    assert len(COMMITTED.read_bytes()) < 51_200


def test_contributor_insights_watch_the_table_and_every_index() -> None:
    """CloudWatch Contributor Insights names the busiest and the most throttled keys of the
    table and of each index (docs/alarms.md#finding-a-hot-key)."""
    properties = _properties("PaymentsTable")
    indexes = properties["GlobalSecondaryIndexes"]

    assert properties["ContributorInsightsSpecification"] == {"Enabled": True}
    assert [index["IndexName"] for index in indexes] == [
        index["IndexName"] for index in table_definition("")["GlobalSecondaryIndexes"]
    ]
    for index in indexes:
        assert index["ContributorInsightsSpecification"] == {"Enabled": True}, index["IndexName"]
