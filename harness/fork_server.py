"""Warm processes: `python -m <module> ...` forked from a process that has imported the service
once, instead of started cold (issue 65: about 1.3 s of CPU a server, paid again by each one).

`python -m harness.fork_server SOCKET` imports the service's modules, then answers on a Unix
socket: each request (a JSON line: the module, its arguments, the environment and the working
directory, with the child's stdin, stdout and stderr passed as file descriptors) forks a child
that runs the module as `python -m` would, and answers its pid; a `wait` request answers its
exit status once it has ended. A child is a real process, as a cold one: SIGTERM, SIGKILL and
/proc see it as such. `Forked` is its handle, `subprocess.Popen`'s methods that `Process` uses.
Only under pytest (and the commands it runs): `make bench` measures processes started cold, as
deployed. `LOC_TEST_FORK_SERVER=0` turns it off (every process started cold).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["WARM_MODULES", "Forked", "fork", "warm"]

# The modules a child may run warm: what they import is imported once, before any fork.
WARM_MODULES = ("cli",)
_IMPORTS = ("cli.main", "cli.serve_command", "server.app", "server.operators_port", "uvicorn")
_READY = b"ready\n"
_START_SECONDS = 60.0


def warm(command: Sequence[str]) -> bool:
    """Whether `command` is `python -m <a warm module> ...` with this interpreter, and warm
    processes are on: under pytest (and what it runs), not for `make bench`'s own figures."""
    return (
        "PYTEST_CURRENT_TEST" in os.environ
        and os.environ.get("LOC_TEST_FORK_SERVER", "1") != "0"
        and len(command) >= 3
        and command[0] == sys.executable
        and command[1] == "-m"
        and command[2] in WARM_MODULES
    )


class Forked:
    """A child of the fork server: what `Process` asks of a `subprocess.Popen`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = _server().status(self.pid, block=False)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, number: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # ended since
                os.kill(self.pid, number)


def fork(
    command: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None, stdout: int, stderr: int
) -> Forked:
    """`command` (`warm` said yes) run as a child of the fork server."""
    return Forked(_server().spawn(command[2], list(command[3:]), cwd, env, stdout, stderr))


class _Client:
    """This process's fork server: started on first use, stopped at exit."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="loc-forks-")
        path = str(Path(self._folder.name) / "socket")
        root = Path(__file__).resolve().parent.parent
        self._process = subprocess.Popen(
            [sys.executable, "-m", "harness.fork_server", path],
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
        assert self._process.stdout is not None
        with self._process.stdout as started:  # nothing more comes on it
            if started.readline() != _READY:
                raise RuntimeError("the fork server did not start")
        self._path = path
        self._lock = threading.Lock()
        atexit.register(self.stop)

    def _ask(self, request: dict[str, object], fds: Sequence[int] = ()) -> object:
        with self._lock, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(self._path)
            socket.send_fds(sock, [json.dumps(request).encode() + b"\n"], list(fds))
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = sock.recv(4096)
                if not chunk:
                    raise RuntimeError("the fork server closed the connection")
                answer += chunk
        return json.loads(answer)

    def spawn(
        self,
        module: str,
        arguments: list[str],
        cwd: Path,
        env: Mapping[str, str] | None,
        stdout: int,
        stderr: int,
    ) -> int:
        with open(os.devnull, "rb") as stdin:
            request: dict[str, object] = {
                "spawn": module,
                "arguments": arguments,
                "cwd": str(cwd),
                "env": dict(os.environ if env is None else env),
            }
            pid = self._ask(request, [stdin.fileno(), stdout, stderr])
        assert isinstance(pid, int)
        return pid

    def status(self, pid: int, *, block: bool) -> int | None:
        status = self._ask({"status": pid})
        assert status is None or isinstance(status, int)
        return status

    @property
    def running(self) -> bool:
        return self._process.poll() is None

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(5)
        self._folder.cleanup()


_client: _Client | None = None
_client_lock = threading.Lock()


def _server() -> _Client:
    global _client
    with _client_lock:
        if _client is None or not _client.running:
            _client = _Client()
        return _client


def _serve(path: str) -> None:
    """The fork server's loop: imports once, then forks a child per request."""
    for name in _IMPORTS:
        __import__(name)
    ended: dict[int, int] = {}
    children: set[int] = set()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sys.stdout.buffer.write(_READY)
    sys.stdout.buffer.flush()
    while True:
        connection, _ = listener.accept()
        with connection:
            message, fds, _flags, _address = socket.recv_fds(connection, 1 << 20, 3)
            while not message.endswith(b"\n"):
                message += connection.recv(1 << 20)
            request = json.loads(message)
            if "status" in request:
                pid = request["status"]
                _reap(children, ended)
                answer = ended.get(pid) if pid in ended or pid in children else -1
                connection.sendall(json.dumps(answer).encode() + b"\n")
                continue
            pid = os.fork()
            if pid == 0:  # the child
                listener.close()
                connection.close()
                _run(request, fds)
            for descriptor in fds:
                os.close(descriptor)
            children.add(pid)
            connection.sendall(json.dumps(pid).encode() + b"\n")


def _reap(children: set[int], ended: dict[int, int]) -> None:
    for pid in list(children):
        with contextlib.suppress(ChildProcessError):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == 0:
                continue
            children.discard(pid)
            ended[pid] = os.waitstatus_to_exitcode(status)


def _run(request: dict[str, object], fds: list[int]) -> None:
    """In the child: the module run as `python -m` runs it, with the request's standard
    streams, environment and working directory. Never returns: its end (or its exception) ends
    the child as it ends an interpreter, exit handlers run (the log's last lines flushed)."""
    for target, descriptor in zip((0, 1, 2), fds, strict=True):
        os.dup2(descriptor, target)
        os.close(descriptor)
    os.chdir(str(request["cwd"]))
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    arguments = request["arguments"]
    assert isinstance(arguments, list)
    sys.argv = [str(request["spawn"]), *map(str, arguments)]
    runpy.run_module(str(request["spawn"]), run_name="__main__", alter_sys=True)
    raise SystemExit(0)


if __name__ == "__main__":
    _serve(sys.argv[1])
