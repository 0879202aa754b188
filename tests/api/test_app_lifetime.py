"""An app that has stopped is freed, with everything it held: its schema, store, DynamoDB client
and metrics. A process that builds apps one after another (the test suite, an embedding job)
otherwise grows with each, and its collector's full passes grow with it: in one CI run they held
a request past a 10 s client timeout."""

from __future__ import annotations

import asyncio
import gc
import weakref

from datasource import DynamoConfig
from tests.api.conftest import PAYMENT_FIELDS, api_client
from tests.api.documents import LOAN_PAGE

PAYMENT = f"""query($userId: ID, $loanId: ID!, $paymentId: ID!) {{
  payment(userId: $userId, loanId: $loanId, paymentId: $paymentId) {{ {PAYMENT_FIELDS} }} }}"""


async def serve_and_stop(config: DynamoConfig) -> list[weakref.ref[object]]:
    """Weak references to what an app held while it served a payment and a page of them."""
    async with api_client(config) as api:
        created = await api.create(user="alice", loan="loan-1")
        await api.data(
            PAYMENT,
            {"userId": "alice", "loanId": "loan-1", "paymentId": created["paymentId"]},
        )
        page = await api.data(LOAN_PAGE, {"userId": "alice", "loanId": "loan-1"})
        assert page["loan"]["payments"]["edges"], page
        app = api.app
        held: list[object] = [app, app.state.store, app.state.store.client, app.state.metrics]
        return [weakref.ref(thing) for thing in held]


async def test_an_app_that_has_stopped_is_freed_with_all_it_held(
    moto_config: DynamoConfig,
) -> None:
    # In a task of its own, as uvicorn runs an app: what its calls leave in their task's
    # context goes with that task, once the loop has let go of it (the turn after it ends).
    held = await asyncio.create_task(serve_and_stop(moto_config))
    await asyncio.sleep(0)
    gc.collect()

    alive = [type(thing).__name__ for ref in held if (thing := ref()) is not None]
    assert not alive, f"still alive after the app stopped: {alive}"
