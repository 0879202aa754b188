"""Test backends: moto's server mode (the main one) and Amazon DynamoDB Local (`ddblocal`).

Each backend is one process-wide server with one shared client (the event loop lives for the
session); every test gets a fresh table of its own, deleted afterwards. moto's in-process
`mock_aws` cannot intercept aiobotocore's HTTP, hence the server.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
from moto.server import ThreadedMotoServer

from datasource import DynamoConfig, PaymentStore, open_client
from domain.keys import DEFAULT_FEED_SHARDS, DEFAULT_GSI2_SHARDS, FeedLayout, StatusLayout
from harness.redis_server import RedisServer
from tests import hypothesis_profiles, least_privilege
from tests.backends import (
    CURSOR_SECRET,
    REGION,
    TEST_KEY,
    Backend,
    backend_config,
    fresh_table,
)
from tests.moto_idempotency import transactions_idempotent_by_token
from tests.moto_memory import models_untracked

# Helpers that assert, moved out of the test modules that share them (which pytest rewrites):
# rewritten too, so that a failed assert in one still shows what it compared.
pytest.register_assert_rewrite(
    "tests.api.live_instances", "tests.api.raw_table", "tests.api.websocket_client"
)

# What makes a test slow, by the fixtures it uses: a DynamoDB Local (a JVM), a headless Chromium,
# the federation gateway (Node processes). Tests that start processes of their own, or run
# hypothesis or the bench at length, are marked `slow` by hand.
DYNAMODB_LOCAL_FIXTURES = frozenset(
    {"ddblocal_endpoint", "ddblocal_backend", "ddblocal_config", "ddblocal_store"}
)
SLOW_FIXTURES = DYNAMODB_LOCAL_FIXTURES | {"chromium_executable", "federated_graph"}
BENCH_TESTS = Path(__file__).parent / "bench"
# The bench's smoke test proves the harness and the report's shape: it asserts no figure, so it
# needs no quiet machine, unlike the bench's other tests, which measure.
BENCH_SMOKE = BENCH_TESTS / "test_bench_smoke.py"
# The longest tests (20 s to 3 min each), started first so that none is left to the end of the
# run with the other workers idle; the bench's smoke test, the longest by far, first of all. Not
# the webhook deliveries' (up to 35 s): beside these, at the run's busiest, their 30 s waits
# ran out.
STARTED_FIRST = (
    BENCH_SMOKE,
    Path(__file__).parent / "api" / "test_state_machine.py",
    Path(__file__).parent / "api" / "test_hot_partitions.py",
    Path(__file__).parent / "security" / "test_fuzzing.py",
    Path(__file__).parent / "api" / "test_fleet.py",
)


LEAST_PRIVILEGE_REPORT = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    hypothesis_profiles.load()
    least_privilege.start(config)


def pytest_sessionfinish(session: pytest.Session) -> None:
    session.config.stash[LEAST_PRIVILEGE_REPORT] = least_privilege.finish(session)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    for line in config.stash.get(LEAST_PRIVILEGE_REPORT, []):
        terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Generator[None]:
    """The markers below, before the selection by marker; the longest tests first, after
    pytest-randomly's shuffle."""
    mark(items)
    yield
    workers = 1
    if getattr(config.option, "dist", "no") == "worksteal" and hasattr(config, "workerinput"):
        workers = int(config.workerinput["workercount"])
    items[:] = started_first(items, workers)


class Located(Protocol):
    @property
    def path(self) -> Path: ...


TestItem = TypeVar("TestItem", bound=Located)


def started_first(items: list[TestItem], workers: int) -> list[TestItem]:
    """`items` with the longest tests (`STARTED_FIRST`) at the head of the blocks that
    pytest-xdist's `worksteal` first hands its `workers` (the run cut in that many runs of
    consecutive tests, the first block to one worker, the next to another): the bench's smoke
    test heads the first block, the others take turns at the heads of the rest. Sorted to the
    front of one block, as before, they all ran one after the other on one worker, whose queue
    the others stole only the short tail of."""
    first = sorted(
        (item for item in items if item.path in STARTED_FIRST),
        key=lambda item: STARTED_FIRST.index(item.path),
    )
    rest = iter([item for item in items if item.path not in STARTED_FIRST])
    heads: list[list[TestItem]] = [[] for _ in range(workers)]
    for number, item in enumerate(first):
        after_the_smoke_test = 1 + (number - 1) % (workers - 1) if workers > 1 else 0
        heads[0 if item.path == BENCH_SMOKE else after_the_smoke_test].append(item)
    ordered: list[TestItem] = []
    remaining = len(items)
    for worker, head in enumerate(heads):
        size = remaining // (workers - worker)  # as worksteal cuts its first blocks
        remaining -= size
        ordered += head + [item for _, item in zip(range(size - len(head)), rest, strict=False)]
    return ordered + list(rest)


