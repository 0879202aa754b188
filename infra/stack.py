"""The service as code: the CloudFormation stack that `loc-payments template` prints into
`infra/stack.template.json`, from an empty AWS account to a running fleet.

`stack_template` (and `stack_template_text`, the file's text) makes the network, the table,
the ECS service, its load balancer, the live updates' broker, the secrets, scaling and alarms.
What comes from the code rather than from this file: the table (`datasource.table`), the task
role's grants (exactly `datasource.permissions.SERVICE_GRANTS`), the settings' names, the ports,
the health path and the WebSocket keep-alive.

Every resource, and how to deploy it: docs/deploy.md.
"""

from __future__ import annotations

import json
from typing import Any

from datasource import SERVICE_GRANTS, STREAM, TABLE, Grant, cloudformation_template
from process.settings import DEPLOYED, TABLE_AND_REGION, Settings
from process.status_log import BREAKER_OPEN_FIELD, STREAM_BEHIND_FIELD, THROTTLES_FIELD

__all__ = [
    "ALARMS",
    "APP_PORT",
    "KEEP_ALIVE",
    "TEMPLATE_COMMAND",
    "TEMPLATE_PATH",
    "stack_template",
    "stack_template_text",
]

TEMPLATE_PATH = "infra/stack.template.json"
TEMPLATE_COMMAND = f"loc-payments template > {TEMPLATE_PATH}"

CONTAINER = "payments"
HEALTH_PATH = "/healthz"
METRICS_NAMESPACE = "loc-payments"
_DEFAULTS = Settings.model_fields
APP_PORT: int = _DEFAULTS["port"].default
KEEP_ALIVE: float = _DEFAULTS["websocket_keep_alive_interval"].default
# A WebSocket that pings every KEEP_ALIVE seconds is never idle for this long.
IDLE_TIMEOUT = max(60, int(4 * KEEP_ALIVE))
BROKER_PORT = 6379


def _ref(name: str) -> dict[str, str]:
    return {"Ref": name}


def _att(resource: str, attribute: str) -> dict[str, list[str]]:
    return {"Fn::GetAtt": [resource, attribute]}


def _sub(text: str) -> dict[str, str]:
    return {"Fn::Sub": text}


def _setting(name: str) -> str:
    """The environment variable of a setting, which must exist."""
    assert name in _DEFAULTS, name
    return f"LOC_{name.upper()}"


def _tags(name: str) -> list[dict[str, Any]]:
    return [
        {"Key": "Name", "Value": _sub(f"loc-payments-${{Environment}}-{name}")},
        {"Key": "service", "Value": "loc-payments"},
        {"Key": "environment", "Value": _ref("Environment")},
    ]


def grant_resource(grant: Grant) -> Any:
    """A grant's resource as the policy names it: the table's ARN, an index's, the stream's."""
    if grant.resource == TABLE:
        return _att("PaymentsTable", "Arn")
    if grant.resource == STREAM:
        return _att("PaymentsTable", "StreamArn")
    return _sub(f"${{PaymentsTable.Arn}}/{grant.resource}")


def task_role_policy() -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "".join(part.capitalize() for part in grant.resource.split("/")),
                "Effect": "Allow",
                "Action": list(grant.actions),
                "Resource": grant_resource(grant),
            }
            for grant in SERVICE_GRANTS
        ],
    }


