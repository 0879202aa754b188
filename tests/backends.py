"""What the test backends share: credentials, the region, the cursor secret, the shared client."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from datasource import DynamoConfig, create_table_if_missing

REGION = "us-west-2"
# DynamoDB Local refuses access keys with `_` or `-`.
TEST_KEY = "testkey"
CURSOR_SECRET = b"test-cursor-secret"


@dataclass(frozen=True, slots=True)
class Backend:
    name: str
    endpoint_url: str
    client: Any  # one shared aiobotocore DynamoDB client

    def config(self, table_name: str) -> DynamoConfig:
        return backend_config(self.endpoint_url, table_name)


def backend_config(endpoint_url: str, table_name: str) -> DynamoConfig:
    return DynamoConfig(
        table_name=table_name,
        region=REGION,
        endpoint_url=endpoint_url,
        aws_access_key_id=TEST_KEY,
        aws_secret_access_key=TEST_KEY,
    )


async def fresh_table(backend: Backend) -> str:
    """A new table of its own on the backend, named `test-<uuid>`."""
    table_name = f"test-{uuid.uuid4().hex}"
    # moto's transactions copy the table's stream records too: no stream where none is read.
    await create_table_if_missing(backend.client, table_name, stream=backend.name != "moto")
    return table_name