def mark(items: list[pytest.Item]) -> None:
    """Markers from the fixtures a test uses: `ddblocal` for a test on DynamoDB Local, `slow`
    for one on DynamoDB Local, Chromium or the gateway, or of the bench (`make test-fast` runs
    the rest); `quiet` for a race or a measurement of the bench. A race runs on DynamoDB Local
    only: moto's conditional writes are not atomic across its threads, so on moto both racers
    can win. A race test that could reach moto is refused."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec is not None else None
        if fixtures & DYNAMODB_LOCAL_FIXTURES or backend == "ddblocal":
            item.add_marker(pytest.mark.ddblocal)
        if (
            fixtures & SLOW_FIXTURES
            or item.get_closest_marker("ddblocal") is not None
            or item.path.is_relative_to(BENCH_TESTS)
        ):
            item.add_marker(pytest.mark.slow)
        if item.path.is_relative_to(BENCH_TESTS) and item.path != BENCH_SMOKE:
            item.add_marker(pytest.mark.quiet)
        if item.get_closest_marker("race") is None:
            continue
        on_moto = any(name.startswith("moto") for name in fixtures) or backend == "moto"
        if on_moto or "ddblocal_backend" not in fixtures:
            raise pytest.UsageError(f"{item.nodeid} is a race: give it a DynamoDB Local fixture")
        item.add_marker(pytest.mark.ddblocal)
        item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.quiet)


@pytest.fixture(scope="session", autouse=True)
def aws_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fake credentials for anything that builds its own client, and no real AWS profile."""
    empty = tmp_path_factory.mktemp("aws") / "none"
    with pytest.MonkeyPatch.context() as patch:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            patch.setenv(name, TEST_KEY)
        patch.setenv("AWS_DEFAULT_REGION", REGION)
        patch.setenv("AWS_CONFIG_FILE", str(empty))
        patch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
            patch.delenv(name, raising=False)
        yield


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    # werkzeug logs every request at INFO; the test output needs none of it.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with transactions_idempotent_by_token(), models_untracked():
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
        server.stop()


@pytest.fixture(scope="session")
def ddblocal_endpoint() -> Iterator[str]:
    from process.embedded_dynamodb import EmbeddedDynamoDB

    database = EmbeddedDynamoDB(data_dir=None)
    endpoint_url = database.start()
    yield endpoint_url
    database.stop()


@pytest.fixture(scope="session")
async def moto_backend(moto_endpoint: str) -> AsyncIterator[Backend]:
    async with open_client(backend_config(moto_endpoint, "")) as client:
        yield Backend("moto", moto_endpoint, client)


@pytest.fixture(scope="session")
async def ddblocal_backend(ddblocal_endpoint: str) -> AsyncIterator[Backend]:
    async with open_client(backend_config(ddblocal_endpoint, "")) as client:
        yield Backend("ddblocal", ddblocal_endpoint, client)


@pytest.fixture
async def moto_config(moto_backend: Backend) -> AsyncIterator[DynamoConfig]:
    """A DynamoConfig on moto whose table was made for this test alone."""
    table_name = await fresh_table(moto_backend)
    yield moto_backend.config(table_name)
    await moto_backend.client.delete_table(TableName=table_name)


@pytest.fixture
async def ddblocal_config(ddblocal_backend: Backend) -> AsyncIterator[DynamoConfig]:
    """A DynamoConfig on DynamoDB Local whose table was made for this test alone."""
    table_name = await fresh_table(ddblocal_backend)
    yield ddblocal_backend.config(table_name)
    await ddblocal_backend.client.delete_table(TableName=table_name)


@pytest.fixture
def moto_store(moto_backend: Backend, moto_config: DynamoConfig) -> PaymentStore:
    """A store on the API tests' table, in the layouts the service writes a new table in."""
    return PaymentStore(
        moto_backend.client,
        table_name=moto_config.table_name,
        cursor_secret=CURSOR_SECRET,
        **DEFAULT_LAYOUTS,
    )


@pytest.fixture
def ddblocal_store(ddblocal_backend: Backend, ddblocal_config: DynamoConfig) -> PaymentStore:
    return PaymentStore(
        ddblocal_backend.client,
        table_name=ddblocal_config.table_name,
        cursor_secret=CURSOR_SECRET,
        **DEFAULT_LAYOUTS,
    )


# The default settings' layouts, which the service records for a new table (`datasource.layouts`).
DEFAULT_LAYOUTS: dict[str, Any] = {
    "layout": StatusLayout(DEFAULT_GSI2_SHARDS),
    "feed": FeedLayout.of(DEFAULT_FEED_SHARDS),
}


@pytest.fixture(params=["moto", pytest.param("ddblocal", marks=pytest.mark.ddblocal)])
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each backend in turn: moto, then DynamoDB Local (which refuses what moto lets pass)."""
    found: Backend = request.getfixturevalue(f"{request.param}_backend")
    return found


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[PaymentStore]:
    """A store on a fresh table, on each backend."""
    table_name = await fresh_table(backend)
    yield PaymentStore(backend.client, table_name=table_name, cursor_secret=CURSOR_SECRET)
    await backend.client.delete_table(TableName=table_name)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A Redis server of the test's own (Debian's `redis-server`, nothing on disk)."""
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
