"""`python -m bench.profile`, the README's profiler, runs and names where the CPU goes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from unittest import mock

from strawberry.dataloader import DataLoader

from bench import dataset, profile, workloads
from bench.fake_dynamodb import FakeDynamoDB, as_client
from bench.runs import service_headers
from bench.serve import FAKE_ENDPOINT, service_settings
from datasource.coalesce import Coalescer
from server.app import create_app

ROOT = Path(__file__).resolve().parents[2]


def _profile(*arguments: str) -> str:
    """What `python -m bench.profile payment ...` prints."""
    return subprocess.run(
        [sys.executable, "-m", "bench.profile", "payment", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def test_the_profile_of_one_payment_names_the_pipeline() -> None:
    printed = _profile(
        *("--requests", "50", "--top", "200"),
        *("--without", "log", "--without", "gc", "--without", "plans"),
    )

    first = printed.splitlines()[0]
    assert first.startswith("payment: ") and first.endswith(
        "ms of CPU per request, without the profiler"
    )
    assert float(first.split()[1]) > 0
    assert "schema/operations.py" in printed
    switched_off = "without log and gc and plans"
    [switched] = [line for line in printed.splitlines() if switched_off in line]
    assert switched.startswith(f"the service {switched_off}: ") and switched.endswith("%)")


def test_in_flight_requests_and_latency_give_each_side_s_rate_and_busy_share() -> None:
    lines = _profile(
        *("--requests", "160", "--in-flight", "8", "--latency", "1"),
        *("--without", "coalescing", "--top", "1"),
    ).splitlines()
    assert lines[3].startswith("8 in flight, the fake answering in 1 ms: P3 / P1 by rate ")
    sides: dict[str, tuple[float, float]] = {}
    for line in lines[4:7]:
        side, _, measured = line.strip().partition(": ")
        rate_text, _, busy_text = measured.partition(" requests/s, busy ")
        sides[side] = (
            float(rate_text.replace(",", "")),
            float(busy_text.removesuffix("% of the time")),
        )
    assert set(sides) == {"the service", "the engine floor", "the service without coalescing"}
    for rate, busy in sides.values():
        # Eight at a time, each waiting at least 1 ms: at most 8,000 a second.
        assert 0 < rate < 8000 and 0 < busy <= 110
    assert (
        abs(float(lines[3].split()[-1]) - sides["the service"][0] / sides["the engine floor"][0])
        < 0.02
    )


async def test_requests_in_flight_are_kept_at_the_count_asked() -> None:
    in_flight = most = 0

    async def request() -> bytes:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.001)
        in_flight -= 1
        return b""

    spent = await profile._spent(request, 10, in_flight=4)

    assert (spent.requests, most, in_flight) == (10, 4, 0)
    assert spent.wall > 0 and spent.cpu >= 0


def test_the_sdk_comparison_on_dynamodb_local_counts_coalesced_calls() -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "bench.local_cpu", "payment", "--requests", "64"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )

    lines = finished.stdout.splitlines()
    assert lines[0] == "payment: CPU ms per request in this process (coalescing on)"
    rows = {int(line.split()[0]): [float(cell) for cell in line.split()[1:]] for line in lines[2:]}
    assert set(rows) == {1, 16}
    for service, raw, ratio, _ in rows.values():
        assert service > 0 and raw > 0 and abs(ratio - raw / service) < 0.02
    # One request at a time makes its own call; sixteen at once share theirs.
    assert rows[1][3] == 1.0
    assert rows[16][3] < 1.0


async def test_the_dataloader_and_coalescing_switches_take_them_out() -> None:
    """With `--without dataloader --without coalescing` a lookup reaches the store through
    neither, and the answer is the same."""
    stored = list(dataset.items(users=range(1), loans_per_user=1, payments_per_loan=3))
    work = {w.name: w for w in workloads.build(stored)}["payment"]
    settings = service_settings(0, FAKE_ENDPOINT)
    client = as_client(FakeDynamoDB(settings.table_name, stored, latency=0.0))
    app = create_app(settings, dynamodb_endpoint=FAKE_ENDPOINT, dynamodb_client=client)
    headers = profile.JSON + [
        (name.lower().encode(), value.encode()) for name, value in service_headers().items()
    ]
    request = profile.asgi_caller(app, work.body, headers)
    async with app.router.lifespan_context(app):
        answer = await request()
        with (
            profile._switched_off(["dataloader", "coalescing"], app.state.store),
            mock.patch.object(DataLoader, "load", side_effect=AssertionError("a DataLoader")),
            mock.patch.object(Coalescer, "lookup", side_effect=AssertionError("coalesced")),
        ):
            switched = await request()

    assert b'"paymentId"' in answer
    assert switched == answer
