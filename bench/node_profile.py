"""What the Node peer's main thread does, from the profile `node --cpu-prof` writes as it exits
(`python -m bench.saturation --cpu-prof DIR`), over the windows of the timed runs only.

V8 samples the main thread's stack every interval (1 ms by default) and stamps each sample with
the monotonic clock (microseconds), the clock `time.monotonic()` reads, so a run's samples are
those between its start and end. A sample is `(idle)` (waiting in the event loop's poll),
`(garbage collector)` (a pause of the main thread; V8's concurrent marking and compiling run on
other threads, which the profile does not see: `bench.saturation` reports the main thread's CPU
beside the whole process's), `(program)` (native code outside JavaScript: the event loop, the
HTTP parser, the kernel's calls), or a JavaScript function, counted by its package.

    python -m bench.node_profile FILE.cpuprofile [--from US --to US]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["main", "render", "summarise", "summarise_directory"]

PACKAGE = re.compile(r"node_modules/((?:@[^/]+/)?[^/]+)/")
SPECIAL = ("(idle)", "(program)", "(garbage collector)")
TOP = 8


def _part(frame: dict[str, Any]) -> str:
    """The package or part a frame's function belongs to."""
    name, url = str(frame["functionName"]), str(frame["url"])
    if name in SPECIAL:
        return name
    if (found := PACKAGE.search(url)) is not None:
        return found[1]
    if url.startswith("node:"):
        return "node (built-in modules)"
    if url.endswith("server.mjs"):
        return "the peer's own code"
    return "other"


def summarise(
    profile: dict[str, Any], windows: Iterable[tuple[float, float]] = ()
) -> dict[str, Any]:
    """Milliseconds of samples by part and the busiest functions (self time), over `windows`
    (monotonic seconds, start and end) or the whole profile."""
    nodes = {node["id"]: node["callFrame"] for node in profile["nodes"]}
    spans = [(start * 1e6, end * 1e6) for start, end in windows]
    by_part: collections.Counter[str] = collections.Counter()
    by_function: collections.Counter[str] = collections.Counter()
    stamp = profile["startTime"]
    samples, deltas = profile["samples"], profile["timeDeltas"]
    # A sample's time is the gap to the next one (the last sample's: the profile's end).
    stamps = []
    for delta in deltas:
        stamp += delta
        stamps.append(stamp)
    for index, node in enumerate(samples):
        at = stamps[index]
        if spans and not any(start <= at < end for start, end in spans):
            continue
        following = stamps[index + 1] if index + 1 < len(stamps) else profile["endTime"]
        weight = max(0.0, following - at) / 1000
        frame = nodes[node]
        part = _part(frame)
        by_part[part] += weight
        if part not in SPECIAL:
            where = frame["url"].rsplit("/", 1)[-1]
            by_function[
                f"{frame['functionName'] or '(anonymous)'} {where}:{frame['lineNumber']}"
            ] += weight
    total = sum(by_part.values())
    busy = total - by_part["(idle)"]
    return {
        "sampled_ms": total,
        "busy_ms": busy,
        "parts_ms": dict(by_part.most_common()),
        "top_functions_ms": dict(by_function.most_common(TOP)),
    }


def summarise_directory(
    directory: Path, windows: Iterable[tuple[float, float]] = ()
) -> dict[str, Any]:
    """The newest profile in `directory` (the peer's, written as it exited)."""
    profiles = sorted(directory.glob("*.cpuprofile"), key=lambda path: path.stat().st_mtime)
    if not profiles:
        raise RuntimeError(f"no .cpuprofile in {directory}: did the peer exit normally?")
    found = summarise(json.loads(profiles[-1].read_text()), windows)
    return {"file": str(profiles[-1])} | found


def render(found: dict[str, Any]) -> list[str]:
    """The parts by share of the main thread's busy samples; with `requests` and
    `main_thread_cpu_seconds` (`bench.saturation`), each part's CPU ms a request. A busy sample
    is wall time: a thread waiting for its core (other threads, other processes) is busy in the
    profile but spends no CPU, so the shares are scaled to the thread's CPU from /proc."""
    busy = found["busy_ms"] or float("nan")
    requests, cpu = found.get("requests", 0), found.get("main_thread_cpu_seconds", 0.0)
    per_request = 1000 * cpu / requests if requests else float("nan")
    lines = [
        f"The Node peer's main thread (node --cpu-prof, {found['file']}): busy in "
        f"{found['busy_ms']:,.0f} of {found['sampled_ms']:,.0f} ms sampled"
        + (f"; {per_request:.2f} ms of its CPU a request" if requests else "")
    ]
    for part, ms in found["parts_ms"].items():
        if part != "(idle)":
            extra = f"  {ms / busy * per_request:.3f} ms/request" if requests else ""
            lines.append(f"  {part:<32} {ms / busy:6.1%}{extra}")
    lines.append("  busiest functions (self time):")
    for function, ms in found["top_functions_ms"].items():
        lines.append(f"    {ms / busy:6.1%}  {function}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.node_profile", description=__doc__)
    parser.add_argument("profile", type=Path)
    parser.add_argument("--from", dest="start", type=float, help="monotonic seconds")
    parser.add_argument("--to", dest="end", type=float, help="monotonic seconds")
    arguments = parser.parse_args()
    windows = [(arguments.start, arguments.end)] if arguments.start is not None else []
    found = summarise(json.loads(arguments.profile.read_text()), windows)
    print("\n".join(render({"file": str(arguments.profile)} | found)))


if __name__ == "__main__":
    main()