PARAMETERS: dict[str, dict[str, Any]] = {
    "Image": {
        "Type": "String",
        "Description": "The service's image (this repository's Dockerfile): an ECR URI and tag",
    },
    "CertificateArn": {
        "Type": "String",
        "AllowedPattern": "arn:aws[a-z-]*:acm:.+",
        "Description": "The ACM certificate of the API's domain (HTTPS on the load balancer)",
    },
    "JwksUrl": {
        "Type": "String",
        "AllowedPattern": "https://.+",
        "Description": "The identity provider's JWKS (LOC_AUTH_JWKS_URL)",
    },
    "JwtIssuer": {
        "Type": "String",
        "Description": "The tokens' issuer, `iss` (LOC_AUTH_JWT_ISSUER)",
    },
    "JwtAudience": {
        "Type": "String",
        "Default": "",
        "Description": "The tokens' audience, `aud` (LOC_AUTH_JWT_AUDIENCE); empty: not checked",
    },
    "ServiceScope": {
        "Type": "String",
        "Default": _DEFAULTS["auth_service_scope"].default,
        "Description": (
            "The scope that makes a token a service's (LOC_AUTH_SERVICE_SCOPE); Cognito writes "
            "<resource server>/payments:service"
        ),
    },
    "GatewayScope": {
        "Type": "String",
        "Default": _DEFAULTS["auth_gateway_scope"].default,
        "Description": (
            "The scope of the federation gateway's own token (LOC_AUTH_GATEWAY_SCOPE); Cognito "
            "writes <resource server>/payments:gateway"
        ),
    },
    "JwtClientIds": {
        "Type": "String",
        "Default": "",
        "Description": (
            "App clients accepted, comma-separated (LOC_AUTH_JWT_CLIENT_IDS): Cognito access "
            "tokens carry client_id, not aud; empty: not checked"
        ),
    },
    "BudgetOverrides": {
        "Type": "String",
        "Default": "",
        "Description": (
            "Named service clients' budgets, client=rate/burst comma-separated "
            "(LOC_BUDGET_OVERRIDES); empty: every service at the service class's"
        ),
    },
    "TrustedDocuments": {
        "Type": "String",
        "Default": "/app/trusted-documents",
        "Description": "Manifests of trusted documents in the image (LOC_TRUSTED_DOCUMENTS)",
    },
    "TaskCpu": {
        "Type": "String",
        "Default": "1024",
        "AllowedValues": ["512", "1024", "2048", "4096"],
        "Description": "CPU units of a task (1024 = one vCPU)",
    },
    "TaskMemory": {
        "Type": "String",
        "Default": "2048",
        "Description": "Memory of a task, MiB (a size Fargate pairs with TaskCpu)",
    },
    "MinTasks": {"Type": "Number", "Default": 2, "MinValue": 1, "Description": "Fewest tasks"},
    "MaxTasks": {"Type": "Number", "Default": 10, "MinValue": 1, "Description": "Most tasks"},
    "TargetCpuPercent": {
        "Type": "Number",
        "Default": 60,
        "MinValue": 10,
        "MaxValue": 90,
        "Description": "Average task CPU that scaling keeps",
    },
    "BrokerNodeType": {
        "Type": "String",
        "Default": "cache.t4g.small",
        "Description": "The broker's node type (docs/scale-and-cost.md)",
    },
    "AlarmEmail": {
        "Type": "String",
        "Default": "",
        "Description": "Where alarms are mailed (an SNS subscription); empty: the topic only",
    },
    "LatencyP99Seconds": {
        "Type": "Number",
        "Default": 1,
        "Description": "The p99 of response time above which the latency alarm fires",
    },
    "StreamBehindSeconds": {
        "Type": "Number",
        "Default": 30,
        "Description": "How far behind the stream reader may fall before its alarm fires",
    },
    "ThrottlesPerMinute": {
        "Type": "Number",
        "Default": 100,
        "Description": "DynamoDB attempts throttled a minute, all tasks, above which the "
        "throttling alarm fires (each is retried; sustained, clients wait and some fail)",
    },
}


