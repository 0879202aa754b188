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

Then the drain (issue 57's Done-when): a fresh app and table, one endpoint whose receiver answers
every request after 50 ms, a burst of `drain_events` payments written by `in_flight` clients as
fast as they can; the drain rate is the events delivered over the time from the first write to the
last delivery (the settle time, 0.2 s here, counts in it), and the lag is the last delivery's time
after the last write. The writes and the deliveries share this process, so the writes can set
that pace: the same burst is then written with no dispatcher running, and the rate at which an app
that delivers catches up on it (from its first delivery to its last) is reported beside.
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
from bench.report import Target
from datasource import CallCount, counting
from harness.asgi import asgi_caller, asgi_headers
from harness.processes import HOST, free_port
from process.settings import Settings
from server.app import create_app

__all__ = ["DEFAULT", "QUICK", "measure", "render", "targets"]

CREATE = "mutation($input: CreatePaymentInput!) { createPayment(input: $input) { __typename } }"
REGISTER = "mutation($url: String!) { createWebhookEndpoint(input: {url: $url}) { __typename } }"
SETTLE_SECONDS = 0.2
POLL_SECONDS = 0.05
RECEIVER_DELAY_SECONDS = 0.05  # the drain's receiver answers every request after this
DRAIN_TARGET = 250.0  # events a second one endpoint drains, at least (issue 57)


@dataclasses.dataclass(frozen=True)
class Options:
    writes: int = 200  # per block
    blocks: int = 6  # per side
    in_flight: int = 8
    drain_events: int = 1000


DEFAULT = Options()
QUICK = Options(writes=20, blocks=1, drain_events=60)


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
        log(f"webhooks: the drain of {options.drain_events} events to a 50 ms receiver")
        drain = await _drain(options, settings.model_copy(update=update), port, http, headers)
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
        **drain,
    }


async def _drain(
    options: Options,
    settings: Settings,
    port: int,
    http: aiohttp.ClientSession,
    headers: list[tuple[bytes, bytes]],
) -> dict[str, Any]:
    """One endpoint whose receiver answers after 50 ms, on apps and tables of their own (the
    other sides stopped): a burst delivered as it is written, then a backlog caught up on."""
    body = {"userId": "bench-drain", "loanId": "loan-1", "amountCents": 1000, "method": "ACH"}
    payment = orjson.dumps({"query": CREATE, "variables": {"input": body}})
    register = orjson.dumps({"query": REGISTER, "variables": {"url": f"http://{HOST}:{port}/slow"}})

    def app_on(table: str, **update: Any) -> Any:
        name = f"{settings.table_name}-{table}"
        return create_app(settings.model_copy(update={"table_name": name, **update}))

    async def registered(app: Any) -> Callable[[], Any]:
        answer = await asgi_caller(app, register, headers)()
        if b"WebhookEndpointPayload" not in answer:
            raise RuntimeError(f"no endpoint: {answer!r}")
        return asgi_caller(app, payment, headers)

    app = app_on("drain")
    async with running(app):
        create = await registered(app)
        # One event delivered first: the endpoint is taken and its connection open.
        await _writes(create, 1, 1)
        delivered, _ = await _slow_drained(http, 1)
        started = time.monotonic()
        await _writes(create, options.drain_events, options.in_flight)
        written = time.monotonic()
        # The receiver's clock is this one (CLOCK_MONOTONIC, the machine's).
        delivered, last = await _slow_drained(http, delivered + options.drain_events)
    # The backlog: the same burst written with no dispatcher running (an app without webhook
    # delivery on the table), then an app that delivers started once every event settled.
    writer, dispatcher = app_on("backlog", webhooks=False), app_on("backlog")
    async with running(writer):
        await _writes(await registered(writer), options.drain_events, options.in_flight)
        await asyncio.sleep(SETTLE_SECONDS)
        cpu, wall = time.process_time(), time.monotonic()
        async with running(dispatcher):
            await _slow_drained(http, delivered + options.drain_events)
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    async with http.get("/slow/times", params={"from": delivered}) as response:
        backlog = orjson.loads(await response.read())
    return {
        "drain_events": options.drain_events,
        "drain_writers": options.in_flight,
        "drain_receiver_delay_ms": RECEIVER_DELAY_SECONDS * 1000,
        "drain_settle_seconds": SETTLE_SECONDS,
        "drain_written_per_second": options.drain_events / (written - started),
        # Target: at least 250 events a second (issue 57).
        "drain_events_per_second": options.drain_events / (last - started),
        "drain_last_delivery_lag_s": last - written,
        # What the endpoint takes when the writes do not set the pace: from the backlog's first
        # delivery to its last.
        "backlog_events_per_second": (len(backlog) - 1) / (backlog[-1] - backlog[0]),
        # This process's CPU over the catch-up (its start included) by the time it took: near 1,
        # its core set the pace; well below, the window's round trips did.
        "backlog_cpu_share": cpu / wall,
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


async def _slow_drained(http: aiohttp.ClientSession, wanted: int) -> tuple[int, float]:
    """Until the slow receiver has answered `wanted` events: how many, and the time it answered
    the last."""
    deadline = time.monotonic() + 60
    while True:
        async with http.get("/slow/count") as response:
            count, last = orjson.loads(await response.read())
        if count >= wanted:
            return int(count), float(last)
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} of {wanted} events delivered within 60 s")
        await asyncio.sleep(0.01)


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
    """The receiver's process: 204 to every POST, and how many it took at GET /count; at /slow
    204 after 50 ms, at GET /slow/count how many and when it answered the last, at GET
    /slow/times?from=N when it answered each from the Nth."""
    taken = 0
    answered: list[float] = []  # when /slow answered each request

    async def receive(request: web.Request) -> web.Response:
        nonlocal taken
        await request.read()
        taken += 1
        return web.Response(status=204)

    async def count(request: web.Request) -> web.Response:
        return web.Response(text=str(taken))

    async def receive_slowly(request: web.Request) -> web.Response:
        await request.read()
        await asyncio.sleep(RECEIVER_DELAY_SECONDS)
        answered.append(time.monotonic())
        return web.Response(status=204)

    async def slow_count(request: web.Request) -> web.Response:
        last = answered[-1] if answered else 0.0
        return web.Response(body=orjson.dumps([len(answered), last]))

    async def slow_times(request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(answered[int(request.query["from"]) :]))

    app = web.Application()
    app.router.add_post("/hook", receive)
    app.router.add_get("/count", count)
    app.router.add_post("/slow", receive_slowly)
    app.router.add_get("/slow/count", slow_count)
    app.router.add_get("/slow/times", slow_times)
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
        f"{results['events_delivered']} events" + _drain_sentence(results)
    )


