"""One endpoint's window (`server.webhook_worker.window`) on a real table, its clock, its writes and
its reads of the retries held by the test: a retry the window schedules is sent when due, whatever
the window read of the stored retries while that retry's record was being written (a read before the
record lands, or one under way as it lands, once left the window with no retry to look for, and the
retry was never sent), and a retry done while a read is under way is not sent again."""

from __future__ import annotations

import asyncio
import logging
import random
import re
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from datasource import Commit, DueRetry, EndpointState, PaymentStore, WrittenPlainly
from domain.webhooks import EndpointStatus, RetrySchedule, WebhookEndpoint
from server.webhook_worker.delivery import Answer
from server.webhook_worker.window import EndpointWindow

OWNER = "test-instance"
BODY = orjson.dumps({"type": "webhook.endpoint.disabled", "data": {}}).decode()


class FailingFirst:
    """A receiver answering 500 to the first attempt of `failing` and 204 to everything else."""

    def __init__(self, failing: str) -> None:
        self.failing = failing
        self.attempts: Counter[str] = Counter()

    async def post(self, url: str, *, body: bytes, headers: dict[str, str]) -> Answer:
        identifier = headers["webhook-id"]
        self.attempts[identifier] += 1
        first = self.attempts[identifier] == 1
        return Answer(500 if first and identifier == self.failing else 204, None, None, 1)


