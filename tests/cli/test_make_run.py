"""`make run` on a terminal: what a person needs (GraphiQL's address, a token, how to get a
customer's token) prints last and fits a 24-line screen."""

from __future__ import annotations

import math
import os
import pty
import re
import select
import signal
import socket
import struct
import subprocess
import termios
import time
from fcntl import ioctl
from pathlib import Path

import jwt
import pytest

from harness.processes import KEPT_SETTINGS
from process.settings import DEV_JWT_SECRET
from server.auth import SERVICE_SCOPE

REPO = Path(__file__).resolve().parents[2]
ROWS, COLUMNS = 24, 80
LAST_LINE = "A customer's token: "

pytestmark = pytest.mark.slow  # make, the service and a DynamoDB Local (a JVM)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _read(fd: int, *, until: str | None, seconds: float) -> str:
    """What the terminal shows within `seconds`, or until a line starting with `until` ends."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: every process holding the terminal has gone
            break
        if not chunk:
            break
        chunks.append(chunk)
        text = b"".join(chunks).decode()
        if until is not None and re.search(rf"^{re.escape(until)}.*\r?\n", text, re.MULTILINE):
            break
    return b"".join(chunks).decode()


def test_make_run_ends_with_the_banner_on_one_screen(tmp_path: Path) -> None:
    port = _free_port()
    primary, secondary = pty.openpty()
    ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    environment = {
        **{
            name: value
            for name, value in os.environ.items()
            if not name.startswith("LOC_") or name in KEPT_SETTINGS
        },
        "LOC_PORT": str(port),
        "LOC_DATA_DIR": str(tmp_path / "data"),
        "MAKEFLAGS": "",
    }
    make = subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=REPO,
        env=environment,
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        start_new_session=True,
    )
    os.close(secondary)
    try:
        shown = _read(primary, until=LAST_LINE, seconds=180)
        # Nothing more while nobody calls it.
        shown += _read(primary, until=None, seconds=2)
    finally:
        os.killpg(make.pid, signal.SIGINT)
        _read(primary, until=None, seconds=30)
        make.wait(timeout=30)
        os.close(primary)

    lines = shown.replace("\r\n", "\n").rstrip("\n").split("\n")
    *before, graphiql, token_heading, token, customer = lines
    assert graphiql == f"GraphiQL: http://127.0.0.1:{port}/graphql", shown
    assert token_heading == "Service token (Authorization: Bearer ...), valid 12 hours:"
    claims = jwt.decode(token.strip(), DEV_JWT_SECRET, algorithms=["HS256"])
    assert claims["scope"] == SERVICE_SCOPE
    assert customer == f"{LAST_LINE}.venv/bin/loc-payments token --user <user id>"
    # The first start's demonstration data in one line; no line per write, none of uvicorn's.
    assert [line for line in before if "demonstration data: 13 payments" in line], shown
    assert not [line for line in before if "loc_payments.audit" in line or "uvicorn" in line]
    rows = sum(max(1, math.ceil(len(line) / COLUMNS)) for line in lines)
    assert rows <= ROWS, f"{rows} rows on a {ROWS}-row terminal:\n{shown}"
