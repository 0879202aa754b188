"""A fleet's live updates (SPEC §17): instances of `python -m cli serve` on one DynamoDB Local
table with a Redis broker (Debian's `redis-server`): one instance reads the stream under a lease,
every instance gets every event once and in order, GetRecords stays within DynamoDB's five a
second per shard whatever the number of instances, and losing the reader or the broker loses
nothing a client cannot replay: a gap closes subscriptions with 4413, never a silent hole."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from harness.proxy import proxy_to
from harness.redis_server import RedisServer
from resolvers.event_hub import FEED_GAP_REASON, SLOW_CONSUMER_CODE
from tests.api.conftest import SERVICE
from tests.api.fleet import (
    GET_RECORDS,
    LEASE_SECONDS,
    WAIT,
    Fleet,
    Watcher,
    fleet,
    watching,
)
from tests.api.graphql_ws_client import live_client
from tests.api.live_instances import Instance
from tests.backends import Backend
from tests.eventually import eventually

pytestmark = pytest.mark.ddblocal

CREATE = {"loanId": "loan-1", "amountCents": 4200, "method": "PINLESS"}


@pytest.fixture
def broker(redis_server: RedisServer) -> RedisServer:
    return redis_server


def ids(payment: dict[str, Any]) -> dict[str, Any]:
    return {key: payment[key] for key in ("userId", "loanId", "paymentId")}


async def write_history(
    instances: list[Instance], user: str, payments: int, moves: int
) -> dict[str, int]:
    """`payments` payments of `user`, each created then declined `moves` times, every write
    through the next instance in turn; each payment's last version, by id."""
    turn = 0

    def next_instance() -> Instance:
        nonlocal turn
        turn += 1
        return instances[turn % len(instances)]

    created = [
        await next_instance().mutate("createPayment", {"userId": user, **CREATE})
        for _ in range(payments)
    ]
    for move in range(moves):
        for payment in created:
            await next_instance().mutate(
                "schedulePaymentRetry", {**ids(payment), "reason": f"declined {move}"}
            )
    return {payment["paymentId"]: 1 + moves for payment in created}


async def nothing_else_arrives(
    instance: Instance, user: str, watchers: tuple[Watcher, ...]
) -> dict[str, int]:
    """A payment of `user` written now, once each of `watchers` got it: anything else (a
    repeat) would have come before it. Its id and version, as `write_history` gives them."""
    sentinel = await instance.mutate("createPayment", {"userId": user, **CREATE})
    for watcher in watchers:
        await watcher.wait_for_version(sentinel["paymentId"], 1)
    return {sentinel["paymentId"]: 1}


def assert_every_version_once_in_order(watcher: Watcher, last: dict[str, int]) -> None:
    for payment_id, version in last.items():
        assert watcher.versions(payment_id) == list(range(1, version + 1)), payment_id
    assert len(watcher.events) == sum(last.values())


async def test_every_instance_gets_every_event_once_in_order_from_one_stream_reader(
    ddblocal_backend: Backend, broker: RedisServer
) -> None:
    async with fleet(ddblocal_backend, 4, broker.redis_url) as running:
        await running.wait_for_reader()
        async with (
            watching(running.instances[0], u="alice") as first,
            watching(running.instances[1], u="alice") as second,
            watching(running.instances[2], u="alice") as third,
            watching(running.instances[3], u="alice") as fourth,
        ):
            calls_before, started = running.dynamodb.calls[GET_RECORDS], time.monotonic()
            last = await write_history(running.instances, "alice", payments=3, moves=3)
            for watcher in (first, second, third, fourth):
                await watcher.wait_for(sum(last.values()))
            last |= await nothing_else_arrives(
                running.instances[0], "alice", (first, second, third, fourth)
            )
            rate = (running.dynamodb.calls[GET_RECORDS] - calls_before) / (
                time.monotonic() - started
            )
            readers = await running.readers()

    print(f"\nfour instances through the broker: {rate:.2f} GetRecords a second on the shard")
    for watcher in (first, second, third, fourth):
        assert_every_version_once_in_order(watcher, last)
    assert len(readers) == 1, readers
    # One table, one shard on DynamoDB Local: at most five a second, as DynamoDB allows.
    assert rate <= 5.0, f"{rate:.1f} GetRecords a second"


