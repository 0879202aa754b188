"""`python -m bench.webhooks_cost [--quick]`: what a payment write costs with one webhook endpoint
registered, beside none (SPEC §18, issue 57): in-process on DynamoDB Local, the app's own
dispatcher delivering each event to a receiver in another process that answers 204.

Each block writes `writes` payments (createPayment) and then waits until every event it made is
delivered (none: until the settle time and a poll have passed, so both sides wait alike); its CPU
per write is this process's CPU over the block, the delivery included, the receiver's not. Blocks
alternate between the sides so that the machine's noise falls on both. The write units of the
deliveries are DynamoDB Local's ConsumedCapacity of every call the dispatcher made (its tasks
count in a `CallCount` of their own), per event delivered: attempt records, retries, the position
committed once per batch and the lease's renewals.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from bench.load import service_headers
from bench.profile import local_dynamodb, quietly, running
from datasource.accounting import CallCount, counting
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
    port = free_port()
    receiver = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.webhooks_cost", "--receiver", str(port)
    )
    try:
        async with aiohttp.ClientSession(f"http://{HOST}:{port}") as http:
            for _ in range(100):  # until it listens
                with contextlib.suppress(aiohttp.ClientConnectionError):
                    await _delivered(http)
                    break
                await asyncio.sleep(0.1)
            return await _measure(options, port, http, log)
    finally:
        receiver.terminate()
        await receiver.wait()


async def _measure(
    options: Options,
    port: int,
    http: aiohttp.ClientSession,
    log: Callable[[str], None],
) -> dict[str, Any]:
    delivered = await _delivered(http)
    headers = asgi_headers(service_headers())
    body = {"userId": "bench-webhooks", "loanId": "loan-1", "amountCents": 1000, "method": "ACH"}
    spent: dict[str, list[float]] = {"none": [], "one": []}
    # The calls of the side with an endpoint, made by its lifespan's tasks (the dispatcher's).
    dispatcher = CallCount()
    events = 0
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
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(running(apps["none"]))
            with counting(dispatcher):
                await stack.enter_async_context(running(apps["one"]))
            url = f"http://{HOST}:{port}/hook"
            register = orjson.dumps({"query": REGISTER, "variables": {"url": url}})
            answer = await asgi_caller(apps["one"], register, headers)()
            if b"WebhookEndpointPayload" not in answer:
                raise RuntimeError(f"no endpoint: {answer!r}")
            await asyncio.sleep(1.0)  # the endpoint taken
            before = dataclasses.replace(dispatcher.units)
            for block in range(options.blocks):
                order = ("none", "one") if block % 2 == 0 else ("one", "none")
                for side in order:
                    expected = delivered + (options.writes if side == "one" else 0)
                    started = time.process_time()
                    await _writes(creates[side], options.writes, options.in_flight)
                    delivered = await _drained(http, expected)
                    spent[side].append((time.process_time() - started) / options.writes)
                log(f"webhooks: block {block + 1}/{options.blocks}")
            events = options.writes * options.blocks
            write_units = dispatcher.units.write - before.write
            read_units = dispatcher.units.read - before.read
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
        # Target: at most half of a write's CPU with no endpoint (issue 57).
        "delivery_cpu_share": (one_ms - none_ms) / none_ms,
        "events_delivered": events,
        # Target: at most 1.5 write units per event per endpoint, over the burst.
        "delivery_write_units_per_event": write_units / events,
        "delivery_read_units_per_event": read_units / events,
    }


async def _delivered(http: aiohttp.ClientSession) -> int:
    async with http.get("/count") as response:
        return int(await response.text())


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


async def _drained(http: aiohttp.ClientSession, wanted: int) -> int:
    """Until the receiver has `wanted` events; and at least the settle time and a poll, so
    that both sides wait alike. What it has then."""
    await asyncio.sleep(SETTLE_SECONDS + 2 * POLL_SECONDS)
    deadline = time.monotonic() + 60
    while (count := await _delivered(http)) < wanted:
        if time.monotonic() > deadline:
            raise RuntimeError("the events were not delivered within 60 s")
        await asyncio.sleep(POLL_SECONDS)
    return count


def _receive(port: int) -> None:
    """The receiver's process: 204 to every POST, and how many it took at GET /count."""
    taken = 0

    async def receive(request: web.Request) -> web.Response:
        nonlocal taken
        await request.read()
        taken += 1
        return web.Response(status=204)

    async def count(request: web.Request) -> web.Response:
        return web.Response(text=str(taken))

    app = web.Application()
    app.router.add_post("/hook", receive)
    app.router.add_get("/count", count)
    web.run_app(app, host=HOST, port=port, print=None, access_log=None)


def render(results: dict[str, Any]) -> str:
    if "delivery_cpu_share" not in results:  # a run from before issue 57, in its words
        return (
            f"Webhooks: a payment write with one endpoint registered costs "
            f"{results['one_cpu_ms_per_write']:.2f} ms of CPU, its delivery included, beside "
            f"{results['none_cpu_ms_per_write']:.2f} ms with none ({results['ratio']:.2f}x, "
            f"+{results['delivery_cpu_ms_per_event']:.2f} ms an event; medians of "
            f"{results['blocks']} blocks of {results['writes_per_block']} writes each, "
            f"{results['in_flight']} in flight, in-process on DynamoDB Local); each delivery adds "
            f"one TransactWriteItems"
        )
    return (
        f"Webhooks: a payment write with one endpoint registered costs "
        f"{results['one_cpu_ms_per_write']:.2f} ms of CPU, its delivery included, beside "
        f"{results['none_cpu_ms_per_write']:.2f} ms with none ({results['ratio']:.2f}x, "
        f"+{results['delivery_cpu_ms_per_event']:.2f} ms an event; medians of "
        f"{results['blocks']} blocks of {results['writes_per_block']} writes each, "
        f"{results['in_flight']} in flight, in-process on DynamoDB Local, the receiver in "
        f"another process): the delivery costs {results['delivery_cpu_share']:.2f} of a write's "
        f"CPU (target at most 0.5: {_verdict(results['delivery_cpu_share'] <= 0.5)}) and "
        f"{results['delivery_write_units_per_event']:.2f} write units an event (target at most "
        f"1.5: {_verdict(results['delivery_write_units_per_event'] <= 1.5)}), "
        f"{results['delivery_read_units_per_event']:.2f} read units, over "
        f"{results['events_delivered']} events"
    )


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


if __name__ == "__main__":
    if "--receiver" in sys.argv:
        _receive(int(sys.argv[sys.argv.index("--receiver") + 1]))
        sys.exit()
    options = QUICK if "--quick" in sys.argv else DEFAULT
    print(render(quietly(measure(options, log=lambda line: print(line, file=sys.stderr)))))