def _network() -> dict[str, Any]:
    resources: dict[str, Any] = {
        "Vpc": {
            "Type": "AWS::EC2::VPC",
            "Properties": {
                "CidrBlock": "10.40.0.0/16",
                "EnableDnsSupport": True,
                "EnableDnsHostnames": True,
                "Tags": _tags("vpc"),
            },
        },
        "InternetGateway": {
            "Type": "AWS::EC2::InternetGateway",
            "Properties": {"Tags": _tags("igw")},
        },
        "InternetGatewayAttachment": {
            "Type": "AWS::EC2::VPCGatewayAttachment",
            "Properties": {"VpcId": _ref("Vpc"), "InternetGatewayId": _ref("InternetGateway")},
        },
        "PublicRouteTable": {
            "Type": "AWS::EC2::RouteTable",
            "Properties": {"VpcId": _ref("Vpc"), "Tags": _tags("public")},
        },
        "PublicRoute": {
            "Type": "AWS::EC2::Route",
            "DependsOn": "InternetGatewayAttachment",
            "Properties": {
                "RouteTableId": _ref("PublicRouteTable"),
                "DestinationCidrBlock": "0.0.0.0/0",
                "GatewayId": _ref("InternetGateway"),
            },
        },
        "NatAddress": {
            "Type": "AWS::EC2::EIP",
            "DependsOn": "InternetGatewayAttachment",
            "Properties": {"Domain": "vpc", "Tags": _tags("nat")},
        },
        "NatGateway": {
            "Type": "AWS::EC2::NatGateway",
            "Properties": {
                "AllocationId": _att("NatAddress", "AllocationId"),
                "SubnetId": _ref("PublicSubnetA"),
                "Tags": _tags("nat"),
            },
        },
        "PrivateRouteTable": {
            "Type": "AWS::EC2::RouteTable",
            "Properties": {"VpcId": _ref("Vpc"), "Tags": _tags("private")},
        },
        "PrivateRoute": {
            "Type": "AWS::EC2::Route",
            "Properties": {
                "RouteTableId": _ref("PrivateRouteTable"),
                "DestinationCidrBlock": "0.0.0.0/0",
                "NatGatewayId": _ref("NatGateway"),
            },
        },
        "DynamoDBEndpoint": {
            "Type": "AWS::EC2::VPCEndpoint",
            "Properties": {
                "VpcId": _ref("Vpc"),
                "VpcEndpointType": "Gateway",
                "ServiceName": _sub("com.amazonaws.${AWS::Region}.dynamodb"),
                "RouteTableIds": [_ref("PrivateRouteTable")],
            },
        },
    }
    for zone, (public, private) in enumerate(
        (("10.40.0.0/20", "10.40.128.0/20"), ("10.40.16.0/20", "10.40.144.0/20"))
    ):
        letter = "AB"[zone]
        for kind, cidr in (("Public", public), ("Private", private)):
            resources[f"{kind}Subnet{letter}"] = {
                "Type": "AWS::EC2::Subnet",
                "Properties": {
                    "VpcId": _ref("Vpc"),
                    "CidrBlock": cidr,
                    "AvailabilityZone": {"Fn::Select": [zone, {"Fn::GetAZs": ""}]},
                    "MapPublicIpOnLaunch": False,
                    "Tags": _tags(f"{kind.lower()}-{letter.lower()}"),
                },
            }
            resources[f"{kind}Subnet{letter}Routes"] = {
                "Type": "AWS::EC2::SubnetRouteTableAssociation",
                "Properties": {
                    "SubnetId": _ref(f"{kind}Subnet{letter}"),
                    "RouteTableId": _ref(f"{kind}RouteTable"),
                },
            }
    return resources


def _security_groups() -> dict[str, Any]:
    return {
        "LoadBalancerSecurityGroup": {
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {
                "GroupDescription": "The load balancer: HTTPS, and HTTP (redirected), from all",
                "VpcId": _ref("Vpc"),
                "SecurityGroupIngress": [
                    {
                        "IpProtocol": "tcp",
                        "FromPort": port,
                        "ToPort": port,
                        "CidrIp": "0.0.0.0/0",
                        "Description": description,
                    }
                    for port, description in ((443, "HTTPS"), (80, "HTTP, redirected to HTTPS"))
                ],
                "Tags": _tags("load-balancer"),
            },
        },
        "ServiceSecurityGroup": {
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {
                "GroupDescription": (
                    "The service tasks: the API port from the load balancer only (metrics stay in)"
                ),
                "VpcId": _ref("Vpc"),
                "SecurityGroupIngress": [
                    {
                        "IpProtocol": "tcp",
                        "FromPort": APP_PORT,
                        "ToPort": APP_PORT,
                        "SourceSecurityGroupId": _att("LoadBalancerSecurityGroup", "GroupId"),
                        "Description": "The load balancer",
                    }
                ],
                "Tags": _tags("service"),
            },
        },
        "LiveBrokerSecurityGroup": {
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {
                "GroupDescription": (
                    "Live updates broker: Redis protocol over TLS from the payments service only"
                ),
                "VpcId": _ref("Vpc"),
                "SecurityGroupIngress": [
                    {
                        "IpProtocol": "tcp",
                        "FromPort": BROKER_PORT,
                        "ToPort": BROKER_PORT,
                        "SourceSecurityGroupId": _att("ServiceSecurityGroup", "GroupId"),
                        "Description": "The payments service's tasks",
                    }
                ],
                "Tags": _tags("live-broker"),
            },
        },
    }