def _drain_sentence(results: dict[str, Any]) -> str:
    if "drain_events_per_second" not in results:  # a run from before the drain was measured
        return ""
    rate = results["backlog_events_per_second"]
    return (
        f". One endpoint whose receiver answers after {results['drain_receiver_delay_ms']:.0f} ms "
        f"delivers {rate:.0f} events a second when the writes do not set the pace (a backlog "
        f"written with no dispatcher running, then caught up on, the process busy "
        f"{results['backlog_cpu_share']:.0%} of the time; target at least {DRAIN_TARGET:.0f}: "
        f"{_verdict(rate >= DRAIN_TARGET)}); as it is written, {results['drain_events']:,} "
        f"payments from {results['drain_writers']} clients in the same process at "
        f"{results['drain_written_per_second']:.0f} a second are delivered at "
        f"{results['drain_events_per_second']:.0f} a second from the first write to the last "
        f"delivery, the last {results['drain_last_delivery_lag_s']:.2f} s after the last write "
        f"(events settle {results['drain_settle_seconds']:g} s)"
    )


def targets(results: dict[str, Any]) -> list[Target]:
    """The drain's target (the pass's others are in its sentence): what the endpoint takes when
    the writes, which share the bench's one process with the deliveries, do not set the pace."""
    if "backlog_events_per_second" not in results:
        return []
    rate = {"webhooks": results["backlog_events_per_second"]}
    return [
        Target(
            "webhooks: events/s one endpoint delivers (50 ms receiver, a backlog)",
            rate,
            DRAIN_TARGET,
            "min",
        )
    ]


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


if __name__ == "__main__":
    if "--receiver" in sys.argv:
        _receive(int(sys.argv[sys.argv.index("--receiver") + 1]))
        sys.exit()
    options = QUICK if "--quick" in sys.argv else DEFAULT
    print(render(quietly(measure(options, log=lambda line: print(line, file=sys.stderr)))))
