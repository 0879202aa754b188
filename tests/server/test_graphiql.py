"""GraphiQL from the service alone (issue 15): its files, its policy, its first minute.

The page in a real browser is `tests/browser/test_graphiql_browser.py`; here, what HTTP shows.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jwt

from datasource import DynamoConfig
from process.settings import DEV_JWT_SECRET
from server.graphiql import CONTENT_SECURITY_POLICY, FILES, FIRST_QUERY
from tests.api.conftest import api_client

HTML = {"Accept": "text/html"}
ADDRESS = re.compile(r'(?:src|href)="(?!data:)([^"]+)"')  # data: (the blank icon) is no request
SETTINGS = re.compile(r'<script type="application/json" id="graphiql-settings">(.*?)</script>')
PROD: dict[str, Any] = {
    "env": "prod",
    "region": "us-west-2",
    "auth_jwt_secret": "a-production-secret-that-is-long-enough-0123",
    "cursor_secret": "a-production-cursor-secret-long-enough-0123",
}


def settings_of(page: str) -> dict[str, Any]:
    block = re.search(
        r'<script type="application/json" id="graphiql-settings">(.*?)</script>', page
    )
    assert block, page
    found: dict[str, Any] = json.loads(block.group(1))
    return found


async def test_every_file_of_the_page_comes_from_the_service(moto_config: DynamoConfig) -> None:
    async with api_client(moto_config) as api:
        page = await api.http.get("/graphql", headers=HTML)
        assert page.status_code == 200
        addresses = ADDRESS.findall(page.text)
        # GraphiQL, its explorer, React, ReactDOM, and the page's own script and style.
        assert len(addresses) == len(FILES)
        for address in addresses:
            assert address.startswith("/graphiql-assets/"), address  # no other host, no CDN
            asset = await api.http.get(address)
            assert asset.status_code == 200, address
            assert asset.headers["cache-control"] == "public, max-age=31536000, immutable"
            assert asset.headers["x-content-type-options"] == "nosniff"
            assert asset.headers["content-type"].startswith(
                "text/javascript" if address.endswith(".js") else "text/css"
            )
        assert "unpkg" not in page.text and "cdn" not in page.text.lower()
        # A file is served under its own digest only: a stale or made-up address is not found.
        digest, name = addresses[0].split("/")[2:]
        assert (await api.http.get(f"/graphiql-assets/{'0' * 16}/{name}")).status_code == 404
        assert (
            await api.http.get(f"/graphiql-assets/{digest}/../pyproject.toml")
        ).status_code == 404
        assert (await api.http.get(f"/graphiql-assets/{digest}/secret.js")).status_code == 404


async def test_the_page_allows_its_own_origin_only(moto_config: DynamoConfig) -> None:
    async with api_client(moto_config) as api:
        page = await api.http.get("/graphql", headers=HTML)
    policy = page.headers["content-security-policy"]
    assert policy == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in policy and "unsafe-inline' " not in policy.split("style-src")[0]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    # No inline script: the settings are a JSON block, which the policy does not run.
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page.text, re.S)
    assert all(
        "src=" in attributes or "application/json" in attributes for attributes, _ in scripts
    )


async def test_local_graphiql_opens_ready_to_run(moto_config: DynamoConfig) -> None:
    async with api_client(moto_config) as api:
        page = await api.http.get("/graphql", headers=HTML)
    settings = settings_of(page.text)
    assert settings["query"] == FIRST_QUERY
    assert json.loads(settings["variables"]) == {"userId": "user-1", "loanId": "loan-1"}
    bearer = json.loads(settings["headers"])["Authorization"].removeprefix("Bearer ")
    claims = jwt.decode(bearer, DEV_JWT_SECRET, algorithms=["HS256"])
    assert "payments:service" in claims["scope"]


async def test_graphiql_without_the_development_secret_has_no_token(
    moto_config: DynamoConfig,
) -> None:
    test_env = {**PROD, "env": "test"}
    async with api_client(moto_config, **test_env) as api:
        page = await api.http.get("/graphql", headers=HTML)
    assert page.status_code == 200
    assert settings_of(page.text)["headers"] is None


async def test_prod_serves_neither_graphiql_nor_its_files(moto_config: DynamoConfig) -> None:
    async with api_client(moto_config) as local:
        page = await local.http.get("/graphql", headers=HTML)
        address = ADDRESS.findall(page.text)[0]
    async with api_client(moto_config, **PROD) as prod:
        assert "graphiql" not in (await prod.http.get("/graphql", headers=HTML)).text.lower()
        assert (await prod.http.get(address)).status_code == 404
