"""Request lines written once per event-loop pass (issue 67) are still written: a server stopped
with SIGTERM under load has the line of every request it answered, and one killed with SIGKILL
the line of every request answered more than 100 ms before the kill. Real processes on moto,
JSON logs on stderr, each request named by its own `x-request-id`."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import Callable

import httpx

from datasource import DynamoConfig
from harness.processes import Service
from tests.api.conftest import SERVICE

WORKERS = 8
ANSWERS_BEFORE_STOP = 300


def logged_request_ids(service: Service) -> set[str]:
    ids = set()
    for line in service.log_tail(limit=50_000_000).splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if record.get("name") == "loc_payments.request":
                ids.add(record["request_id"])
    return ids


async def answered_until_stopped(service: Service, stop: Callable[[], None]) -> dict[str, float]:
    """Requests sent by `WORKERS` clients at once until the server goes away, `stop` called once
    `ANSWERS_BEFORE_STOP` have been answered: each answered request's id and when its answer
    came (`time.monotonic()`)."""
    answered: dict[str, float] = {}
    numbers = itertools.count()
    stopped = asyncio.Event()
    headers = {"authorization": f"Bearer {SERVICE}"}

    async def client(http: httpx.AsyncClient) -> None:
        while True:
            request_id = f"kept-{next(numbers)}"
            try:
                response = await http.post(
                    f"{service.url}/graphql",
                    json={"query": "{ __typename }"},
                    headers={**headers, "x-request-id": request_id},
                )
            except httpx.HTTPError:
                return  # gone
            if response.status_code == 200:
                answered[request_id] = time.monotonic()
            if len(answered) >= ANSWERS_BEFORE_STOP and not stopped.is_set():
                stopped.set()
                await asyncio.to_thread(stop)

    async with httpx.AsyncClient(timeout=10) as http:
        await asyncio.gather(*(client(http) for _ in range(WORKERS)))
    return answered


def service_on(config: DynamoConfig) -> Service:
    assert config.endpoint_url is not None
    return Service(
        config.endpoint_url,
        config.table_name,
        {
            "log_level": "INFO",
            "log_format": "json",
            "live_updates": "false",
            "webhooks": "false",
        },
    )


async def test_a_sigterm_under_load_loses_no_request_line(moto_config: DynamoConfig) -> None:
    service = service_on(moto_config)
    service.start()
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            await service.wait_ready(http, "/readyz")
        answered = await answered_until_stopped(service, service.terminate)
        logged = logged_request_ids(service)
    finally:
        service.stop()

    assert len(answered) >= ANSWERS_BEFORE_STOP
    assert set(answered) - logged == set()


async def test_after_a_sigkill_every_request_answered_100_ms_before_has_its_line(
    moto_config: DynamoConfig,
) -> None:
    service = service_on(moto_config)
    service.start()
    killed_at = 0.0

    def kill() -> None:
        nonlocal killed_at
        killed_at = time.monotonic()
        service.kill()

    try:
        async with httpx.AsyncClient(timeout=10) as http:
            await service.wait_ready(http, "/readyz")
        answered = await answered_until_stopped(service, kill)
        logged = logged_request_ids(service)
    finally:
        service.stop()

    before = {request for request, at in answered.items() if at < killed_at - 0.1}
    assert len(before) >= ANSWERS_BEFORE_STOP // 2
    assert before - logged == set()