async def until(check: Callable[[], bool], what: str, seconds: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"not within {seconds} s: {what}"
        await asyncio.sleep(0.01)


START = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
# B falls due while A's failed first attempt is being stored; A's retry is due 0.4-0.6 s after.
B_DUE = START + timedelta(seconds=0.3)
PAST_A_RETRY = START + timedelta(seconds=1)


class Window:
    """A window over retries A (due at START, failing once) and B (due at B_DUE), its clock
    at START until the test moves it."""

    def __init__(self, store: PaymentStore, state: EndpointState) -> None:
        self.now = START
        self.endpoint_id = state.endpoint.endpoint_id
        self.receiver = FailingFirst("evt_a")

        async def no_disabling(*_: object) -> None:
            raise AssertionError("not disabled")

        async def leased() -> bool:
            return True

        self.window = EndpointWindow(
            state,
            store=store,
            receivers=self.receiver,
            schedule=RetrySchedule((0.5,) * 12),
            max_in_flight=4,
            clock=lambda: self.now,
            owner=OWNER,
            lease=leased,
            on_disabled=no_disabling,
            rng=random.Random(0),
            observe=lambda outcome: None,
        )

    def attempts(self, event: str, count: int) -> Callable[[], bool]:
        return lambda: self.receiver.attempts[event] == count

    async def stored(self, store: PaymentStore, event: str) -> list[tuple[int, int | None]]:
        """The attempts of `event` stored, in order: (attempt, status code)."""
        page = await store.webhooks.deliveries(self.endpoint_id, first=100, after=None)
        found = [edge.node for edge in page.edges if edge.node.event_id == event]
        return sorted((delivery.attempt, delivery.status_code) for delivery in found)


async def window_over_two_retries(store: PaymentStore) -> Window:
    webhooks = store.webhooks
    endpoint = WebhookEndpoint(
        endpoint_id=str(uuid.uuid4()),
        url="https://receiver.example/hook",
        event_types=None,
        description=None,
        status=EndpointStatus.ENABLED,
        created_at=START,
    )
    await webhooks.create(endpoint, secret="whsec_" + "a" * 32)
    assert await webhooks.take_lease(endpoint.endpoint_id, owner=OWNER, now_ms=1, until_ms=2**62)
    await webhooks.schedule(endpoint.endpoint_id, event_id="evt_a", due=START, attempt=1, body=BODY)
    await webhooks.schedule(endpoint.endpoint_id, event_id="evt_b", due=B_DUE, attempt=1, body=BODY)
    state = await webhooks.endpoint(endpoint.endpoint_id)
    assert state is not None
    return Window(store, state)


async def test_a_retry_whose_record_lands_after_a_read_of_the_retries_is_sent(
    moto_store: PaymentStore,
) -> None:
    webhooks = moto_store.webhooks
    # The first batch (A's failure and its retry) is held until B's retry has been read.
    writing, written = asyncio.Event(), asyncio.Event()
    write_plainly = webhooks.write_plainly

    async def held_write(endpoint_id: str, writes: WrittenPlainly) -> None:
        writing.set()
        await written.wait()
        await write_plainly(endpoint_id, writes)

    webhooks.write_plainly = held_write  # type: ignore[method-assign]
    made = await window_over_two_retries(moto_store)
    running = asyncio.create_task(made.window.run())
    try:
        await until(made.attempts("evt_a", 1), "A's first attempt")
        await asyncio.wait_for(writing.wait(), 5)
        made.now = B_DUE
        await until(made.attempts("evt_b", 1), "B sent while A's batch is written")
        written.set()
        made.now = PAST_A_RETRY
        await until(made.attempts("evt_a", 2), "A's retry sent")
        assert not made.window.stopped
    finally:
        made.window.stop()
        written.set()
        await asyncio.wait_for(running, 5)


async def test_a_retry_whose_record_lands_during_a_read_of_the_retries_is_sent(
    moto_store: PaymentStore,
) -> None:
    webhooks = moto_store.webhooks
    # B's read of the retries is made before A's batch lands and answers after it is stored.
    read, stored = asyncio.Event(), asyncio.Event()
    reads = 0
    retries, write_plainly = webhooks.retries, webhooks.write_plainly
    store_commit = webhooks.commit

    async def slow_read(endpoint_id: str, *, limit: int) -> list[DueRetry]:
        nonlocal reads
        reads += 1
        found = await retries(endpoint_id, limit=limit)
        if reads == 2:
            read.set()
            await stored.wait()
        return found

    async def held_write(endpoint_id: str, writes: WrittenPlainly) -> None:
        await read.wait()
        await write_plainly(endpoint_id, writes)

    async def committed(endpoint_id: str, *, owner: str, feed_from: str, commit: Commit) -> bool:
        done = await store_commit(endpoint_id, owner=owner, feed_from=feed_from, commit=commit)
        stored.set()
        return done

    webhooks.retries = slow_read  # type: ignore[method-assign]
    webhooks.write_plainly = held_write  # type: ignore[method-assign]
    webhooks.commit = committed  # type: ignore[method-assign]
    made = await window_over_two_retries(moto_store)
    running = asyncio.create_task(made.window.run())
    try:
        await until(made.attempts("evt_a", 1), "A's first attempt")
        made.now = B_DUE
        await until(made.attempts("evt_b", 1), "B sent")
        made.now = PAST_A_RETRY
        await until(made.attempts("evt_a", 2), "A's retry sent")
        # A's record, deleted while the read was under way, was not taken for a retry due.
        for _ in range(500):
            attempts = await made.stored(moto_store, "evt_a")
            if len(attempts) >= 2:
                break
            await asyncio.sleep(0.01)
        assert attempts == [(1, 500), (2, 204)]
        assert not made.window.stopped
    finally:
        made.window.stop()
        read.set()
        stored.set()
        await asyncio.wait_for(running, 5)


async def test_a_failed_attempt_is_logged_at_info_with_its_retry(
    moto_store: PaymentStore, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/events.md: a failed attempt at INFO; a given-up event or a paused endpoint at
    WARNING (none here: the attempt is retried, and delivered)."""
    made = await window_over_two_retries(moto_store)
    running = asyncio.create_task(made.window.run())
    try:
        with caplog.at_level(logging.INFO, logger="loc_payments.webhooks"):
            await until(made.attempts("evt_a", 1), "A's first attempt")
            await until(lambda: bool(caplog.records), "A's failure logged")
            made.now = PAST_A_RETRY
            await until(made.attempts("evt_a", 2), "A's retry sent")
    finally:
        made.window.stop()
        await asyncio.wait_for(running, 5)
    [failed] = [r for r in caplog.records if r.name == "loc_payments.webhooks"]
    assert failed.levelno == logging.INFO
    # The schedule's 0.5 s, jittered.
    assert re.fullmatch(
        f"webhook event evt_a to endpoint {made.endpoint_id} failed "
        r"\(attempt 1: HTTP 500\); retried in 0\.[4-6] s",
        failed.getMessage(),
    ), failed.getMessage()
