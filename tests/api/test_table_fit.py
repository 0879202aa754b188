"""A table the service cannot use does not look ready, and takes no write (issue 63, item 5).

In `test` and `prod` the table is compared at start with `datasource.table`'s definition: each
difference is logged by name, `/readyz` answers 503 (its detail, on the operators' port, names
each), and every write is refused before it is sent (UNAVAILABLE). A table put right is used
without a restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from datasource import GSI4, create_table_if_missing, table_definition
from server.operators_port import with_operators_port
from server.readiness import TableCheck
from tests.api.conftest import PROD_SETTINGS, Api, api_client, error_codes, prod_token
from tests.backends import Backend

# The operators' port (`LOC_METRICS_PORT`), where `/readyz` has its detail.
OPERATORS_PORT = 9464
NEW_PAYMENT = {
    "userId": "alice",
    "loanId": "loan-1",
    "amountCents": 5000,
    "method": "ACH",
    "accountLastFour": "6789",
}
TABLE_LOG = "loc_payments.table"


async def made_table(backend: Backend, *, gsi4: bool = True, stream: bool = True) -> str:
    """A table of the definition's, without GSI4 or its stream if asked: as an operator might
    have made it by hand."""
    name = f"test-{uuid.uuid4().hex}"
    definition: Any = table_definition(name)
    if not gsi4:
        definition["GlobalSecondaryIndexes"] = [
            index for index in definition["GlobalSecondaryIndexes"] if index["IndexName"] != GSI4
        ]
        used = {
            key["AttributeName"]
            for index in definition["GlobalSecondaryIndexes"]
            for key in index["KeySchema"]
        } | {key["AttributeName"] for key in definition["KeySchema"]}
        definition["AttributeDefinitions"] = [
            attribute
            for attribute in definition["AttributeDefinitions"]
            if attribute["AttributeName"] in used
        ]
    if not stream:
        del definition["StreamSpecification"]
    await backend.client.create_table(**definition)
    return name


@pytest.fixture
async def without_gsi4_or_stream(moto_backend: Backend) -> AsyncIterator[str]:
    name = await made_table(moto_backend, gsi4=False, stream=False)
    yield name
    await moto_backend.client.delete_table(TableName=name)


@pytest.fixture
async def unfit_on_each(backend: Backend) -> AsyncIterator[tuple[Backend, str]]:
    """A table without GSI4 or its stream on each backend: DynamoDB Local refuses a Query of a
    missing index as real DynamoDB does (ValidationException), where moto says no such table."""
    name = await made_table(backend, gsi4=False, stream=False)
    yield backend, name
    await backend.client.delete_table(TableName=name)


@pytest.fixture
async def as_defined(moto_backend: Backend) -> AsyncIterator[str]:
    name = await made_table(moto_backend)
    yield name
    await moto_backend.client.delete_table(TableName=name)


@asynccontextmanager
async def operators(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the operators' port of `api`'s app."""
    app = with_operators_port(api.app, port=OPERATORS_PORT)
    transport = httpx.ASGITransport(app=app)
    base = f"http://payments.test:{OPERATORS_PORT}"
    async with httpx.AsyncClient(transport=transport, base_url=base) as http:
        yield http


async def create(api: Api) -> dict[str, Any]:
    return await api.mutate(
        "createPayment", NEW_PAYMENT, as_=prod_token("collections-job", service=True)
    )


async def every_item(backend: Backend, table_name: str) -> list[dict[str, Any]]:
    """Every item of the table, the layout record's included."""
    answer = await backend.client.scan(TableName=table_name, ConsistentRead=True)
    items: list[dict[str, Any]] = answer["Items"]
    return items


def table_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == TABLE_LOG]