async def test_without_a_broker_each_instance_reads_the_stream(
    ddblocal_backend: Backend,
) -> None:
    """The control of the count above: the same fleet without a broker polls the shard once
    per instance, past what DynamoDB allows."""
    async with fleet(ddblocal_backend, 4, None) as running:
        before, started = running.dynamodb.calls[GET_RECORDS], time.monotonic()
        # Enough calls to tell one reader's five a second from four readers' sixteen.
        await eventually(
            lambda: running.dynamodb.calls[GET_RECORDS] - before >= 24, what="24 GetRecords"
        )
        rate = (running.dynamodb.calls[GET_RECORDS] - before) / (time.monotonic() - started)
        readers = await running.readers()

    print(f"\nfour instances without a broker: {rate:.2f} GetRecords a second on the shard")
    assert readers == [0, 1, 2, 3]
    assert rate > 5.0, f"{rate:.1f} GetRecords a second"


async def test_a_killed_reader_is_replaced_within_the_lease_losing_and_repeating_nothing(
    ddblocal_backend: Backend, broker: RedisServer
) -> None:
    async with fleet(ddblocal_backend, 3, broker.redis_url) as running:
        reader = await running.wait_for_reader()
        others = [n for n in range(3) if n != reader]
        writers = [running.instances[n] for n in others]
        async with (
            watching(running.instances[others[0]], u="bob") as first,
            watching(running.instances[others[1]], u="bob") as second,
        ):
            before = await write_history(writers, "bob", payments=2, moves=1)
            await first.wait_for(sum(before.values()))
            running.services[reader].kill()
            killed = time.monotonic()
            # Writes go on while no one reads: they are read by the next holder.
            during = await write_history(writers, "bob", payments=2, moves=2)
            await running.wait_for_reader(among=others)
            takeover = time.monotonic() - killed
            last = before | during
            for watcher in (first, second):
                await watcher.wait_for(sum(last.values()))
            last |= await nothing_else_arrives(writers[0], "bob", (first, second))

    print(f"\nanother instance reads the stream {takeover:.1f} s after the reader's SIGKILL")
    for watcher in (first, second):
        assert_every_version_once_in_order(watcher, last)
        assert watcher.closed is None
    # The lease's time, and a renewal period or two of the survivors' tries.
    assert takeover < 2 * float(LEASE_SECONDS), f"took over after {takeover:.1f} s"


async def test_a_broker_restart_closes_subscriptions_with_4413_and_replay_loses_nothing(
    ddblocal_backend: Backend, broker: RedisServer
) -> None:
    async with fleet(ddblocal_backend, 3, broker.redis_url) as running:
        await running.wait_for_reader()
        payment = await running.instances[0].mutate("createPayment", {"userId": "carol", **CREATE})
        where = {"u": "carol", "l": "loan-1", "p": payment["paymentId"]}
        async with watching(running.instances[1], after=0, **where) as watcher:
            await watcher.wait_for(1)
            broker.kill()
            await wait_until(running, lambda state: state == "unavailable")
            # Reads and writes go on without the broker.
            for move in range(3):
                await running.instances[2].mutate(
                    "schedulePaymentRetry", {**ids(payment), "reason": f"declined {move}"}
                )
            broker.start()
            code, reason = await watcher.wait_closed()
        await wait_until(running, lambda state: state == "ok")
        last_seen = watcher.versions()[-1]
        async with watching(running.instances[1], after=last_seen, **where) as again:
            await again.wait_for(4 - last_seen)
            await running.instances[0].mutate(
                "schedulePaymentRetry", {**ids(payment), "reason": "declined again"}
            )
            await again.wait_for(5 - last_seen)

    assert (code, reason) == (SLOW_CONSUMER_CODE, FEED_GAP_REASON)
    assert not watcher.completed  # a client told the stream ended would not resubscribe
    assert watcher.versions() + again.versions() == [1, 2, 3, 4, 5]


async def test_graphql_ws_resubscribes_after_a_broker_restart_and_misses_nothing(
    ddblocal_backend: Backend, broker: RedisServer
) -> None:
    """What an app sees across the 4413 close: graphql-ws retries, sends its subscriptions
    again, and gets what was written meanwhile (from its last afterVersion) and after."""
    async with fleet(ddblocal_backend, 2, broker.redis_url) as running:
        await running.wait_for_reader()
        writer, served = running.instances
        payment = await writer.mutate("createPayment", {"userId": "frank", **CREATE})
        where = {"userId": "frank", "loanId": "loan-1", "paymentId": payment["paymentId"]}

        async def move(version: int) -> None:
            await writer.mutate("schedulePaymentRetry", {**ids(payment), "reason": f"to {version}"})

        async with live_client(
            served, user={"userId": "frank"}, payment={**where, "afterVersion": 0}
        ) as client:
            await move(2)
            await client.wait_for_versions("user", {2})
            await client.wait_for_versions("payment", {1, 2})
            broker.kill()
            await wait_until(running, lambda state: state == "unavailable")
            for version in (3, 4):
                await move(version)
            broker.start()
            await client.wait_resubscribed(0)
            await wait_until(running, lambda state: state == "ok")
            for version in (5, 6):
                await move(version)
            await client.wait_for_versions("user", {5, 6})
            await client.wait_for_versions("payment", {1, 2, 3, 4, 5, 6})

    assert (SLOW_CONSUMER_CODE, FEED_GAP_REASON) in client.closes
    assert client.completed == []
    assert set(client.versions("payment")) == {1, 2, 3, 4, 5, 6}


