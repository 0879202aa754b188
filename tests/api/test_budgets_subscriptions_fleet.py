"""A caller's open subscriptions capped across a fleet (SPEC §21, turn 6): two `python -m cli
serve` on one DynamoDB Local table sharing Debian's redis-server count a customer's subscriptions
on both against one cap; one instance killed (SIGKILL, as a crash), its subscriptions stop
counting once their lease runs out (a short lease here), while the living instance's, renewed,
still count."""

from __future__ import annotations

import pytest
import redis

from datasource import KEY_PREFIX
from harness.processes import HOST
from harness.redis_server import RedisServer
from tests.api.conftest import token
from tests.api.live_instances import Instance
from tests.api.subscribers import Socket, opened
from tests.api.test_budgets_subscriptions import REPLAY, subscribed
from tests.backends import Backend, fresh_table
from tests.eventually import eventually
from tests.servers import serving

pytestmark = pytest.mark.ddblocal

CAP = 3
LEASE = 1.0  # seconds; the default is 15


def refused(socket: Socket, operation: str) -> bool:
    return socket.kinds(operation) == ["error"]


async def test_the_cap_counts_every_instance_and_a_dead_instances_count_expires(
    ddblocal_backend: Backend, redis_server: RedisServer
) -> None:
    table_name = await fresh_table(ddblocal_backend)
    customer = token("fay")
    async with serving(
        ddblocal_backend.endpoint_url,
        table_name,
        2,
        live_broker_url=redis_server.redis_url,
        budget_customer_max_subscriptions=str(CAP),
        budget_subscription_lease_seconds=str(LEASE),
    ) as (a, b):
        created = {"userId": "fay", "loanId": "loan-f", "amountCents": 4200, "method": "PINLESS"}
        payment = await Instance(a.url).mutate("createPayment", created)
        replay = {"l": payment["loanId"], "p": payment["paymentId"]}
        async with opened(a.ws_url, customer) as on_a, opened(b.ws_url, customer) as on_b:
            for socket in (on_a, on_a, on_b):
                await subscribed(socket, REPLAY, replay)
            for socket in (on_a, on_b):
                over = await socket.subscribe(REPLAY, replay)
                assert await socket.answered(over) == "error", socket.messages
                assert socket.error_code(over) == "TOO_MANY_SUBSCRIPTIONS", socket.messages

            a.kill()
            killed = redis_time(redis_server)
            # A's two stop counting within its lease: B takes their slots.
            for _ in range(2):
                await subscribed(on_b, REPLAY, replay)
            # B's own, renewed past what A's lease could have reached, still count.
            await eventually(
                lambda: min(scores(redis_server).values(), default=0.0) > killed + 2 * LEASE,
                what=lambda: f"renewed past {killed + 2 * LEASE}: {scores(redis_server)}",
            )
            assert len(scores(redis_server)) == CAP
            over = await on_b.subscribe(REPLAY, replay)
            assert await on_b.answered(over) == "error", on_b.messages
            assert on_b.error_code(over) == "TOO_MANY_SUBSCRIPTIONS", on_b.messages
    await ddblocal_backend.client.delete_table(TableName=table_name)


def redis_time(server: RedisServer) -> float:
    """The broker's clock, in seconds (the leases are counted on it)."""
    with client_of(server) as client:
        seconds, microseconds = client.time()
    return int(seconds) + int(microseconds) / 1e6


def scores(server: RedisServer) -> dict[str, float]:
    """The customer's slots in the broker: each one's lease's end, in seconds."""
    with client_of(server) as client:
        held = client.zrange(f"{KEY_PREFIX}customer:fay", 0, -1, withscores=True)
    return {member.decode(): score / 1000 for member, score in held}


def client_of(server: RedisServer) -> redis.Redis:
    return redis.Redis(host=HOST, port=server.port, socket_timeout=5)
