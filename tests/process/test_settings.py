import dataclasses
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from datasource import DynamoConfig
from engine import QueryLimits
from process.settings import DEV_CURSOR_SECRET, DEV_JWT_SECRET, Env, Settings
from schema import payments_limits
from server.app import query_limits

SECRET = SecretStr("s" * 40)
CURSOR = SecretStr("c" * 40)


@pytest.mark.parametrize(
    ("env", "table", "region"),
    [
        ("local", "local-loc-service", "us-west-2"),
        ("test", "test-loc-service", "us-west-2"),
        ("prod", "prod-loc-service", "us-east-2"),
    ],
)
def test_each_env_has_its_table_and_region(
    monkeypatch: pytest.MonkeyPatch, env: Env, table: str, region: str
) -> None:
    monkeypatch.setenv("LOC_ENV", env)
    monkeypatch.setenv("LOC_AUTH_JWT_SECRET", SECRET.get_secret_value())
    monkeypatch.setenv("LOC_CURSOR_SECRET", CURSOR.get_secret_value())

    settings = Settings()

    assert (settings.table_name, settings.region, settings.dynamodb_endpoint) == (
        table,
        region,
        None,
    )


def test_environment_variables_override_the_env_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOC_ENV", "prod")
    monkeypatch.setenv("LOC_AUTH_JWT_SECRET", SECRET.get_secret_value())
    monkeypatch.setenv("LOC_CURSOR_SECRET", CURSOR.get_secret_value())
    monkeypatch.setenv("LOC_TABLE_NAME", "payments-blue")
    monkeypatch.setenv("LOC_REGION", "eu-west-1")
    monkeypatch.setenv("LOC_DYNAMODB_ENDPOINT", "https://vpce.example:443")
    monkeypatch.setenv("LOC_PORT", "9000")
    monkeypatch.setenv("LOC_DATA_DIR", "/var/lib/ddb")

    settings = Settings()

    assert settings.table_name == "payments-blue"
    assert settings.region == "eu-west-1"
    assert settings.dynamodb_endpoint == "https://vpce.example:443"
    assert settings.port == 9000
    assert settings.data_dir == Path("/var/lib/ddb")


def test_local_defaults_run_the_embedded_dynamodb_with_development_secrets() -> None:
    settings = Settings()

    assert settings.env == "local"
    assert (settings.host, settings.port) == ("127.0.0.1", 8000)
    assert settings.uses_embedded_dynamodb
    assert settings.creates_missing_table
    assert settings.uses_development_jwt_secret
    assert settings.auth_jwt_secret is not None
    assert settings.auth_jwt_secret.get_secret_value() == DEV_JWT_SECRET
    assert settings.cursor_secret.get_secret_value() == DEV_CURSOR_SECRET
    assert settings.max_attempts == 3


def test_an_endpoint_replaces_the_embedded_dynamodb(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOC_DYNAMODB_ENDPOINT", "http://127.0.0.1:4566")

    assert not Settings().uses_embedded_dynamodb


def test_an_empty_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOC_DYNAMODB_ENDPOINT", "")

    assert Settings().uses_embedded_dynamodb


@pytest.mark.parametrize("env", ["test", "prod"])
def test_outside_local_a_jwt_key_is_required(env: Env) -> None:
    with pytest.raises(ValidationError, match=r"needs LOC_AUTH_JWKS_URL .* LOC_AUTH_JWT_SECRET"):
        Settings(env=env, cursor_secret=CURSOR)


def test_a_jwks_url_alone_is_a_key_source_and_prod_wants_it_over_https() -> None:
    provider = Settings(env="prod", auth_jwks_url="https://idp.test/jwks", cursor_secret=CURSOR)
    assert provider.auth_jwks_url == ("https://idp.test/jwks",)
    assert provider.auth_jwt_secret is None
    with pytest.raises(ValidationError, match="not an https URL"):
        Settings(env="prod", auth_jwks_url="http://idp.test/jwks", cursor_secret=CURSOR)
    # In local, a provider replaces the development secret.
    assert Settings(auth_jwks_url="http://127.0.0.1:9/jwks").auth_jwt_secret is None


def test_prod_refuses_the_development_jwt_secret() -> None:
    with pytest.raises(ValidationError, match="development secret"):
        Settings(env="prod", auth_jwt_secret=SecretStr(DEV_JWT_SECRET), cursor_secret=CURSOR)


def test_prod_requires_its_own_cursor_secret() -> None:
    with pytest.raises(ValidationError, match="LOC_CURSOR_SECRET is the published development"):
        Settings(env="prod", auth_jwt_secret=SECRET)


def test_short_secrets_are_refused() -> None:
    with pytest.raises(ValidationError, match="at least 32 bytes"):
        Settings(auth_jwt_secret=SecretStr("short"))
    with pytest.raises(ValidationError, match="at least 32 bytes"):
        Settings(cursor_secret=SecretStr("short"))


def test_a_refused_secret_is_not_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOC_AUTH_JWT_SECRET", "hunter2-is-my-password")

    with pytest.raises(ValidationError) as refused:
        Settings()

    assert "hunter2" not in str(refused.value)


def test_an_rs256_public_key_replaces_the_secret(tmp_path: Path) -> None:
    key_file = tmp_path / "issuer.pem"
    key_file.write_text("-----BEGIN PUBLIC KEY-----\n...\n-----END PUBLIC KEY-----\n")

    settings = Settings(env="prod", auth_jwt_public_key_file=key_file, cursor_secret=CURSOR)

    assert settings.auth_jwt_secret is None
    assert settings.auth_jwt_public_key_file == key_file


def test_a_missing_public_key_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="no file at"):
        Settings(auth_jwt_public_key_file=tmp_path / "absent.pem")