def _secrets_and_broker() -> dict[str, Any]:
    def generated(description: str) -> dict[str, Any]:
        return {
            "Type": "AWS::SecretsManager::Secret",
            "DeletionPolicy": "Delete",
            "UpdateReplacePolicy": "Delete",
            "Properties": {
                "Description": description,
                "GenerateSecretString": {"PasswordLength": 64, "ExcludePunctuation": True},
            },
        }

    return {
        "CursorSecret": generated("LOC_CURSOR_SECRET: signs the service's page cursors"),
        "LiveBrokerAuthSecret": generated("The AUTH token of the live updates' broker"),
        "LiveBrokerUrlSecret": {
            "Type": "AWS::SecretsManager::Secret",
            "DeletionPolicy": "Delete",
            "UpdateReplacePolicy": "Delete",
            "Properties": {
                "Description": "LOC_LIVE_BROKER_URL: the broker's rediss:// URL, its AUTH token",
                "SecretString": _sub(
                    "rediss://:{{resolve:secretsmanager:${LiveBrokerAuthSecret}:SecretString}}"
                    "@${LiveBroker.PrimaryEndPoint.Address}:${LiveBroker.PrimaryEndPoint.Port}"
                ),
            },
        },
        "LiveBrokerSubnetGroup": {
            "Type": "AWS::ElastiCache::SubnetGroup",
            "Properties": {
                "Description": "The live updates' broker's subnets",
                "SubnetIds": [_ref("PrivateSubnetA"), _ref("PrivateSubnetB")],
            },
        },
        "LiveBroker": {
            "Type": "AWS::ElastiCache::ReplicationGroup",
            "Metadata": {
                "Why": "Delete on removal or replacement: it holds nothing the table does not "
                "(a new broker is a new epoch, and subscribers replay from DynamoDB)"
            },
            "DeletionPolicy": "Delete",
            "UpdateReplacePolicy": "Delete",
            "Properties": {
                "ReplicationGroupDescription": _sub("loc-payments ${Environment} live updates"),
                "Engine": "valkey",
                "EngineVersion": "8.0",
                "CacheNodeType": _ref("BrokerNodeType"),
                "NumCacheClusters": 2,
                "AutomaticFailoverEnabled": True,
                "MultiAZEnabled": True,
                "TransitEncryptionEnabled": True,
                "AtRestEncryptionEnabled": True,
                "AuthToken": _sub(
                    "{{resolve:secretsmanager:${LiveBrokerAuthSecret}:SecretString}}"
                ),
                "CacheSubnetGroupName": _ref("LiveBrokerSubnetGroup"),
                "SecurityGroupIds": [_att("LiveBrokerSecurityGroup", "GroupId")],
                "Port": BROKER_PORT,
            },
        },
    }


def _load_balancer() -> dict[str, Any]:
    return {
        "LoadBalancer": {
            "Type": "AWS::ElasticLoadBalancingV2::LoadBalancer",
            "Properties": {
                "Scheme": "internet-facing",
                "Type": "application",
                "Subnets": [_ref("PublicSubnetA"), _ref("PublicSubnetB")],
                "SecurityGroups": [_att("LoadBalancerSecurityGroup", "GroupId")],
                "LoadBalancerAttributes": [
                    {"Key": "idle_timeout.timeout_seconds", "Value": str(IDLE_TIMEOUT)},
                    {"Key": "routing.http.drop_invalid_header_fields.enabled", "Value": "true"},
                ],
                "Tags": _tags("load-balancer"),
            },
        },
        "TargetGroup": {
            "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
            "Properties": {
                "VpcId": _ref("Vpc"),
                "TargetType": "ip",
                "Protocol": "HTTP",
                "Port": APP_PORT,
                "HealthCheckPath": HEALTH_PATH,
                "HealthCheckIntervalSeconds": 10,
                "HealthyThresholdCount": 2,
                "UnhealthyThresholdCount": 3,
                "Matcher": {"HttpCode": "200"},
                "TargetGroupAttributes": [
                    # A stopping task drains its requests (uvicorn's own drain) within this.
                    {"Key": "deregistration_delay.timeout_seconds", "Value": "30"},
                ],
                "Tags": _tags("service"),
            },
        },
        "HttpsListener": {
            "Type": "AWS::ElasticLoadBalancingV2::Listener",
            "Properties": {
                "LoadBalancerArn": _ref("LoadBalancer"),
                "Port": 443,
                "Protocol": "HTTPS",
                "SslPolicy": "ELBSecurityPolicy-TLS13-1-2-2021-06",
                "Certificates": [{"CertificateArn": _ref("CertificateArn")}],
                "DefaultActions": [{"Type": "forward", "TargetGroupArn": _ref("TargetGroup")}],
            },
        },
        "HttpListener": {
            "Type": "AWS::ElasticLoadBalancingV2::Listener",
            "Properties": {
                "LoadBalancerArn": _ref("LoadBalancer"),
                "Port": 80,
                "Protocol": "HTTP",
                "DefaultActions": [
                    {
                        "Type": "redirect",
                        "RedirectConfig": {
                            "Protocol": "HTTPS",
                            "Port": "443",
                            "StatusCode": "HTTP_301",
                        },
                    }
                ],
            },
        },
    }


