"""Where a server's CPU goes, by part: py-spy samples the running server (every Python frame,
uvicorn's included) while a load runs, and each sample counts for the part of its innermost
frame that belongs to one (a C call counts for the Python frame that made it).

    decode          DynamoDB's answer read into items (`datasource.aiobotocore_adapter`, botocore)
    mapping         items into payments and a page's edges (`datasource.items`, `.pages`)
    completion      the compiled plan answering the document (`schema`, graphql-core, Strawberry)
    resolvers       the fields' resolvers and loaders (`resolvers`, DataLoader)
    DynamoDB call   the request made, signed and sent (aiobotocore, botocore, aiohttp, datasource)
    GraphQL HTTP    the request read, the answer made and serialized (`server.graphql_view`)
    HTTP server     uvicorn, h11/httptools, Starlette
    logs, metrics   the request log line and the metrics (`logging`, `server.request_records`)
    other           the event loop and the rest
"""

from __future__ import annotations

import asyncio
import collections
import re
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

__all__ = ["OTHER", "part_of", "sampled", "shares"]

Result = TypeVar("Result")

# (part, what its frames' files contain), tried in this order on each frame from the innermost.
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("logs, metrics", ("/logging/", "pythonjsonlogger", "prometheus_client", "/observability.py",
                       "process/logs.py")),
    ("decode", ("aiobotocore_adapter.py", "botocore/parsers.py")),
    ("mapping", ("datasource/items.py", "datasource/pages.py")),
    ("completion", ("schema/", "<one pass of", "/graphql/", "/strawberry/schema",
                    "/strawberry/types", "/strawberry/execution")),
    ("resolvers", ("resolvers/", "strawberry/dataloader.py")),
    ("DynamoDB call", ("aiobotocore", "botocore", "aiohttp", "datasource/")),
    ("GraphQL HTTP", ("server/graphql_view.py", "server/graphql_over_http.py",
                      "server/auth.py", "server/app.py")),
    ("HTTP server", ("uvicorn", "h11", "httptools", "starlette")),
)  # fmt: skip
OTHER = "other"
# py-spy is a dependency of the project: beside this Python when not on the PATH.
PY_SPY = str(Path(sys.executable).parent / "py-spy")
_FRAME = re.compile(r"\((?P<file>[^():]*)(?::\d+)?\)$")


def part_of(stack: list[str]) -> str:
    """The part a sample counts for: its innermost frame's that has one."""
    for frame in reversed(stack):
        match = _FRAME.search(frame)
        where = match.group("file") if match else frame
        for part, marks in PARTS:
            if any(mark in where for mark in marks):
                return part
    return OTHER


def shares(raw: str) -> dict[str, float]:
    """Each part's share of the samples of py-spy's raw output (`stack;stack;... count`)."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            counts[part_of(stack.split(";"))] += int(count)
    total = sum(counts.values())
    ordered = [part for part, _marks in PARTS] + [OTHER]
    return {part: counts[part] / total for part in ordered if total and counts[part]}


async def sampled(
    pid: int, seconds: float, work: Callable[[], Awaitable[Result]]
) -> tuple[Result, dict[str, float]]:
    """`work`'s result, with each part's share of process `pid`'s CPU while it ran (py-spy,
    sampling for `seconds`, which should end before `work` does)."""
    spy = shutil.which("py-spy") or PY_SPY
    with tempfile.TemporaryDirectory() as directory:
        output = Path(directory) / "samples.txt"
        command = [
            spy, "record", "--pid", str(pid), "--duration", str(max(1, int(seconds))),
            "--rate", "200", "--format", "raw", "--nonblocking", "--output", str(output),
        ]  # fmt: skip
        recorder = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        result = await work()
        _, errors = await recorder.communicate()
        if recorder.returncode != 0:
            raise RuntimeError(f"py-spy could not sample process {pid}: {errors.decode()}")
        return result, shares(_read(output))


def _read(path: Path) -> str:
    return path.read_text()