def test_a_secret_and_a_public_key_together_are_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "issuer.pem"
    key_file.write_text("key")

    with pytest.raises(ValidationError, match="set one of"):
        Settings(auth_jwt_secret=SECRET, auth_jwt_public_key_file=key_file)


def test_the_gateway_scope_is_not_the_service_scope() -> None:
    # Every service's token would be the gateway's, and run as whomever it forwarded.
    with pytest.raises(ValidationError, match="LOC_AUTH_GATEWAY_SCOPE must differ"):
        Settings(auth_gateway_scope="payments:service")


@pytest.mark.parametrize("scope", ["payments:service", "payments:gateway"])
def test_the_webhooks_admin_scope_is_neither_the_service_nor_the_gateway_scope(
    scope: str,
) -> None:
    # Every service (or the gateway) would see and change every client's webhook endpoints.
    with pytest.raises(ValidationError, match="LOC_AUTH_WEBHOOKS_ADMIN_SCOPE must differ"):
        Settings(auth_webhooks_admin_scope=scope)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("env", "staging"),
        ("max_attempts", 0),
        ("port", 70000),
        ("dynamodb_retry_mode", "legacy"),
        ("dynamodb_read_timeout", 0),
        ("auth_leeway_seconds", -1),
        ("auth_leeway_seconds", 3600),  # an hour past `exp` is no clock skew
    ],
)
def test_out_of_range_values_are_refused(field: str, value: object) -> None:
    with pytest.raises(ValidationError, match=field):
        kwargs: dict[str, Any] = {field: value}
        Settings(**kwargs)


def test_unknown_settings_are_refused() -> None:
    with pytest.raises(ValidationError, match="table_nmae"):
        Settings(table_nmae="typo")  # type: ignore[call-arg]


@pytest.mark.parametrize(("env", "allowed"), [("local", True), ("test", True), ("prod", False)])
def test_the_debug_header_is_honoured_outside_prod(env: Env, allowed: bool) -> None:
    settings = Settings(env=env, auth_jwt_secret=SECRET, cursor_secret=CURSOR)

    assert settings.debug_dynamodb_header_allowed is allowed


@pytest.mark.parametrize(
    ("env", "loosened", "guarded"),
    [("local", False, False), ("test", False, True), ("test", True, False), ("prod", False, True)],
)
def test_webhook_receivers_are_guarded_wherever_the_service_runs_on_aws(
    env: Env, loosened: bool, guarded: bool
) -> None:
    settings = Settings(
        env=env,
        auth_jwt_secret=SECRET,
        cursor_secret=CURSOR,
        webhook_allow_private_targets=loosened,
    )

    assert settings.public_webhook_targets_only is guarded


def test_prod_refuses_to_loosen_the_webhook_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOC_WEBHOOK_ALLOW_PRIVATE_TARGETS", "true")
    with pytest.raises(ValidationError, match="LOC_WEBHOOK_ALLOW_PRIVATE_TARGETS"):
        Settings(env="prod", auth_jwt_secret=SECRET, cursor_secret=CURSOR)


def test_local_clients_use_the_fixed_test_credentials() -> None:
    config = Settings().dynamo_config("http://127.0.0.1:1234")

    assert config.endpoint_url == "http://127.0.0.1:1234"
    assert (config.table_name, config.region) == ("local-loc-service", "us-west-2")
    assert (config.aws_access_key_id, config.aws_secret_access_key) == ("testkey", "testkey")
    assert (config.retry_mode, config.max_attempts) == ("standard", 16)


def test_aws_clients_use_the_standard_credential_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOC_DYNAMODB_READ_TIMEOUT", "1.5")
    monkeypatch.setenv("LOC_DYNAMODB_RETRY_MODE", "adaptive")
    settings = Settings(env="prod", auth_jwt_secret=SECRET, cursor_secret=CURSOR)

    config = settings.dynamo_config()

    assert config.aws_access_key_id is None
    assert config.endpoint_url is None
    assert (config.table_name, config.region) == ("prod-loc-service", "us-east-2")
    assert (config.read_timeout, config.retry_mode) == (1.5, "adaptive")


def test_a_setting_that_configures_an_object_defaults_to_the_objects_own_default() -> None:
    """Each default once: the settings' DynamoDB and query-limit defaults are those of
    `DynamoConfig` and the engine's `QueryLimits`, which tests and tools build directly."""
    settings = Settings()
    config = settings.dynamo_config()
    defaults = DynamoConfig(table_name=config.table_name, region=config.region)
    for name in (
        "max_pool_connections",
        "connect_timeout",
        "read_timeout",
        "max_attempts",
        "retry_mode",
        "breaker_failures",
        "breaker_probe_interval",
        "coalesce_lookups",
    ):
        assert getattr(config, name) == getattr(defaults, name), name
    limits = query_limits(settings)
    # What a sharded list's page reads is the service's own, over the layouts the settings name.
    assert dataclasses.replace(limits, page_reads=QueryLimits().page_reads) == QueryLimits()
    for name, reads in payments_limits().page_reads.items():
        assert [limits.page_reads[name](size) for size in (1, 20, 100)] == [
            reads(size) for size in (1, 20, 100)
        ], name
