"""`bench.node_profile`: the Node peer's `node --cpu-prof` profile read over the timed runs'
windows only, by part, its shares scaled to the main thread's CPU a request."""

from __future__ import annotations

from typing import Any

import pytest

from bench.node_profile import render, summarise


def _profile() -> dict[str, Any]:
    """Samples 1 ms apart from t = 100 s (monotonic, microseconds): 4 ms of the garbage
    collector, then 4 of the AWS SDK's code, 2 idle, and 10 of graphql-yoga's past the window."""
    frames = {
        1: ("(root)", ""),
        2: ("(garbage collector)", ""),
        3: ("send", "file:///p/node_modules/@smithy/core/dist-cjs/index.js"),
        4: ("(idle)", ""),
        5: ("handle", "file:///p/node_modules/graphql-yoga/cjs/server.js"),
    }
    nodes = [
        {"id": key, "callFrame": {"functionName": name, "url": url, "lineNumber": 9}}
        for key, (name, url) in frames.items()
    ]
    samples = [2] * 4 + [3] * 4 + [4] * 2 + [5] * 10
    start = 100_000_000
    return {
        "nodes": nodes,
        "startTime": start,
        "endTime": start + 1000 * (len(samples) + 1),
        "samples": samples,
        "timeDeltas": [1000] * len(samples),
    }


def test_only_the_windows_samples_count_by_part_and_the_shares_scale_to_the_threads_cpu() -> None:
    # The window covers the first ten samples (stamped 100.001 s to 100.010 s).
    found = summarise(_profile(), [(100.0005, 100.0105)])
    assert found["sampled_ms"] == pytest.approx(10)
    assert found["busy_ms"] == pytest.approx(8)
    assert found["parts_ms"] == pytest.approx(
        {"(garbage collector)": 4, "@smithy/core": 4, "(idle)": 2}
    )
    assert "graphql-yoga" not in found["parts_ms"]
    # Two requests, 3 ms of the main thread's CPU: half of it each.
    text = render(
        {"file": "peer.cpuprofile", "requests": 2, "main_thread_cpu_seconds": 0.006} | found
    )
    assert "3.00 ms of its CPU a request" in text[0]
    assert any(
        line.split() == ["(garbage", "collector)", "50.0%", "1.500", "ms/request"] for line in text
    )
    whole = summarise(_profile())
    assert whole["parts_ms"]["graphql-yoga"] == pytest.approx(10)
