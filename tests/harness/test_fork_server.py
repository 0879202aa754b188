"""Warm processes (`harness.fork_server`): a service command forked from a process that imported
the service writes its output and exits with its status as a cold one does (SIGTERM and SIGKILL
of a warm server: tests/server/test_request_lines_kept.py); other commands start cold."""

from __future__ import annotations

import sys
import tempfile

from harness import fork_server
from harness.processes import ROOT


def run(arguments: list[str]) -> tuple[fork_server.Forked, str]:
    with tempfile.TemporaryFile() as log:
        child = fork_server.fork(
            [sys.executable, "-m", "cli", *arguments],
            cwd=ROOT,
            env=None,
            stdout=log.fileno(),
            stderr=log.fileno(),
        )
        child.wait(60)
        log.seek(0)
        return child, log.read().decode()


def test_a_warm_command_writes_its_output_and_exits_with_its_status() -> None:
    helped, text = run(["--help"])
    refused, error = run(["no-such-command"])

    assert helped.returncode == 0 and "serve" in text
    assert refused.returncode == 2 and "no-such-command" in error


def test_only_the_service_s_own_modules_start_warm() -> None:
    assert fork_server.warm([sys.executable, "-m", "cli", "serve"])
    assert not fork_server.warm([sys.executable, "-m", "bench.profile"])
    assert not fork_server.warm(["node", "gateway.mjs"])
