"""`bench.budget_fleet`'s report: each figure against its bound, and a refusal's CPU as its
target (the pass itself runs in the smoke test)."""

from __future__ import annotations

from typing import Any

from bench import budget_fleet


def _results(*, refused_ms: float, noisy_admitted: int) -> dict[str, Any]:
    def phase(admitted: int, seconds: float, bursts: int) -> dict[str, Any]:
        least, most = 0.9 * 60 * seconds, 60 * seconds + bursts * 30
        return {"offered": 1200, "admitted_cost": admitted, "throttled": 1000,
                "seconds": seconds, "least": least, "most": most}  # fmt: skip

    return {
        "settings": {
            **vars(budget_fleet.DEFAULT), "instances": 3, "rate": 60.0, "burst": 30,
            "lookup_cost": 3, "noisy_per_second": 200.0, "quiet_per_second": 30.0,
        },
        "quiet": {"offered": 270, "served": 270, "throttled": 0, "p99_alone_ms": 21.5,
                  "p99_beside_noisy_ms": 30.1, "p50_alone_ms": 8.0, "p50_beside_noisy_ms": 9.2},
        "noisy": phase(noisy_admitted, 6.1, 1),
        "outage": phase(180, 3.0, 3) | {"shared_again_s": 1.1},
        "states": {},
        "failed": [],
        "refusal": {
            "refused_cpu_ms": refused_ms, "admitted_cpu_ms": 1.2,
            "ratio": round(refused_ms / 1.2, 3), "ratio_range": [0.2, 0.3],
            "idle_cpu_ms_per_second": 12.0, "refused_but_admitted": 0,
            "target": 0.25, "met": refused_ms / 1.2 <= 0.25,
        },
    }  # fmt: skip


def test_each_figure_is_said_against_its_bound() -> None:
    rendered = budget_fleet.render(_results(refused_ms=0.24, noisy_admitted=300))

    assert "p99 21.5 ms alone, 30.1 ms beside the noisy one" in rendered
    assert "270 of 270 served, 0 throttled" in rendered
    assert "300 of cost admitted in 6.1 s (1,000 lookups refused); 0.9 x rate x time 329.4: " in (
        rendered
    )
    assert "329.4: NOT reached; rate x time + burst 396: within" in rendered
    assert "rate x time + 3 bursts 270: within" in rendered
    assert "0.240 ms of CPU, an admitted one-payment lookup 1.200 ms: 0.20" in rendered
    assert rendered.endswith("target at most 0.25: met)")


def test_a_refusal_over_a_quarter_of_a_lookup_misses_its_target() -> None:
    results = _results(refused_ms=0.6, noisy_admitted=380)

    [target] = budget_fleet.targets(results)

    assert target.measured == {"fleet": 0.5} and target.met is False
    assert budget_fleet.render(results).endswith("target at most 0.25: NOT met)")
