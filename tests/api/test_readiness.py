"""`/readyz` (issue 55): the table is asked at most once per `READINESS_CACHE_SECONDS` however
often the probe comes, and on the API port of `test` and `prod` the answer is its status alone;
the detail is on the metrics port (`LOC_METRICS_PORT`)."""

from __future__ import annotations

import asyncio
import time

import httpx

from datasource import DynamoConfig, count_calls
from harness.processes import Service, free_port
from server.readiness import READINESS_CACHE_SECONDS, READINESS_TIMEOUT_SECONDS
from tests.api.conftest import PROD_SETTINGS, Api, api_client
from tests.api.faults import FaultyDynamoDB, faulty_settings

PROBES = 100


def most_checks(elapsed: float) -> float:
    """The table checks allowed in `elapsed` seconds: one per interval begun."""
    return 1 + elapsed // READINESS_CACHE_SECONDS


async def test_a_hundred_probes_ask_the_table_once_per_interval(api: Api) -> None:
    with count_calls() as count:
        started = time.monotonic()
        one_by_one = [await api.http.get("/readyz") for _ in range(PROBES)]
        at_once = await asyncio.gather(*(api.http.get("/readyz") for _ in range(PROBES)))
        elapsed = time.monotonic() - started

    assert {answer.status_code for answer in one_by_one + list(at_once)} == {200}
    assert 1 <= count.operations["DescribeTable"] <= most_checks(elapsed), count.operations


async def test_a_table_that_does_not_answer_keeps_probes_waiting_once(
    faulty: FaultyDynamoDB,
) -> None:
    config = DynamoConfig(table_name="payments", region="us-west-2", endpoint_url=faulty.url)
    async with api_client(config, **faulty_settings(faulty)) as api:
        started = time.monotonic()
        answers = [await api.http.get("/readyz") for _ in range(20)]
        elapsed = time.monotonic() - started

    # `test`'s API port: the status alone, no reason.
    assert {(answer.status_code, answer.text) for answer in answers} == {
        (503, '{"status":"unavailable"}')
    }
    # Each check waits out its 2 s (the table throttles every attempt); the probes within an
    # interval of one are answered from it, not each after 2 s more.
    assert elapsed < 2 * READINESS_TIMEOUT_SECONDS + READINESS_CACHE_SECONDS, elapsed


async def test_prod_s_api_port_says_only_whether_it_is_ready(moto_config: DynamoConfig) -> None:
    async with api_client(moto_config, **PROD_SETTINGS) as prod:
        ready = await prod.http.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ok"})


async def test_local_s_api_port_keeps_the_detail(api: Api) -> None:
    ready = (await api.http.get("/readyz")).json()
    assert ready["status"] == "ok"
    assert {"liveUpdates", "streamReader", "table"} <= set(ready)


async def test_the_detail_is_on_the_metrics_port_in_prod(moto_config: DynamoConfig) -> None:
    assert moto_config.endpoint_url is not None
    metrics_port = free_port()
    service = Service(
        moto_config.endpoint_url,
        moto_config.table_name,
        {
            **{name: PROD_SETTINGS[name] for name in ("env", "auth_jwt_secret", "cursor_secret")},
            "host": "127.0.0.1",
            "metrics": "port",
            "metrics_port": str(metrics_port),
            "live_updates": "false",
            "webhooks": "false",
        },
    )
    operators = f"http://127.0.0.1:{metrics_port}"
    service.start()
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            await service.wait_ready(http, "/readyz")
            public = await http.get(f"{service.url}/readyz")
            detail = await http.get(f"{operators}/readyz")
            scraped = await http.get(f"{operators}/metrics")
            assert (await http.get(f"{service.url}/metrics")).status_code == 404
            # The operators' port serves them, not the API.
            assert (await http.get(f"{operators}/graphql")).status_code == 404
    finally:
        service.stop()

    assert (public.status_code, public.json()) == (200, {"status": "ok"})
    assert detail.status_code == 200
    assert detail.json() == {
        "status": "ok",
        "liveUpdates": "off",
        "streamReader": False,
        "table": moto_config.table_name,
        "budgets": "local",
    }
    assert "loc_payments_requests_total" in scraped.text
