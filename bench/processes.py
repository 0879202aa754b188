"""Server processes: started, pinned to a core, waited for, timed and weighed from /proc, stopped.

CPU placement (2 cores): the load generator (this process) runs on core 0 and every server on
core 1, set with `os.sched_setaffinity` on each of the server's threads once it listens (the same
as `taskset -a -p`); with fewer cores nothing is pinned and the report says so. Where allowed,
everything runs at a raised priority (nice -10), so that other work on the machine disturbs the
measurement less; the report gives the niceness and the load average before and after.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
LOAD_CORE = 0
SERVER_CORE = 1
STOP_GRACE_SECONDS = 5.0


# Niceness of this process and so of everything it starts (servers, DynamoDB Local, the raw
# client): ahead of other work on the machine, whose load would otherwise set the pace.
PRIORITY = -10


def raise_priority() -> int:
    """Our niceness after trying PRIORITY (allowed to root or with CAP_SYS_NICE)."""
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, 0, PRIORITY)
    return os.getpriority(os.PRIO_PROCESS, 0)


def cores_available() -> set[int]:
    return os.sched_getaffinity(0)


def pinning() -> bool:
    return {LOAD_CORE, SERVER_CORE} <= cores_available()


def pin_process(pid: int, cores: set[int]) -> None:
    """Every thread of `pid` (threads created later inherit it from their creator)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(task.name), cores)


@contextlib.contextmanager
def load_generator_core() -> Iterator[None]:
    """This process (the load generator) on its core for the block; processes it starts inside
    inherit that, so start servers and DynamoDB Local before."""
    everywhere = cores_available()
    if pinning():
        pin_process(os.getpid(), {LOAD_CORE})
    try:
        yield
    finally:
        pin_process(os.getpid(), everywhere)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the whole process (all threads), from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    # Fields 14 and 15 of stat(5); `fields` starts at field 3.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def memory_mib(pid: int, field: str) -> float:
    """A memory figure of /proc/<pid>/status in MiB: `VmRSS` (resident now) or `VmHWM` (the
    peak resident since the process started)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == field:
            # "VmRSS:	   81234 kB"
            return int(value.split()[0]) / 1024
    raise KeyError(f"{field} not in /proc/{pid}/status")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    """`python -m bench.serve <peer> ...` on a free port."""

    def __init__(self, name: str, peer: str, *arguments: str) -> None:
        self.name = name
        self.port = free_port()
        self._command = [
            sys.executable,
            "-m",
            "bench.serve",
            peer,
            "--port",
            str(self.port),
            *arguments,
        ]
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def start(self) -> None:
        self._process = subprocess.Popen(
            self._command,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            # The service writes an access log line per request, as deployed; nobody reads it.
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the port accepts connections: uvicorn listens only after the app's startup."""
        assert self._process is not None
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log_tail()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not listen in {timeout}s:\n{self.log_tail()}")
            time.sleep(0.05)
        if pinning():
            pin_process(self.pid, {SERVER_CORE})

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def resident_mib(self) -> float:
        return memory_mib(self.pid, "VmRSS")

    def peak_resident_mib(self) -> float:
        return memory_mib(self.pid, "VmHWM")

    def log_tail(self, limit: int = 3000) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-limit:]

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._log.close()


def memory_record(server: Server, resident_after_repetitions: list[float]) -> dict[str, Any]:
    """What a leak would show: the server's resident memory after each repetition, in MiB, and
    its peak since it started (so read while it still runs)."""
    return {
        "rss_mib_after_repetition": resident_after_repetitions,
        "peak_rss_mib": server.peak_resident_mib(),
    }


def children(command_name: str, parent: int | None = None) -> list[int]:
    """The pids of the children of `parent` (this process by default) whose command is
    `command_name` (`java`)."""
    parent = os.getpid() if parent is None else parent
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if name == command_name and int(stat[stat.rindex(")") + 2 :].split()[1]) == parent:
            found.append(int(entry.name))
    return found
