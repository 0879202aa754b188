"""`python -m bench.profile`, the in-process runner: it measures, profiles and counts calls on
the fake DynamoDB and on DynamoDB Local; and the measurement the in-process passes share."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.profile import Rounds, Spent, interleaved, paired, spent

ROOT = Path(__file__).resolve().parents[2]
FIGURES = re.compile(
    r"^(\w+) on (.+), (\d+) in flight: ([\d.]+) ms of CPU per request without the profiler, "
    r"([\d,]+) requests/s, busy (\d+)% of the time, ([\d.]+) DynamoDB calls per request$"
)


def _profile(*arguments: str) -> list[str]:
    """What `python -m bench.profile ...` prints, line by line."""
    return subprocess.run(
        [sys.executable, "-m", "bench.profile", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    ).stdout.splitlines()


def test_the_profile_of_one_payment_names_the_pipeline() -> None:
    printed = _profile("payment", "--requests", "50", "--top", "200")

    figures = FIGURES.match(printed[0])
    assert figures is not None, printed[0]
    assert figures[1] == "payment" and float(figures[4]) > 0
    assert float(figures[7]) == 1.0  # one request at a time: one GetItem each
    assert any("engine/operations.py" in line for line in printed[1:])


def test_requests_in_flight_on_a_slow_fake_give_the_rate_and_the_busy_share() -> None:
    [line] = _profile(
        "payment", "--requests", "160", "--in-flight", "8", "--latency", "1", "--top", "0"
    )

    figures = FIGURES.match(line)
    assert figures is not None, line
    # Eight at a time, each waiting at least 1 ms: at most 8,000 a second.
    assert 0 < float(figures[5].replace(",", "")) < 8000 and 0 < int(figures[6]) <= 110


@pytest.mark.ddblocal
def test_on_dynamodb_local_requests_in_flight_share_their_lookups() -> None:
    [line] = _profile("payment", "--local", "--requests", "64", "--in-flight", "16", "--top", "0")

    figures = FIGURES.match(line)
    assert figures is not None, line
    assert figures[2] == "DynamoDB Local"
    assert float(figures[7]) < 1.0  # sixteen at once share their calls


async def test_requests_in_flight_are_kept_at_the_count_asked() -> None:
    in_flight = most = 0

    async def request() -> bytes:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.001)
        in_flight -= 1
        return b""

    found = await spent(request, 10, in_flight=4)

    assert (found.requests, most, in_flight) == (10, 4, 0)
    assert found.wall > 0 and found.cpu >= 0


async def test_sides_take_turns_and_pair_by_round() -> None:
    order: list[str] = []

    def side(name: str) -> object:
        async def request() -> bytes:
            order.append(name)
            return b"{}"

        return request

    found = await interleaved({"a": side("a"), "b": side("b")}, Rounds(1, 3, 1), 1)  # type: ignore[dict-item]

    assert order == ["a", "b", "a", "b", "b", "a", "a", "b"]
    assert {name: len(runs) for name, runs in found.items()} == {"a": 3, "b": 3}
    cells = paired({"a": [Spent(1, 1.0, 1.0)], "b": [Spent(1, 2.0, 1.0)]}, "a", "b")
    assert cells == {"a_cpu_ms": 1000.0, "b_cpu_ms": 2000.0, "ratio": 2.0}
