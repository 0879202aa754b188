"""Which reads are strongly consistent (SPEC §11): queries read eventually consistent by default;
the read that decides a write, and every read after a write in the same request, read strongly;
`LOC_STRONG_READS` makes every read strong. Seen in the requests the store's client sends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from datasource import DynamoConfig
from tests.api.conftest import ALICE, Api, api_client

HOOK_ID = "tests-read-consistency"
READS = {"GetItem", "BatchGetItem", "Query"}


@contextmanager
def reads_sent(api: Api) -> Iterator[list[tuple[str, bool]]]:
    """(operation, ConsistentRead) of every read the app's client sends inside the block."""
    sent: list[tuple[str, bool]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name not in READS:
            return
        if model.name == "BatchGetItem":
            for request in params["RequestItems"].values():
                sent.append((model.name, bool(request.get("ConsistentRead", False))))
        else:
            sent.append((model.name, bool(params.get("ConsistentRead", False))))

    events = api.app.state.store.client.meta.events
    events.register("before-parameter-build.dynamodb", record, unique_id=HOOK_ID)
    try:
        yield sent
    finally:
        events.unregister("before-parameter-build.dynamodb", unique_id=HOOK_ID)


def payment_query(payment: dict[str, Any], fields: str = "status") -> str:
    return (
        f'query {{ payment(userId: "{payment["userId"]}", loanId: "{payment["loanId"]}", '
        f'paymentId: "{payment["paymentId"]}") {{ {fields} }} }}'
    )


async def test_queries_read_eventually_consistent(api: Api) -> None:
    payment = await api.create()
    with reads_sent(api) as sent:
        await api.data(payment_query(payment, "status history { edges { node { version } } }"))
        await api.data(
            'query { loan(loanId: "loan-1") { payments { edges { node { id } } } } }', as_=ALICE
        )
    assert sent == [("GetItem", False), ("Query", False), ("Query", False)]


async def test_a_transition_decides_on_a_strong_read_and_its_answer_sees_its_own_write(
    api: Api,
) -> None:
    payment = await api.create()
    arguments = (
        f'userId: "alice", loanId: "loan-1", paymentId: "{payment["paymentId"]}", reason: "r"'
    )
    mutation = f"""mutation {{ skipPayment(input: {{ {arguments} }}) {{
      ... on PaymentPayload {{ payment {{ status history {{ edges {{ node {{ toStatus }} }} }} }} }}
    }} }}"""
    with reads_sent(api) as sent:
        data = await api.data(mutation)
    assert [e["node"]["toStatus"] for e in data["skipPayment"]["payment"]["history"]["edges"]] == [
        "PENDING",
        "SKIPPED",
    ]
    # The payment before the move, then its history after it: both strongly consistent.
    assert sent == [("GetItem", True), ("Query", True)]


async def test_a_creation_answer_reads_its_history_strongly(api: Api) -> None:
    mutation = """mutation { createPayment(input: {userId: "alice", loanId: "loan-1",
      amountCents: 100, method: ACH, accountLastFour: "6789"}) {
      ... on PaymentPayload { payment { history { edges { node { toStatus } } } } } } }"""
    with reads_sent(api) as sent:
        data = await api.data(mutation)
    assert data["createPayment"]["payment"]["history"]["edges"] == [
        {"node": {"toStatus": "PENDING"}}
    ]
    assert sent == [("Query", True)]


async def test_the_setting_makes_every_read_strong(moto_config: DynamoConfig) -> None:
    async with api_client(moto_config, strong_reads=True) as api:
        payment = await api.create()
        with reads_sent(api) as sent:
            await api.data(payment_query(payment, "status history { edges { node { version } } }"))
            await api.data(
                'query { loan(loanId: "loan-1") { payments { edges { node { id } } } } }',
                as_=ALICE,
            )
    assert sent == [("GetItem", True), ("Query", True), ("Query", True)]


async def test_index_queries_stay_eventually_consistent_under_the_setting(
    moto_config: DynamoConfig,
) -> None:
    # DynamoDB refuses a strongly consistent read of a global secondary index.
    async with api_client(moto_config, strong_reads=True) as api:
        await api.create()
        with reads_sent(api) as sent:
            await api.data(
                'query { loan(loanId: "loan-1") { payments(status: PENDING) '
                "{ edges { node { id } } } } }",
                as_=ALICE,
            )
            await api.data("query { paymentsByStatus(status: PENDING) { edges { node { id } } } }")
    # GSI1's one Query, and GSI2's, one for each of its shards (64 by default): none strong.
    assert sent[0] == ("Query", False) and len(sent) > 2
    assert set(sent) == {("Query", False)}
