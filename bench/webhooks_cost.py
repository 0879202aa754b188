"""`python -m bench.webhooks_cost [--quick]`: what a payment write costs with one webhook endpoint
registered, beside none (SPEC §18): in-process on DynamoDB Local, the app's own dispatcher
delivering each event to a loopback receiver that answers 204.

Each block writes `writes` payments (createPayment) and then waits until every event it made is
delivered (none: until the settle time and a poll have passed, so both sides wait alike); its CPU
per write is the process's CPU over the block, the delivery included. Blocks alternate between
the sides so that the machine's noise falls on both. The DynamoDB calls of a delivery are counted
from the code: one feed Query per poll, and per event one TransactWriteItems (the endpoint's
position and the attempt's record).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from bench.load import service_headers
from bench.profile import local_dynamodb, quietly, running
from harness.asgi import asgi_caller, asgi_headers
from harness.processes import HOST, free_port
from server.app import create_app

CREATE = "mutation($input: CreatePaymentInput!) { createPayment(input: $input) { __typename } }"
REGISTER = "mutation($url: String!) { createWebhookEndpoint(input: {url: $url}) { __typename } }"
SETTLE_SECONDS = 0.2
POLL_SECONDS = 0.05


@dataclasses.dataclass(frozen=True)
class Options:
    writes: int = 200  # per block
    blocks: int = 6  # per side
    in_flight: int = 8


DEFAULT = Options()
QUICK = Options(writes=20, blocks=1)


async def measure(
    options: Options, *, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    delivered = 0

    async def receive(request: web.Request) -> web.Response:
        nonlocal delivered
        await request.read()
        delivered += 1
        return web.Response(status=204)

    receiver = web.Application()
    receiver.router.add_post("/hook", receive)
    runner = web.AppRunner(receiver, handle_signals=False)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, HOST, port).start()
    headers = asgi_headers(service_headers())
    body = {"userId": "bench-webhooks", "loanId": "loan-1", "amountCents": 1000, "method": "ACH"}
    spent: dict[str, list[float]] = {"none": [], "one": []}
    try:
        async with local_dynamodb() as (settings, _work):
            update = {
                "webhooks": True,
                "events_settle_seconds": SETTLE_SECONDS,
                "webhook_poll_interval": POLL_SECONDS,
            }
            # One app (and table) a side, both running: each side's idle dispatcher polls in
            # every block alike.
            apps = {
                side: create_app(
                    settings.model_copy(
                        update={**update, "table_name": f"{settings.table_name}-{side}"}
                    )
                )
                for side in spent
            }
            creates = {
                side: asgi_caller(
                    app, orjson.dumps({"query": CREATE, "variables": {"input": body}}), headers
                )
                for side, app in apps.items()
            }
            async with running(*apps.values()):
                url = f"http://{HOST}:{port}/hook"
                register = orjson.dumps({"query": REGISTER, "variables": {"url": url}})
                answer = await asgi_caller(apps["one"], register, headers)()
                if b"WebhookEndpointPayload" not in answer:
                    raise RuntimeError(f"no endpoint: {answer!r}")
                for block in range(options.blocks):
                    order = ("none", "one") if block % 2 == 0 else ("one", "none")
                    for side in order:
                        expected = delivered + (options.writes if side == "one" else 0)
                        started = time.process_time()
                        await _writes(creates[side], options.writes, options.in_flight)
                        await _drained(functools.partial(_reached, lambda: delivered, expected))
                        spent[side].append((time.process_time() - started) / options.writes)
                    log(f"webhooks: block {block + 1}/{options.blocks}")
    finally:
        await runner.cleanup()
    none_ms = statistics.median(spent["none"]) * 1000
    one_ms = statistics.median(spent["one"]) * 1000
    return {
        "writes_per_block": options.writes,
        "blocks": options.blocks,
        "in_flight": options.in_flight,
        "none_cpu_ms_per_write": none_ms,
        "one_cpu_ms_per_write": one_ms,
        "ratio": one_ms / none_ms,
        "delivery_cpu_ms_per_event": one_ms - none_ms,
        # Per event delivered: one TransactWriteItems of two items (the endpoint's position,
        # the attempt's record), and the feed Query each poll shares among its events.
        "delivery_writes_per_event": 1,
    }


def _reached(count: Callable[[], int], wanted: int) -> bool:
    return count() >= wanted


async def _writes(create: Callable[[], Any], count: int, in_flight: int) -> None:
    remaining = count

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            answer = await create()
            if b"PaymentPayload" not in answer:
                raise RuntimeError(f"a write failed: {answer[:300]!r}")

    await asyncio.gather(*(worker() for _ in range(in_flight)))


async def _drained(done: Callable[[], bool]) -> None:
    """Until `done`; and at least the settle time and a poll, so that both sides wait alike."""
    await asyncio.sleep(SETTLE_SECONDS + 2 * POLL_SECONDS)
    deadline = time.monotonic() + 60
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError("the events were not delivered within 60 s")
        await asyncio.sleep(POLL_SECONDS)


def render(results: dict[str, Any]) -> str:
    return (
        f"Webhooks: a payment write with one endpoint registered costs "
        f"{results['one_cpu_ms_per_write']:.2f} ms of CPU, its delivery included, beside "
        f"{results['none_cpu_ms_per_write']:.2f} ms with none ({results['ratio']:.2f}x, "
        f"+{results['delivery_cpu_ms_per_event']:.2f} ms an event; medians of "
        f"{results['blocks']} blocks of {results['writes_per_block']} writes each, "
        f"{results['in_flight']} in flight, in-process on DynamoDB Local); each delivery adds "
        f"one TransactWriteItems"
    )


if __name__ == "__main__":
    options = QUICK if "--quick" in sys.argv else DEFAULT
    print(render(quietly(measure(options, log=lambda line: print(line, file=sys.stderr)))))