def _ecs_trust() -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "ecs-tasks.amazonaws.com"},
                "Action": "sts:AssumeRole",
                "Condition": {"StringEquals": {"aws:SourceAccount": _ref("AWS::AccountId")}},
            }
        ],
    }


def _environment() -> list[Any]:
    def variable(setting: str, value: Any) -> dict[str, Any]:
        return {"Name": _setting(setting), "Value": value}

    def unless_empty(setting: str, parameter: str) -> dict[str, Any]:
        return {
            "Fn::If": [
                f"{parameter}Given",
                variable(setting, _ref(parameter)),
                _ref("AWS::NoValue"),
            ]
        }

    return [
        variable("env", _ref("Environment")),
        variable("table_name", _ref("PaymentsTable")),
        variable("region", _ref("AWS::Region")),
        variable("port", str(APP_PORT)),
        variable("log_format", "json"),
        variable("auth_jwks_url", _ref("JwksUrl")),
        variable("auth_jwt_issuer", _ref("JwtIssuer")),
        unless_empty("auth_jwt_audience", "JwtAudience"),
        variable("auth_service_scope", _ref("ServiceScope")),
        variable("auth_gateway_scope", _ref("GatewayScope")),
        unless_empty("auth_jwt_client_ids", "JwtClientIds"),
        unless_empty("trusted_documents", "TrustedDocuments"),
        unless_empty("budget_overrides", "BudgetOverrides"),
        # Each task's share of a budget while the broker fails: at the fewest tasks, so a
        # broker outage admits more than the budget, never locks callers out.
        variable("budget_expected_instances", _ref("MinTasks")),
    ]