async def test_a_table_without_gsi4_or_its_stream_is_not_ready_and_takes_no_write(
    unfit_on_each: tuple[Backend, str], caplog: pytest.LogCaptureFixture
) -> None:
    backend, name = unfit_on_each
    config = backend.config(name)
    async with (
        api_client(config, **PROD_SETTINGS, live_updates=True) as api,
        operators(api) as operators_port,
    ):
        public = await api.http.get("/readyz")
        detail = await operators_port.get("/readyz")
        written = await create(api)
        # A read of the index that is missing: refused too, never sent.
        feed = await api.post(
            "query { events(first: 1) { edges { cursor } } }",
            as_=prod_token("collections-job", service=True),
        )

    assert (public.status_code, public.json()) == (503, {"status": "unavailable"})
    assert (detail.status_code, detail.json()) == (
        503,
        {
            "status": "unavailable",
            "reason": "TableMismatch",
            "table": name,
            "tableProblems": ["index GSI4 is missing", "the stream is off"],
        },
    )
    # A typed refusal, sent to no DynamoDB: nothing stored, not even the layout record.
    assert (written["__typename"], written["code"]) == ("UnavailableError", "UNAVAILABLE")
    assert "not as the service needs it" in written["message"]
    assert await every_item(backend, name) == []
    assert error_codes(feed) == ["UNAVAILABLE"], feed
    lines = table_lines(caplog)
    assert f"table {name}: index GSI4 is missing" in lines
    assert f"table {name}: the stream is off" in lines


async def test_a_table_as_the_service_needs_it_is_ready(
    moto_backend: Backend, as_defined: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = moto_backend.config(as_defined)
    async with (
        api_client(config, **PROD_SETTINGS, live_updates=True) as api,
        operators(api) as operators_port,
    ):
        public = await api.http.get("/readyz")
        detail = await operators_port.get("/readyz")
        written = await create(api)

    assert (public.status_code, public.json()) == (200, {"status": "ok"})
    assert (detail.status_code, detail.json()["status"]) == (200, "ok")
    assert written["__typename"] == "PaymentPayload", written
    assert table_lines(caplog) == []


async def test_without_live_updates_the_stream_is_not_needed(moto_backend: Backend) -> None:
    name = await made_table(moto_backend, stream=False)
    try:
        async with api_client(moto_backend.config(name), **PROD_SETTINGS) as api:
            ready = await api.http.get("/readyz")
    finally:
        await moto_backend.client.delete_table(TableName=name)
    assert ready.status_code == 200


async def until_ready(api: Api, *, within: float = 10.0) -> None:
    """Probe `/readyz` until it answers 200: the table is compared again at most once per
    `READINESS_CACHE_SECONDS`, however often it is probed."""
    deadline = time.monotonic() + within
    while (await api.http.get("/readyz")).status_code != 200:
        assert time.monotonic() < deadline, "never ready"
        await asyncio.sleep(0.1)


async def test_a_table_put_right_is_used_without_a_restart(
    moto_backend: Backend, without_gsi4_or_stream: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=TABLE_LOG)
    name = without_gsi4_or_stream
    config = moto_backend.config(name)
    async with api_client(config, **PROD_SETTINGS) as api:
        assert (await api.http.get("/readyz")).status_code == 503
        refused = await create(api)
        # The operator adds the index (live updates are off here: no stream is needed).
        await create_table_if_missing(moto_backend.client, name, stream=False)
        await until_ready(api)
        written = await create(api)

    assert refused["code"] == "UNAVAILABLE"
    assert written["__typename"] == "PaymentPayload", written
    assert f"table {name}: as the service needs it now; writes are accepted" in table_lines(caplog)


async def test_without_a_probe_the_table_is_compared_again_until_put_right(
    moto_backend: Backend, without_gsi4_or_stream: str
) -> None:
    name = without_gsi4_or_stream
    async with api_client(moto_backend.config(name), **PROD_SETTINGS) as api:
        # The app's own watch asks every TABLE_RECHECK_SECONDS; this one, sooner.
        watching = asyncio.create_task(
            TableCheck(max_age=0.05).watch(api.app.state.store, every=0.05)
        )
        await create_table_if_missing(moto_backend.client, name, stream=False)
        await asyncio.wait_for(watching, timeout=10)  # it returns once the table is as needed
        # Accepted: nothing else compared the table since the index was added.
        written = await create(api)
    assert written["__typename"] == "PaymentPayload", written
