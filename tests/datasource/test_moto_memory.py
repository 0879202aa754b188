"""moto, as the tests run it, frees a table once it is deleted, with the copies its transactions
took (`tests/moto_memory.py`): the test process does not grow with every table a test made; and
the transaction tokens that `tests/moto_idempotency.py` remembers are forgotten after their
lifetime."""

from __future__ import annotations

import asyncio
import gc
import uuid
from types import SimpleNamespace
from typing import Any, cast

from moto.core.responses import ActionResult
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler

from datasource import PaymentStore
from datasource.table import create_table_if_missing
from domain.enums import PaymentMethod, PaymentStatus
from domain.transitions import RULES, apply_transition
from tests.backends import CURSOR_SECRET, Backend
from tests.moto_idempotency import TOKEN_LIFETIME_SECONDS, idempotent
from tests.payment_samples import LATER, payment_in, request_for, stored_move, stored_new

S = PaymentStatus
PRESENTMENT = next(rule for rule in RULES if (rule.source, rule.target) == (S.PENDING, S.ACHSENT))


def tables_named(name: str) -> int:
    gc.collect()
    return sum(1 for thing in gc.get_objects() if isinstance(thing, Table) and thing.name == name)


async def test_a_deleted_table_and_its_transactions_copies_are_freed(
    moto_backend: Backend,
) -> None:
    table_name = f"test-{uuid.uuid4().hex}"
    await create_table_if_missing(moto_backend.client, table_name, stream=False)
    store = PaymentStore(moto_backend.client, table_name=table_name, cursor_secret=CURSOR_SECRET)
    for number in range(3):
        # Each creation and move is a TransactWriteItems, for which moto copies the table.
        current = await stored_new(store, payment_in(S.PENDING, PaymentMethod.ACH))
        move = request_for(PRESENTMENT, confirmation_id=f"ach-{number}")
        updated = apply_transition(current, move, max_attempts=3, now=LATER)
        await stored_move(store, current, updated)
    assert tables_named(table_name) >= 1  # the live table, as moto holds it

    await moto_backend.client.delete_table(TableName=table_name)

    # moto's server thread may still be finishing the answer that named the deleted table.
    for _ in range(50):
        if tables_named(table_name) == 0:
            break
        await asyncio.sleep(0.05)
    assert tables_named(table_name) == 0


class Transactions:
    """moto's handler as the patch wraps it: counts the transactions it carries out."""

    def __init__(self) -> None:
        self.carried_out = 0

    def __call__(self, handler: Any) -> ActionResult:
        self.carried_out += 1
        return ActionResult({})


def test_a_token_is_remembered_for_its_lifetime_and_then_forgotten() -> None:
    now = [1000.0]
    transactions = Transactions()
    handler = idempotent(transactions, clock=lambda: now[0])
    items = [{"Put": {"TableName": "t", "Item": {"PK": {"S": "a"}}}}]

    def send(token: str) -> None:
        request = SimpleNamespace(body={"ClientRequestToken": token, "TransactItems": items})
        handler(cast(DynamoHandler, request))

    send("first")
    now[0] += TOKEN_LIFETIME_SECONDS - 1
    send("first")  # a repeat within the lifetime: answered, not carried out
    send("second")
    assert transactions.carried_out == 2
    now[0] += 2
    send("first")  # past its lifetime: a new transaction, as on DynamoDB
    send("second")  # still within its own
    assert transactions.carried_out == 3
