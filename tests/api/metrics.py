"""One sample's value read from the service's `/metrics` text (Prometheus' exposition format), by
the metric's name and labels: for the metrics' tests (tests/api/test_observability.py) and the
consumed capacity's (tests/api/test_capacity.py)."""

from __future__ import annotations


def metric(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{") and all(
            f'{key}="{value}"' in line for key, value in labels.items()
        ):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name}{{{wanted}}} in\n{text}")
