"""Opening a client: cheap enough to open one per app (the tests and the bench do), and TLS
verified wherever there is TLS."""

from __future__ import annotations

import pytest

from datasource import DynamoConfig
from datasource.aiobotocore_adapter import fast_session, verifies_tls
from datasource.client import open_client
from tests.backends import REGION


def test_every_session_shares_one_loader_of_botocores_data_files() -> None:
    first, second = fast_session(), fast_session()

    assert first.get_component("data_loader") is second.get_component("data_loader")


@pytest.mark.parametrize(
    ("endpoint", "verified"),
    [
        (None, True),  # AWS itself
        ("https://dynamodb.eu-west-1.amazonaws.com", True),
        ("https://emulator.internal:8443", True),
        ("http://127.0.0.1:8000", False),  # nothing to verify without TLS
    ],
)
async def test_tls_is_verified_on_every_https_endpoint(
    endpoint: str | None, verified: bool
) -> None:
    config = DynamoConfig(table_name="t", region=REGION, endpoint_url=endpoint)

    async with open_client(config) as client:
        assert client.meta.endpoint_url.startswith("https://" if verified else "http://")
        assert verifies_tls(client) is verified