def _service() -> dict[str, Any]:
    return {
        "Cluster": {"Type": "AWS::ECS::Cluster", "Properties": {"Tags": _tags("cluster")}},
        "LogGroup": {
            "Type": "AWS::Logs::LogGroup",
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
            "Properties": {
                "LogGroupName": _sub("/loc-payments/${Environment}"),
                "RetentionInDays": 30,
            },
        },
        "ExecutionRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "Description": "ECS itself: pull the image, write the logs, read the two secrets",
                "AssumeRolePolicyDocument": _ecs_trust(),
                "ManagedPolicyArns": [
                    _sub(
                        "arn:${AWS::Partition}:iam::aws:policy/service-role/"
                        "AmazonECSTaskExecutionRolePolicy"
                    )
                ],
                "Policies": [
                    {
                        "PolicyName": "read-the-service-secrets",
                        "PolicyDocument": {
                            "Version": "2012-10-17",
                            "Statement": [
                                {
                                    "Effect": "Allow",
                                    "Action": "secretsmanager:GetSecretValue",
                                    "Resource": [
                                        _ref("CursorSecret"),
                                        _ref("LiveBrokerUrlSecret"),
                                    ],
                                }
                            ],
                        },
                    }
                ],
            },
        },
        "TaskRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "Description": (
                    "The service: exactly the DynamoDB actions it makes, on its table, its "
                    "indexes and its stream (datasource/permissions.py)"
                ),
                "AssumeRolePolicyDocument": _ecs_trust(),
                "Policies": [
                    {"PolicyName": "payments-table", "PolicyDocument": task_role_policy()}
                ],
            },
        },
        "TaskDefinition": {
            "Type": "AWS::ECS::TaskDefinition",
            "Properties": {
                "Family": _sub("loc-payments-${Environment}"),
                "RequiresCompatibilities": ["FARGATE"],
                "NetworkMode": "awsvpc",
                "Cpu": _ref("TaskCpu"),
                "Memory": _ref("TaskMemory"),
                "RuntimePlatform": {
                    "OperatingSystemFamily": "LINUX",
                    "CpuArchitecture": "X86_64",
                },
                "ExecutionRoleArn": _att("ExecutionRole", "Arn"),
                "TaskRoleArn": _att("TaskRole", "Arn"),
                "ContainerDefinitions": [
                    {
                        "Name": CONTAINER,
                        "Image": _ref("Image"),
                        "Essential": True,
                        "PortMappings": [{"ContainerPort": APP_PORT, "Protocol": "tcp"}],
                        "Environment": _environment(),
                        "Secrets": [
                            {"Name": _setting("cursor_secret"), "ValueFrom": _ref("CursorSecret")},
                            {
                                "Name": _setting("live_broker_url"),
                                "ValueFrom": _ref("LiveBrokerUrlSecret"),
                            },
                        ],
                        # uvicorn drains in-flight requests on SIGTERM; ECS waits this long.
                        "StopTimeout": 30,
                        "LogConfiguration": {
                            "LogDriver": "awslogs",
                            "Options": {
                                "awslogs-group": _ref("LogGroup"),
                                "awslogs-region": _ref("AWS::Region"),
                                "awslogs-stream-prefix": "payments",
                            },
                        },
                    }
                ],
                "Tags": _tags("task"),
            },
        },
        "Service": {
            "Type": "AWS::ECS::Service",
            "DependsOn": ["HttpsListener"],
            "Properties": {
                "Cluster": _ref("Cluster"),
                "LaunchType": "FARGATE",
                "TaskDefinition": _ref("TaskDefinition"),
                "DesiredCount": _ref("MinTasks"),
                "HealthCheckGracePeriodSeconds": 30,
                "DeploymentConfiguration": {
                    "MinimumHealthyPercent": 100,
                    "MaximumPercent": 200,
                    "DeploymentCircuitBreaker": {"Enable": True, "Rollback": True},
                },
                "NetworkConfiguration": {
                    "AwsvpcConfiguration": {
                        "AssignPublicIp": "DISABLED",
                        "Subnets": [_ref("PrivateSubnetA"), _ref("PrivateSubnetB")],
                        "SecurityGroups": [_att("ServiceSecurityGroup", "GroupId")],
                    }
                },
                "LoadBalancers": [
                    {
                        "ContainerName": CONTAINER,
                        "ContainerPort": APP_PORT,
                        "TargetGroupArn": _ref("TargetGroup"),
                    }
                ],
                "PropagateTags": "SERVICE",
                "Tags": _tags("service"),
            },
        },
        "ScalableTarget": {
            "Type": "AWS::ApplicationAutoScaling::ScalableTarget",
            "Properties": {
                "ServiceNamespace": "ecs",
                "ScalableDimension": "ecs:service:DesiredCount",
                "ResourceId": _sub("service/${Cluster}/${Service.Name}"),
                "MinCapacity": _ref("MinTasks"),
                "MaxCapacity": _ref("MaxTasks"),
            },
        },
        "CpuScaling": {
            "Type": "AWS::ApplicationAutoScaling::ScalingPolicy",
            "Properties": {
                "PolicyName": _sub("loc-payments-${Environment}-cpu"),
                "PolicyType": "TargetTrackingScaling",
                "ScalingTargetId": _ref("ScalableTarget"),
                "TargetTrackingScalingPolicyConfiguration": {
                    "PredefinedMetricSpecification": {
                        "PredefinedMetricType": "ECSServiceAverageCPUUtilization"
                    },
                    "TargetValue": _ref("TargetCpuPercent"),
                    "ScaleOutCooldown": 60,
                    "ScaleInCooldown": 300,
                },
            },
        },
    }


