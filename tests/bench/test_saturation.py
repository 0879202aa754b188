"""`python -m bench.saturation`'s reading of its runs: requests per CPU-second and the service /
peer ratio with its spread over the rounds, where each process runs, and the verdict that says
whether a server was CPU-bound with DynamoDB Local and wrk not the limit."""

from __future__ import annotations

from typing import Any

import pytest

from bench.saturation import Placement, render, summarise, verdicts


def _run(
    round_: int, side: str, requests: int, cpu: float = 0.0, **shares: float
) -> dict[str, Any]:
    """A 10 s run of `side` on the loan page: `cpu` seconds of the server's CPU (a raw call has
    none), DynamoDB Local's and wrk's CPU and the cores' busy shares as given."""
    seconds = 10.0
    found = {
        "round": round_,
        "side": side,
        "workload": "loan_page",
        "requests": requests,
        "seconds": seconds,
        "rate": requests / seconds,
        "database_cpu_seconds": shares.get("database", 0.5) * seconds,
        "generator_cpu_seconds": shares.get("wrk", 0.02) * seconds,
        "server_core_busy": shares.get("server_busy", 1.0),
        "database_core_busy": shares.get("database_busy", 0.6),
    }
    for server in ("service", "node"):
        mine = cpu if server == side else 0.01
        main = mine * shares.get("main_thread", 1.0)
        found |= {f"{server}_cpu_seconds": mine, f"{server}_main_thread_cpu_seconds": main}
    return found


def _rounds(
    service_cpu: list[float], node_cpu: list[float], **shares: float
) -> list[dict[str, Any]]:
    """Rounds of 2,000 requests a server (2,000 / CPU seconds a CPU-second), DynamoDB Local's
    own rate 5,000 a run."""
    runs = []
    for round_, (mine, theirs) in enumerate(zip(service_cpu, node_cpu, strict=True)):
        runs += [
            _run(round_, "service", 2_000, mine, **shares),
            _run(round_, "node", 2_000, theirs, **shares),
            _run(round_, "raw_service_call", 5_000, **shares),
            _run(round_, "raw_node_call", 5_000, **shares),
        ]
    return runs


def test_the_ratio_is_of_requests_per_cpu_second_with_its_spread_over_the_rounds() -> None:
    # The service 8, 9, 10 CPU-seconds; the peer 12 in each round: ratios 1.5, 1.33, 1.2.
    found = summarise(
        _rounds([8.0, 9.0, 10.0], [12.0, 12.0, 12.0], server_busy=0.97, main_thread=0.8)
    )
    page = found["loan_page"]
    assert page["sides"]["service"]["requests_per_cpu_second"] == pytest.approx(2_000 / 9)
    assert page["sides"]["node"]["cpu_ms_per_request"] == pytest.approx(6.0)
    assert page["sides"]["node"]["main_thread_cpu_ms_per_request"] == pytest.approx(4.8)
    ratio = page["service_over_node_per_cpu_second"]
    assert ratio["rounds"] == pytest.approx([1.5, 12 / 9, 1.2])
    assert (ratio["min"], ratio["median"], ratio["max"]) == pytest.approx((1.2, 12 / 9, 1.5))
    text = render(
        {
            "options": {"rounds": 3, "seconds": 10, "warmup_seconds": 5, "connections": 32},
            "payments": 1_000,
            "placement": Placement.of({0, 1}).described,
            "summary": found,
        }
    )
    assert "loan_page: service / Node peer requests per CPU-second 1.33 (rounds 1.20-1.50" in text


def test_a_server_below_its_core_or_a_database_without_headroom_is_said_so() -> None:
    # CPU-bound (90 % of the core and more), DynamoDB Local at 2.5 times the servers' rate.
    saturated = summarise(_rounds([9.5, 9.5], [9.6, 9.6]))
    assert verdicts(saturated) == [
        "loan_page, service: saturated, DynamoDB Local not the limit",
        "loan_page, node: saturated, DynamoDB Local not the limit",
    ]
    # Half the core: the server waited on something else.
    idle = summarise(_rounds([5.0, 5.0], [9.6, 9.6], database_busy=0.95, wrk=0.6))
    service, node = verdicts(idle)
    assert "not CPU-bound (its event loop 50% of its core)" in service
    # Its helper threads off the core (`load.pin_event_loop`): only its event loop saturates it.
    helped = summarise(_rounds([9.5, 9.5], [11.0, 11.0], main_thread=0.8))
    assert "not CPU-bound (its event loop 88% of its core)" in verdicts(helped)[1]
    assert "DynamoDB Local's core 95% busy" in node and "wrk 60% of its core" in node
    # DynamoDB Local's own rate no more than the server's.
    runs = [
        run | {"requests": 2_100, "rate": 210.0} if run["side"].startswith("raw") else run
        for run in _rounds([9.5], [9.5])
    ]
    assert "DynamoDB Local's own rate only 1.05x the server's" in verdicts(summarise(runs))[0]


def test_the_server_loaded_has_a_core_to_itself() -> None:
    two = Placement.of({0, 1})
    assert (two.database, two.server, two.generator, two.raw_generator) == ((0,), 1, 0, 1)
    assert "wrk on core 0 (beside DynamoDB Local)" in two.described
    three = Placement.of({0, 1, 2})
    assert (three.database, three.server, three.generator, three.raw_generator) == ((0,), 1, 2, 2)
    eight = Placement.of(set(range(8)))
    assert (eight.database, eight.server, eight.generator) == ((0, 2, 3), 1, 7)
    with pytest.raises(SystemExit, match="two cores at least"):
        Placement.of({0})
