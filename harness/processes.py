"""Server processes for the tests and the benchmark: a command on a free port, started, waited
for until it answers, weighed from /proc, stopped; its output kept for the failure message.

`Process` runs any command; `Service` runs the service itself (`python -m cli serve`, the
`local` environment) on a given table, and `serving` runs several of them at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

import httpx

from harness import fork_server
from process.settings import LOCAL_AWS_CREDENTIALS

__all__ = [
    "CLOCK_TICKS",
    "HOST",
    "KEPT_SETTINGS",
    "REGION",
    "ROOT",
    "Process",
    "Service",
    "children",
    "cpu_seconds",
    "free_port",
    "serving",
]

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
READY_SECONDS = 60.0
STOP_GRACE_SECONDS = 10.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
REGION = "us-west-2"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the whole process (every thread), from /proc/<pid>/stat."""
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
            return int(value.split()[0]) / 1024  # "VmRSS:	   81234 kB"
    raise KeyError(f"{field} not in /proc/{pid}/status")


class Process:
    """`command` on a free port (`{port}` in its arguments is replaced by it), from `cwd`,
    with `env` (this process's environment by default); its output goes to a temporary file,
    but for its stdout when `keep_stdout` is false (a server's access log, which nobody reads)."""

    def __init__(
        self,
        name: str,
        command: Sequence[str | Path],
        *,
        cwd: Path = ROOT,
        env: Mapping[str, str] | None = None,
        keep_stdout: bool = True,
    ) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self._command = [str(part).replace("{port}", str(self.port)) for part in command]
        self._cwd, self._env, self._keep_stdout = cwd, env, keep_stdout
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self._process: subprocess.Popen[bytes] | fork_server.Forked | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def start(self) -> None:
        if fork_server.warm(self._command):
            # From a process that has imported the service already (`harness.fork_server`).
            with open(os.devnull, "wb") as devnull:
                stdout = self._log if self._keep_stdout else devnull
                self._process = fork_server.fork(
                    self._command,
                    cwd=self._cwd,
                    env=self._env,
                    stdout=stdout.fileno(),
                    stderr=self._log.fileno(),
                )
            return
        self._process = subprocess.Popen(
            self._command,
            cwd=self._cwd,
            env=None if self._env is None else dict(self._env),
            stdin=subprocess.DEVNULL,
            stdout=self._log if self._keep_stdout else subprocess.DEVNULL,
            stderr=self._log,
        )

    def _check_running(self, deadline: float) -> None:
        assert self._process is not None
        if self._process.poll() is not None:
            raise RuntimeError(f"{self.name} exited:\n{self.log_tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{self.name} never became ready:\n{self.log_tail()}")

    def wait_listening(self, timeout: float = READY_SECONDS) -> None:
        """Until its port accepts connections (uvicorn listens only after the app's startup)."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_running(deadline)
            with contextlib.suppress(OSError), socket.create_connection((HOST, self.port), 0.5):
                return
            time.sleep(0.05)

    async def wait_ready(
        self,
        http: httpx.AsyncClient,
        path: str,
        ready: Callable[[httpx.Response], bool] = lambda response: response.status_code == 200,
        *,
        base_url: str | None = None,
    ) -> None:
        """Until GET `path` (on `base_url`, else this process's URL) answers what `ready`
        accepts."""
        deadline = time.monotonic() + READY_SECONDS
        while True:
            self._check_running(deadline)
            with contextlib.suppress(httpx.HTTPError):
                if ready(await http.get(f"{base_url or self.url}{path}", timeout=2)):
                    return
            await asyncio.sleep(0.1)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def resident_mib(self) -> float:
        return memory_mib(self.pid, "VmRSS")

    def peak_resident_mib(self) -> float:
        return memory_mib(self.pid, "VmHWM")

    def log_tail(self, limit: int = 3000) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-limit:]

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill ends it; `start` may run it again (same port)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def terminate(self) -> None:
        """SIGTERM, as an orchestrator stops it, and wait for it to exit (SIGKILL after
        STOP_GRACE_SECONDS); its output stays readable until `stop`."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def stop(self) -> None:
        self.terminate()
        self._log.close()


# Passed on from this process's environment: the test suite's record of AWS operations
# (`datasource.permissions`), and the bench's clients' budgets (`bench.load.BUDGET_OVERRIDES`).
KEPT_SETTINGS = ("LOC_AWS_OPERATION_LOG", "LOC_BUDGET_OVERRIDES")


class Service(Process):
    """`python -m cli serve` in the `local` environment on `table_name`, quiet (no metrics,
    warnings only) but for `settings` (more LOC_* variables, by setting name:
    `stream_poll_interval`). Without an endpoint it starts its own DynamoDB Local (give it a
    `data_dir`). Its stdout (the request log) is kept unless `keep_stdout` is false; `cwd`: the
    tree whose code it runs (another commit's worktree)."""

    def __init__(
        self,
        endpoint_url: str | None,
        table_name: str,
        settings: Mapping[str, str] | None = None,
        *,
        keep_stdout: bool = True,
        cwd: Path = ROOT,
    ) -> None:
        command = [sys.executable, "-m", "cli", "serve"]
        super().__init__("the service", command, cwd=cwd, keep_stdout=keep_stdout)
        self.name = f"the service on {self.url}"
        self.ws_url = f"ws://{HOST}:{self.port}/graphql"
        self._env = {
            **{name: value for name, value in os.environ.items() if not name.startswith("LOC_")},
            **{name: os.environ[name] for name in KEPT_SETTINGS if name in os.environ},
            "LOC_ENV": "local",
            **({} if endpoint_url is None else {"LOC_DYNAMODB_ENDPOINT": endpoint_url}),
            "LOC_TABLE_NAME": table_name,
            "LOC_REGION": REGION,
            "LOC_PORT": str(self.port),
            "LOC_METRICS": "off",
            "LOC_LOG_LEVEL": "WARNING",
            "AWS_ACCESS_KEY_ID": LOCAL_AWS_CREDENTIALS["aws_access_key_id"],
            "AWS_SECRET_ACCESS_KEY": LOCAL_AWS_CREDENTIALS["aws_secret_access_key"],
            **{f"LOC_{name.upper()}": value for name, value in (settings or {}).items()},
        }
        # Outside `local` the API port's /readyz answers its status alone; whether live updates
        # read is in its detail, on the operators' port, so a service without one gets one.
        self._detail_url = self.url
        if self._env["LOC_ENV"] != "local":
            if self._env["LOC_METRICS"] != "port" or "LOC_METRICS_PORT" not in self._env:
                self._env |= {"LOC_METRICS": "port", "LOC_METRICS_PORT": str(free_port())}
            self._detail_url = f"http://{HOST}:{self._env['LOC_METRICS_PORT']}"

    async def wait_serving(self, http: httpx.AsyncClient) -> None:
        """Until `/readyz`'s detail says its live updates read the stream."""
        await self.wait_ready(
            http,
            "/readyz",
            lambda got: b'"liveUpdates":"ok"' in got.content,
            base_url=self._detail_url,
        )


@contextlib.asynccontextmanager
async def serving(
    endpoint_url: str | None, table_name: str, count: int = 1, **settings: str
) -> AsyncIterator[list[Service]]:
    """`count` services on one table, started at once, each ready with its live updates
    reading; stopped after the block."""
    services = [Service(endpoint_url, table_name, settings) for _ in range(count)]
    try:
        for service in services:
            service.start()
        async with httpx.AsyncClient() as http:
            await asyncio.gather(*(service.wait_serving(http) for service in services))
        yield services
    finally:
        for service in services:
            service.stop()