async def test_a_promoted_replica_takes_over_as_a_failover_does(
    ddblocal_backend: Backend, broker: RedisServer
) -> None:
    replica = RedisServer(replica_of=broker)
    replica.start()
    try:
        async with proxy_to(broker.redis_url.replace("redis://", "http://")) as endpoint:
            primary_url = endpoint.url.replace("http://", "redis://")
            async with fleet(ddblocal_backend, 3, primary_url) as running:
                await running.wait_for_reader()
                payment = await running.instances[0].mutate(
                    "createPayment", {"userId": "dave", **CREATE}
                )
                where = {"u": "dave", "l": "loan-1", "p": payment["paymentId"]}
                async with (
                    watching(running.instances[1], after=0, **where) as watcher,
                    watching(running.instances[2], u="dave") as user_wide,
                ):
                    await watcher.wait_for(1)
                    broker.kill()
                    replica.command("REPLICAOF", "NO", "ONE")
                    endpoint.retarget(replica.redis_url.replace("redis://", "http://"))
                    for move in range(2):
                        await running.instances[0].mutate(
                            "schedulePaymentRetry", {**ids(payment), "reason": f"declined {move}"}
                        )
                    await wait_until(running, lambda state: state == "ok")
                    # Either the replica had everything and the events go on, or its tail was
                    # lost and the subscription is closed: never a hole.
                    await watcher.wait(
                        lambda: watcher.versions()[-1:] == [3] or watcher.closed is not None,
                        "waiting for version 3 or a close",
                    )
                    versions = watcher.versions()
                    if watcher.closed is not None:
                        assert watcher.closed[0] == SLOW_CONSUMER_CODE
                        async with watching(
                            running.instances[1], after=versions[-1], **where
                        ) as again:
                            await again.wait_for(3 - versions[-1])
                        versions += again.versions()
                    # The other instance's subscriber may be a moment behind: its last move, or
                    # its close, before the subscriptions end.
                    await user_wide.wait(
                        lambda: user_wide.versions()[-1:] == [3] or user_wide.closed is not None,
                        "the user's subscription: version 3 or a close",
                    )
    finally:
        replica.stop()

    assert versions == [1, 2, 3]
    # The user's subscription (from after the creation, no replay): the moves without a hole,
    # and closed if cut short.
    got = user_wide.versions()
    assert got == list(range(2, 2 + len(got))), got
    assert got == [2, 3] or user_wide.closed == (SLOW_CONSUMER_CODE, FEED_GAP_REASON)


async def test_a_services_subscription_to_every_user_starts_from_now_through_the_broker(
    ddblocal_backend: Backend, broker: RedisServer
) -> None:
    """SPEC §10 across instances: none of what was stored before the subscription, then every
    version, whichever instance wrote it."""
    async with fleet(ddblocal_backend, 2, broker.redis_url, stream_poll_interval="1.0") as running:
        await running.wait_for_reader()
        server, other = running.instances
        created = await server.mutate("createPayment", {"userId": "erin", **CREATE})
        async with watching(other, SERVICE) as watcher:
            written = 1
            deadline = time.monotonic() + WAIT
            while len(watcher.events) < 2:
                assert time.monotonic() < deadline, watcher.events
                await server.mutate(
                    "schedulePaymentRetry", {**ids(created), "reason": f"declined {written}"}
                )
                written += 1
                await asyncio.sleep(0.2)
            await watcher.wait_for(written - watcher.events[0]["version"] + 1)
            # Nothing else arrives: a move written now comes after anything else would.
            await server.mutate("schedulePaymentRetry", {**ids(created), "reason": "sentinel"})
            written += 1
            await watcher.wait_for_version(created["paymentId"], written)

    versions = watcher.versions()
    assert versions[0] > 1  # not the creation, stored before
    assert versions == list(range(versions[0], written + 1))


async def wait_until(running: Fleet, accepts: Any) -> None:
    """Until every instance's `/readyz` says its live updates are in a state `accepts`."""
    deadline = time.monotonic() + WAIT
    while True:
        states = [ready["liveUpdates"] for ready in await running.readiness() if ready]
        if all(accepts(state) for state in states):
            return
        assert time.monotonic() < deadline, states
        await asyncio.sleep(0.1)