# The alarms: (resource name, what it means), in the order docs/alarms.md lists them.
ALARMS = (
    ("ServerErrorsAlarm", "more than 1% of requests answered 5xx, 3 of the last 5 minutes"),
    ("LatencyAlarm", "p99 response time above LatencyP99Seconds, 3 of the last 5 minutes"),
    ("BreakerOpenAlarm", "the DynamoDB circuit breaker open on any task"),
    ("StreamLagAlarm", "the stream reader StreamBehindSeconds behind, or no reader, 3 minutes"),
    ("ThrottlingAlarm", "over ThrottlesPerMinute DynamoDB attempts throttled, 3 of 5 minutes"),
)


def _alarm(description: str, **properties: Any) -> dict[str, Any]:
    return {
        "Type": "AWS::CloudWatch::Alarm",
        "Properties": {
            "AlarmDescription": description,
            "AlarmActions": [_ref("AlarmTopic")],
            "OKActions": [_ref("AlarmTopic")],
            **properties,
        },
    }


def _alarms() -> dict[str, Any]:
    balancer = [{"Name": "LoadBalancer", "Value": _att("LoadBalancer", "LoadBalancerFullName")}]
    namespace = _sub(f"{METRICS_NAMESPACE}/${{Environment}}")
    described = dict(ALARMS)

    def balancer_sum(identifier: str, metric: str) -> dict[str, Any]:
        return {
            "Id": identifier,
            "ReturnData": False,
            "MetricStat": {
                "Metric": {
                    "Namespace": "AWS/ApplicationELB",
                    "MetricName": metric,
                    "Dimensions": balancer,
                },
                "Period": 60,
                "Stat": "Sum",
            },
        }

    def status_metric(name: str, field: str, unit: str) -> dict[str, Any]:
        return {
            "Type": "AWS::Logs::MetricFilter",
            "Properties": {
                "LogGroupName": _ref("LogGroup"),
                "FilterPattern": f"{{ $.{field} >= 0 }}",
                "MetricTransformations": [
                    {
                        "MetricNamespace": namespace,
                        "MetricName": name,
                        "MetricValue": f"$.{field}",
                        "Unit": unit,
                    }
                ],
            },
        }

    return {
        "AlarmTopic": {"Type": "AWS::SNS::Topic", "Properties": {"Tags": _tags("alarms")}},
        "AlarmEmailSubscription": {
            "Type": "AWS::SNS::Subscription",
            "Condition": "AlarmEmailGiven",
            "Properties": {
                "TopicArn": _ref("AlarmTopic"),
                "Protocol": "email",
                "Endpoint": _ref("AlarmEmail"),
            },
        },
        "BreakerOpenMetric": status_metric("DynamoDBBreakerOpen", BREAKER_OPEN_FIELD, "Count"),
        "StreamBehindMetric": status_metric("StreamSecondsBehind", STREAM_BEHIND_FIELD, "Seconds"),
        "ThrottlesMetric": status_metric("DynamoDBThrottles", THROTTLES_FIELD, "Count"),
        "ServerErrorsAlarm": _alarm(
            described["ServerErrorsAlarm"],
            Metrics=[
                balancer_sum("target", "HTTPCode_Target_5XX_Count"),
                balancer_sum("balancer", "HTTPCode_ELB_5XX_Count"),
                balancer_sum("requests", "RequestCount"),
                {
                    "Id": "rate",
                    "Label": "5xx answers, % of requests",
                    "Expression": "100 * (FILL(target, 0) + FILL(balancer, 0)) / requests",
                    "ReturnData": True,
                },
            ],
            ComparisonOperator="GreaterThanThreshold",
            Threshold=1,
            EvaluationPeriods=5,
            DatapointsToAlarm=3,
            TreatMissingData="notBreaching",
        ),
        "LatencyAlarm": _alarm(
            described["LatencyAlarm"],
            Namespace="AWS/ApplicationELB",
            MetricName="TargetResponseTime",
            Dimensions=balancer,
            ExtendedStatistic="p99",
            Period=60,
            ComparisonOperator="GreaterThanThreshold",
            Threshold=_ref("LatencyP99Seconds"),
            EvaluationPeriods=5,
            DatapointsToAlarm=3,
            TreatMissingData="notBreaching",
        ),
        "BreakerOpenAlarm": _alarm(
            described["BreakerOpenAlarm"],
            Namespace=namespace,
            MetricName="DynamoDBBreakerOpen",
            Statistic="Maximum",
            Period=60,
            ComparisonOperator="GreaterThanOrEqualToThreshold",
            Threshold=1,
            EvaluationPeriods=1,
            TreatMissingData="notBreaching",
        ),
        "StreamLagAlarm": _alarm(
            described["StreamLagAlarm"],
            Namespace=namespace,
            MetricName="StreamSecondsBehind",
            Statistic="Maximum",
            Period=60,
            ComparisonOperator="GreaterThanThreshold",
            Threshold=_ref("StreamBehindSeconds"),
            EvaluationPeriods=3,
            # No line from any task: no instance reads the stream, and subscribers hear nothing.
            TreatMissingData="breaching",
        ),
        "ThrottlingAlarm": _alarm(
            described["ThrottlingAlarm"],
            Namespace=namespace,
            MetricName="DynamoDBThrottles",
            # Each task's lines are summed: the fleet's throttles in the minute.
            Statistic="Sum",
            Period=60,
            ComparisonOperator="GreaterThanThreshold",
            Threshold=_ref("ThrottlesPerMinute"),
            EvaluationPeriods=5,
            DatapointsToAlarm=3,
            TreatMissingData="notBreaching",
        ),
    }


