"""The fan-out of live events (`resolvers.event_hub`): filters, bounded queues, slow consumers."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

from domain.audit import Actor, ActorKind
from domain.history import PaymentEvent, event_of
from resolvers.event_hub import SLOW_CONSUMER_CODE, EventFilter, EventHub, Subscriber
from tests.payment_samples import sample_payment

ACTOR = Actor(ActorKind.SERVICE, "hub-tests")


def event(user_id: str = "alice", loan_id: str = "loan-1", version: int = 1) -> PaymentEvent:
    payment = dataclasses.replace(sample_payment(user_id=user_id, loan_id=loan_id), version=version)
    return event_of(None, payment, ACTOR)


async def test_a_subscriber_gets_the_events_its_filter_matches_in_order() -> None:
    hub = EventHub(queue_size=10)
    alices = hub.subscribe(EventFilter(user_id="alice"))
    loan_2 = hub.subscribe(EventFilter(user_id="alice", loan_id="loan-2"))
    everyone = hub.subscribe(EventFilter())
    published = [event("alice"), event("bob"), event("alice", "loan-2", 2)]
    for each in published:
        hub.publish(each)

    assert [await alices.next() for _ in range(2)] == [published[0], published[2]]
    assert await loan_2.next() == published[2]
    assert [await everyone.next() for _ in range(3)] == published


async def test_a_slow_subscriber_is_dropped_and_its_queue_stays_bounded() -> None:
    hub = EventHub(queue_size=3)
    closed: list[tuple[int, str]] = []

    async def close(code: int, reason: str) -> None:
        closed.append((code, reason))

    slow = hub.subscribe(EventFilter(), close)
    fast = hub.subscribe(EventFilter())
    for version in range(1, 1001):
        hub.publish(event(version=version))
        if version <= 3:
            await fast.next()
        while fast._queue.qsize():  # the fast one keeps up
            await fast.next()
        assert slow._queue.qsize() <= 3  # memory is bounded however far behind it falls

    await asyncio.sleep(0)  # the close runs as a task
    assert slow.dropped and not fast.dropped
    assert closed == [(SLOW_CONSUMER_CODE, closed[0][1])]
    assert "afterVersion" in closed[0][1]
    # What it had queued; then no end of its own (that would complete the operation before
    # the close, and the client would not resubscribe): the close ends it.
    assert [(await slow.next()) is None for _ in range(2)] == [False, False]
    ending = asyncio.create_task(slow.next())
    for _ in range(3):
        await asyncio.sleep(0)  # nothing outside the loop to wait for: it takes its end marker
    assert not ending.done()  # and waits on, for the close
    ending.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await ending


async def test_closing_the_hub_ends_every_subscription() -> None:
    hub = EventHub(queue_size=5)
    subscribers = [hub.subscribe(EventFilter()) for _ in range(3)]
    hub.close_all()
    assert [await subscriber.next() for subscriber in subscribers] == [None, None, None]


async def test_a_subscriber_at_the_stream_head_starts_after_a_round_begun_after_it() -> None:
    hub = EventHub(queue_size=10)
    hub.round_started()  # a round under way when it subscribes: what it reads came before
    head = hub.subscribe(EventFilter(), at_stream_head=True)
    now = hub.subscribe(EventFilter())
    hub.publish(event(version=1))
    hub.round_finished()
    hub.round_started()
    hub.publish(event(version=2))  # read by a round begun since: before it was accepted
    hub.round_finished()  # accepted
    hub.publish(event(version=3))
    hub.close_all()

    assert [e.version for e in await drained(now)] == [1, 2, 3]
    assert [e.version for e in await drained(head)] == [3]


async def test_a_round_that_stopped_short_of_the_head_accepts_no_one() -> None:
    hub = EventHub(queue_size=10)
    head = hub.subscribe(EventFilter(), at_stream_head=True)
    hub.round_started()
    hub.publish(event(version=1))  # a round that failed, or read a full page: not finished
    hub.round_started()
    hub.publish(event(version=2))
    hub.round_finished()
    hub.publish(event(version=3))
    hub.unsubscribe(head)
    hub.publish(event(version=4))
    hub.close_all()

    assert [e.version for e in await drained(head)] == [3]


async def drained(subscriber: Subscriber) -> list[PaymentEvent]:
    """The events queued, up to the end marker."""
    events = []
    while not subscriber._queue.empty():
        received = await subscriber.next()
        if received is None:
            break
        events.append(received)
    return events


async def test_the_subscriptions_are_counted_by_state_and_a_dropped_one_no_more() -> None:
    hub = EventHub(queue_size=1)
    hub.subscribe(EventFilter())  # the webhook dispatcher's: no subscription's
    replaying = hub.subscribe(EventFilter(user_id="alice"))
    hub.opened(replaying)
    head = hub.subscribe(EventFilter(loan_id="loan-9"), at_stream_head=True)
    hub.opened(head)
    hub.started(head)
    bobs = hub.subscribe(EventFilter(user_id="bob"))
    hub.opened(bobs)
    hub.started(bobs)
    hub.quiet += 1
    assert hub.subscriptions() == {"live": 1, "starting": 2, "quiet": 1}

    hub.round_started()
    hub.round_finished()  # the one at the head is accepted
    assert hub.subscriptions() == {"live": 2, "starting": 1, "quiet": 1}
    hub.publish(event("bob"))
    hub.publish(event("bob", version=2))  # a queue of one: bob's falls behind, dropped
    assert hub.subscriptions() == {"live": 1, "starting": 1, "quiet": 1}
    for subscriber in (replaying, head, bobs):
        hub.unsubscribe(subscriber)
    hub.quiet -= 1
    assert hub.subscriptions() == {"live": 0, "starting": 0, "quiet": 0}
