"""A request leaves no reference cycles behind: what it made is freed when it ends, by reference
counting, and the garbage collector finds nothing of it.

Each cycle a request left (its loaders and their DataLoaders, graphql-core's executor and its
helpers, botocore's parser of each answer) kept everything it reached (a page's payments too)
until the collector's next pass, and those passes were a share of every request's CPU. Run on
DynamoDB Local, which is another process: moto's server runs in this one, and its threads make
garbage of their own.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import jmespath  # type: ignore[import-untyped]  # botocore's, untyped
import orjson
import pytest

from datasource import DynamoConfig
from harness.asgi import asgi_caller
from tests.api.conftest import ALICE, SERVICE, Api, Clock, api_client

pytestmark = pytest.mark.ddblocal

PAYMENT = "paymentId status amountCents createdAt loan { loanId }"
READS = {
    "payment": f"""query($p: ID!) {{
        payment(userId: "alice", loanId: "loan-1", paymentId: $p) {{ {PAYMENT} }} }}""",
    "a loan's page": f"""query {{ loan(userId: "alice", loanId: "loan-1") {{
        payments(first: 10) {{ edges {{ cursor node {{ __typename {PAYMENT} }} }}
        pageInfo {{ hasNextPage endCursor }} }} }} }}""",
    "a status's page": f"""query {{ paymentsByStatus(status: PENDING, first: 10) {{
        edges {{ node {{ {PAYMENT} }} }} }} }}""",
    "nodes": f"""query($ids: [ID!]!) {{ nodes(ids: $ids) {{ ... on Payment {{ {PAYMENT} }} }} }}""",
    "a customer's own payment": f"""query($p: ID!) {{
        payment(loanId: "loan-1", paymentId: $p) {{ {PAYMENT} }} }}""",
}


@pytest.fixture
async def api(ddblocal_config: DynamoConfig, clock: Clock) -> AsyncIterator[Api]:
    async with api_client(ddblocal_config, clock=clock) as client:
        yield client


@contextmanager
def collected_garbage(*, excuse_botocore: bool = True) -> Iterator[list[Any]]:
    """What the collector would find unreachable after the block, of what the block made (every
    object of every cycle it left, and what those hold), less botocore's own cycles unless
    `excuse_botocore` is off. Older objects are not the block's: an earlier test's client can
    become unreachable during the block, when the event loop lets go of something that held it."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    older = {id(thing) for thing in gc.get_objects()}
    found: list[Any] = []
    try:
        yield found
        gc.collect()
        garbage = outside_botocore_resolver(gc.garbage) if excuse_botocore else gc.garbage
        found.extend(thing for thing in garbage if id(thing) not in older)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def outside_botocore_resolver(garbage: list[Any]) -> list[Any]:
    """`garbage` less the cycle botocore leaves on each `BatchGetItem`: resolving the endpoint
    searches the request with jmespath, whose interpreter keeps bound methods of itself. Five
    small objects a call, not this service's to change; the rest of `garbage` is."""
    theirs = {id(thing) for thing in garbage if type(thing).__module__.startswith("jmespath.")}
    pending = [thing for thing in garbage if id(thing) in theirs]
    in_garbage = {id(thing) for thing in garbage}
    while pending:
        for held in gc.get_referents(pending.pop()):
            if id(held) in in_garbage and id(held) not in theirs:
                theirs.add(id(held))
                pending.append(held)
    return [thing for thing in garbage if id(thing) not in theirs]


def described(garbage: list[Any]) -> list[tuple[str, int]]:
    return Counter(type(thing).__qualname__ for thing in garbage).most_common(12)


async def asgi_post(api: Api, body: dict[str, Any], token: str) -> dict[str, Any]:
    """POST /graphql through the app's ASGI interface, as the profiler calls it, without an HTTP
    client (whose own objects would be counted too)."""
    headers = [
        (b"content-type", b"application/json"),
        (b"authorization", f"Bearer {token}".encode()),
    ]
    answer: dict[str, Any] = orjson.loads(await asgi_caller(api.app, orjson.dumps(body), headers)())
    return answer


async def _reads(api: Api, created: list[dict[str, Any]], count: int) -> None:
    variables = {"p": created[0]["paymentId"], "ids": [payment["id"] for payment in created]}
    for _ in range(count):
        for name, query in READS.items():
            token = ALICE if name == "a customer's own payment" else SERVICE
            used = {key: value for key, value in variables.items() if f"${key}" in query}
            body = await asgi_post(api, {"query": query, "variables": used}, token)
            assert "errors" not in body, (name, body)
            assert body["data"], name


async def test_reads_leave_no_cycles(api: Api) -> None:
    created = [await api.create(user="alice", loan="loan-1") for _ in range(3)]
    await _reads(api, created, 2)  # the caches the first requests fill (documents, plans, ...)

    with collected_garbage() as garbage:
        await _reads(api, created, 5)

    assert garbage == [], described(garbage)


class _Node:
    __slots__ = ("other",)

    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycles() -> None:
    first, second = _Node(), _Node()
    first.other, second.other = second, first
    jmespath.search("keys(RequestItems)", {"RequestItems": {"payments": {}}})


def test_the_check_sees_a_cycle_and_excuses_only_botocores() -> None:
    with collected_garbage(excuse_botocore=False) as everything:
        _cycles()
    with collected_garbage() as garbage:
        _cycles()

    assert len(everything) > 2
    assert [type(thing) for thing in garbage] == [_Node, _Node]