def _with_contributor_insights(table: dict[str, Any]) -> dict[str, Any]:
    """The table's resource with CloudWatch Contributor Insights on it and on every index: the
    busiest and most throttled keys of each, where an operator finds a hot key
    (docs/alarms.md#finding-a-hot-key). Keys show in CloudWatch as they are: user ids, shard
    names."""
    watched = {"Enabled": True}
    properties = table["Properties"]
    indexes = [
        {**index, "ContributorInsightsSpecification": watched}
        for index in properties["GlobalSecondaryIndexes"]
    ]
    return {
        **table,
        "Properties": {
            **properties,
            "GlobalSecondaryIndexes": indexes,
            "ContributorInsightsSpecification": watched,
        },
    }


def stack_template() -> dict[str, Any]:
    deployed = {env: TABLE_AND_REGION[env][0] for env in DEPLOYED}
    table = cloudformation_template(deployed)
    table["Resources"]["PaymentsTable"] = _with_contributor_insights(
        table["Resources"]["PaymentsTable"]
    )
    parameters = {**table["Parameters"], **PARAMETERS}
    parameters["Environment"] = {
        **parameters["Environment"],
        "Description": "LOC_ENV of the service",
    }
    given = {
        f"{name}Given": {"Fn::Not": [{"Fn::Equals": [_ref(name), ""]}]}
        for name in (
            "JwtAudience",
            "JwtClientIds",
            "TrustedDocuments",
            "BudgetOverrides",
            "AlarmEmail",
        )
    }
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": (
            "The loc-payments service: its table, a fleet on ECS Fargate behind a load balancer, "
            "the live updates' broker, scaling and alarms. Generated by `loc-payments template` "
            "from infra/stack.py; do not edit by hand. docs/deploy.md deploys it."
        ),
        "Parameters": parameters,
        "Mappings": table["Mappings"],
        "Conditions": {**table["Conditions"], **given},
        "Resources": {
            **table["Resources"],
            **_network(),
            **_security_groups(),
            **_secrets_and_broker(),
            **_load_balancer(),
            **_service(),
            **_alarms(),
        },
        "Outputs": {
            **table["Outputs"],
            "ServiceUrl": {
                "Description": "The API (point the certificate's domain at LoadBalancerDnsName)",
                "Value": _sub("https://${LoadBalancer.DNSName}/graphql"),
            },
            "LoadBalancerDnsName": {"Value": _att("LoadBalancer", "DNSName")},
            "LogGroup": {"Value": _ref("LogGroup")},
            "AlarmTopic": {"Value": _ref("AlarmTopic")},
            "TaskRole": {"Value": _ref("TaskRole")},
        },
    }


def stack_template_text() -> str:
    """The stack as committed in infra/stack.template.json."""
    # One space a level: the file stays under the 51,200 bytes a template may be inline.
    return json.dumps(stack_template(), indent=1) + "\n"
