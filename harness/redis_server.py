"""A Redis server for the tests and the benchmark: Debian's `redis-server` on a free port, with
nothing kept (`--save "" --appendonly no`), so that a restart loses everything, as a cache node
without persistence does; optionally the replica of another, for a failover. Its working folder is
a temporary one: a replica's full sync writes the primary's snapshot there."""

from __future__ import annotations

import shutil
import tempfile
import time

import redis

from harness.processes import HOST, Process

__all__ = ["RedisServer"]

READY_SECONDS = 10.0


class RedisServer(Process):
    def __init__(self, *, replica_of: RedisServer | None = None) -> None:
        executable = shutil.which("redis-server")
        if executable is None:
            raise RuntimeError("the fleet needs Debian's redis-server: `make test` installs it")
        self._directory = tempfile.TemporaryDirectory(prefix="redis-")
        command = [executable, "--port", "{port}", "--bind", HOST, "--dir", self._directory.name]
        command += ["--save", "", "--appendonly", "no"]
        if replica_of is not None:
            command += ["--replicaof", HOST, str(replica_of.port)]
        super().__init__("redis-server", command)
        self.redis_url = f"redis://{HOST}:{self.port}"

    def start(self) -> None:
        super().start()
        deadline = time.monotonic() + READY_SECONDS
        while True:
            self._check_running(deadline)
            try:
                with redis.Redis(host=HOST, port=self.port, socket_timeout=1) as client:
                    client.ping()
                    return
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)

    def stop(self) -> None:
        super().stop()
        self._directory.cleanup()

    def command(self, *arguments: str) -> object:
        """One command, answered (`REPLICAOF NO ONE`, `INFO replication`)."""
        with redis.Redis(host=HOST, port=self.port, socket_timeout=5) as client:
            return client.execute_command(*arguments)
