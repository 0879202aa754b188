"""What a deployed service exposes by default (issue 44): in `prod` the metrics are not on the API
port, `/readyz` names nothing of the deployment, the server listens on every interface, and the
trusted-document manifests can be a mounted directory, counted at start."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from datasource import DynamoConfig
from process.settings import Settings
from tests.api.conftest import PROD_SETTINGS, api_client, prod_token

LOAN = 'query LoanPage { loan(loanId: "loan-1") { loanId } }'


async def test_prod_serves_no_metrics_on_the_api_port_by_default(
    moto_config: DynamoConfig,
) -> None:
    async with api_client(moto_config, **PROD_SETTINGS) as prod:
        assert (await prod.http.get("/metrics")).status_code == 404
        ready = await prod.http.get("/readyz")
    assert ready.status_code == 200
    assert "table" not in ready.json(), "an anonymous probe learns no table name"
    assert moto_config.table_name not in ready.text


async def test_outside_prod_the_metrics_and_the_table_stay_where_they_were(
    moto_config: DynamoConfig,
) -> None:
    async with api_client(moto_config) as local:
        assert (await local.http.get("/metrics")).status_code == 200
        assert (await local.http.get("/readyz")).json()["table"] == moto_config.table_name


def test_deployed_environments_listen_on_every_interface_with_metrics_on_their_own_port() -> None:
    secrets = {key: PROD_SETTINGS[key] for key in ("auth_jwt_secret", "cursor_secret")}
    for env in ("test", "prod"):
        deployed = Settings(env=env, **secrets)
        assert (deployed.host, deployed.metrics) == ("0.0.0.0", "port")
        # Set explicitly, a value wins.
        chosen = Settings(env=env, host="10.0.0.5", metrics="app", **secrets)
        assert (chosen.host, chosen.metrics) == ("10.0.0.5", "app")
    local = Settings(env="local")
    assert (local.host, local.metrics) == ("127.0.0.1", "app")


async def test_a_manifest_directory_is_loaded_whole_and_counted_at_start(
    moto_config: DynamoConfig, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mounted = tmp_path / "trusted-documents"
    mounted.mkdir()
    (mounted / "web.json").write_text(json.dumps({"loan-page-v1": LOAN}))
    (mounted / "ios.json").write_text(
        json.dumps({"loan-page-v2": LOAN.replace("loanId }", "loanId userId }")})
    )
    (mounted / "notes.txt").write_text("not a manifest")
    with caplog.at_level(logging.INFO, logger="loc_payments.server"):
        async with api_client(moto_config, trusted_documents=str(mounted), **PROD_SETTINGS) as prod:
            response = await prod.http.post(
                "/graphql",
                json={"documentId": "loan-page-v2"},
                headers={"Authorization": f"Bearer {prod_token('alice')}"},
            )
    assert response.status_code == 200, response.text
    assert response.json()["data"]["loan"] == {"loanId": "loan-1", "userId": "alice"}
    [started] = [r.getMessage() for r in caplog.records if "trusted documents" in r.getMessage()]
    assert started.startswith(f"trusted documents: 2 loaded from {mounted}")
    assert "trusted-for-customers" in started
