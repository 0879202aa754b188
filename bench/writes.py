"""What payment history costs a write: capacity units and latency, before and after, side by side.

    python -m bench.writes [--rounds N]

On DynamoDB Local (started here, in memory). "Before" is the write path as it was without history,
rebuilt from the same pieces: a creation is one conditional `PutItem`, a move one conditional
`UpdateItem` (the same update expression, `ReturnValues=ALL_NEW`). "After" is the store as it is:
each write a `TransactWriteItems` of the payment and its event (plus the confirmation id's claim
when a move takes one, as before). Capacity comes from DynamoDB's own `ConsumedCapacity` (asked for
on every call by a botocore hook, so the store's real calls are measured), as DynamoDB Local
reports it: it agrees with AWS's rule (a transactional write costs two units per item per KB) for
two-item transactions, but reports a three-item one (a presentment: payment, event, claim) at the
units of two on the table. Latency is one writer at a time, the two paths interleaved round by
round, so that both see the same machine; the ratio is the figure to read, not the milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from datasource.client import open_client
from datasource.config import DynamoConfig
from datasource.confirmation_claims import claim_update
from datasource.items import to_item
from datasource.store import PaymentStore
from datasource.table import PK, create_table_if_missing
from datasource.writes import _move_update
from domain.audit import Actor, ActorKind
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.history import event_of
from domain.payment import Payment, new_payment
from domain.transitions import TransitionRequest, apply_transition
from server.embedded_dynamodb import EmbeddedDynamoDB
from server.settings import LOCAL_AWS_CREDENTIALS

ACTOR = Actor(ActorKind.SERVICE, "bench", "bench-request")
MAX_ATTEMPTS = 3


class CapacityMeter:
    """Adds up the capacity every call consumed (the store's client asks for it on every call:
    `datasource.accounting`)."""

    def __init__(self, store: PaymentStore) -> None:
        self._units = 0.0
        store.client.meta.events.register("after-call.dynamodb.*", self._add)

    def _add(self, parsed: dict[str, Any], **_: Any) -> None:
        consumed = parsed.get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        self._units += sum(float(entry.get("CapacityUnits", 0)) for entry in entries)

    def take(self) -> float:
        """The units counted since the last take."""
        units, self._units = self._units, 0.0
        return units


def _payment(number: int) -> Payment:
    return new_payment(
        user_id=f"bench-{number % 50}",
        loan_id="loan-1",
        amount_cents=12_500,
        method=PaymentMethod.ACH,
        process=PaymentProcess.AUTO,
        reason="bench",
        now=datetime.now(UTC),
        account_last_four="6789",
        intended_installment_id="inst-1",
    )


async def _create_before(store: PaymentStore, payment: Payment) -> None:
    await store.client.put_item(
        TableName=store.table_name,
        Item=to_item(payment),
        ConditionExpression=f"attribute_not_exists({PK})",
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )


async def _create_after(store: PaymentStore, payment: Payment) -> None:
    await store.create(payment, event=event_of(None, payment, ACTOR))


async def _move_before(store: PaymentStore, current: Payment, updated: Payment) -> None:
    move = _move_update(store.table_name, current, updated, store.layout)
    if updated.confirmation_id is None:
        await store.client.update_item(**move, ReturnValues="ALL_NEW")
        return
    claim = claim_update(store.table_name, updated, confirmation_id=updated.confirmation_id)
    await store.client.transact_write_items(TransactItems=[{"Update": move}, {"Update": claim}])


async def _move_after(store: PaymentStore, current: Payment, updated: Payment) -> None:
    await store.transition(current, updated, event=event_of(current, updated, ACTOR))


class _Path(NamedTuple):
    create: Callable[[PaymentStore, Payment], Awaitable[None]]
    move: Callable[[PaymentStore, Payment, Payment], Awaitable[None]]


PATHS = {"before": _Path(_create_before, _move_before), "after": _Path(_create_after, _move_after)}
# A move without a claim, and a presentment, which claims its confirmation id.
MOVES = {
    "skip": TransitionRequest(target=PaymentStatus.SKIPPED, reason="bench skip"),
    "submit": TransitionRequest(
        target=PaymentStatus.ACHSENT, reason="bench submit", confirmation_id="conf"
    ),
}


async def measure(store: PaymentStore, rounds: int) -> dict[str, Any]:
    meter = CapacityMeter(store)
    milliseconds: dict[str, list[float]] = {}
    units: dict[str, float] = {}
    with_history: Payment | None = None

    async def timed(name: str, write: Awaitable[None]) -> None:
        meter.take()
        started = time.perf_counter()
        await write
        milliseconds.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        units[name] = meter.take()

    for number in range(rounds):
        # Alternate which path goes first, so that neither always follows the other.
        order = ["before", "after"] if number % 2 == 0 else ["after", "before"]
        for path_name in order:
            path = PATHS[path_name]
            for move_name, request in MOVES.items():
                payment = _payment(number)
                await timed(f"create {path_name}", path.create(store, payment))
                if request.confirmation_id is not None:
                    request = dataclasses.replace(
                        request, confirmation_id=f"conf-{path_name}-{move_name}-{number}"
                    )
                updated = apply_transition(
                    payment, request, max_attempts=MAX_ATTEMPTS, now=datetime.now(UTC)
                )
                await timed(f"{move_name} {path_name}", path.move(store, payment, updated))
                if path_name == "after":
                    with_history = updated
    # The history of a payment the service wrote: its creation and its move.
    assert with_history is not None
    meter.take()
    await store.history(with_history.ref, first=20, after=None)
    units["history (2 events)"] = meter.take()
    medians = {name: statistics.median(values) for name, values in milliseconds.items()}
    return {
        "rounds": rounds,
        "capacity_units": units,
        "p50_ms": {name: round(value, 2) for name, value in medians.items()},
        "after_over_before": {
            operation: round(medians[f"{operation} after"] / medians[f"{operation} before"], 2)
            for operation in ("create", *MOVES)
        },
    }


async def _main(rounds: int) -> dict[str, Any]:
    with EmbeddedDynamoDB(data_dir=None) as database:
        config = DynamoConfig(
            table_name="bench-writes",
            region="us-west-2",
            endpoint_url=database.endpoint_url,
            aws_access_key_id=LOCAL_AWS_CREDENTIALS["aws_access_key_id"],
            aws_secret_access_key=LOCAL_AWS_CREDENTIALS["aws_secret_access_key"],
        )
        async with open_client(config) as client:
            await create_table_if_missing(client, config.table_name)
            store = PaymentStore(client, table_name=config.table_name, cursor_secret=b"bench")
            return await measure(store, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    arguments = parser.parse_args()
    print(json.dumps(asyncio.run(_main(arguments.rounds)), indent=2))


if __name__ == "__main__":
    main()
