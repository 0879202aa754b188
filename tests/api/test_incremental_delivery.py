"""`@defer` and `@stream` over HTTP (issue 66, SPEC §22): a loan page whose payments' history is
deferred and whose edges are streamed, read in parts in each format a client's `Accept` asks for,
merges into exactly the plain answer; a client that asks for neither gets the plain answer as one
body; errors land in their part; the validation errors; the cost and DynamoDB counts of every
part, and one request-log line; each part sent while the later ones are still being made, and a
client that goes away cancelling them."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import MutableMapping
from typing import Any

import httpx
import orjson
import pytest

from datasource import current_deadline
from engine import Merged
from resolvers import queries
from tests.api.conftest import ALICE, Api
from tests.eventually import eventually

LOAN_PAGE = """
query LoanPage($loanId: ID!, $defer: Boolean! = true, $after: String) {
  loan(loanId: $loanId) {
    id loanId
    payments(first: 20) {
      edges @stream(initialCount: 5, label: "edges", if: $defer) {
        cursor
        node {
          paymentId status amountCents
          ... @defer(label: "history", if: $defer) {
            history(first: 5, after: $after) { edges { node { version toStatus } } }
          }
        }
      }
      pageInfo { hasNextPage endCursor }
    }
  }
}
"""
PLAIN_LOAN_PAGE = re.sub(r"@(stream|defer)\([^)]*\)|\$defer: Boolean! = true, ", "", LOAN_PAGE)

APOLLO_2022 = (
    "multipart/mixed;deferSpec=20220824,application/graphql-response+json,application/json;q=0.9"
)
APOLLO_ALPHA_9 = (
    "multipart/mixed;incrementalSpec=v0.2,application/graphql-response+json,application/json;q=0.9"
)
URQL = (
    "application/graphql-response+json, application/graphql+json, application/json,"
    " text/event-stream, multipart/mixed"
)


async def post(
    api: Api,
    query: str,
    variables: dict[str, Any],
    accept: str,
    *,
    as_: str = ALICE,
    debug: bool = False,
    endpoint: str = "/graphql",
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {as_}", "Accept": accept}
    if debug:
        headers["X-Debug-DynamoDB"] = "1"
    return await api.http.post(
        endpoint, json={"query": query, "variables": variables}, headers=headers
    )


def parts(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON of each part of a multipart/mixed answer whose boundary is `-`."""
    assert response.headers["content-type"].startswith('multipart/mixed; boundary="-"')
    body = response.text
    assert body.startswith("\r\n---") and body.endswith("\r\n-----\r\n"), body[-40:]
    found = []
    for chunk in body.split("\r\n---")[1:-1]:
        headers, _, json = chunk.partition("\r\n\r\n")
        assert "content-type: application/json; charset=utf-8" in headers.lower()
        found.append(orjson.loads(json))
    return found


def merged(payloads: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client ends with: the parts merged, and their errors."""
    state = Merged(payloads[0])
    for payload in payloads[1:]:
        state.apply(payload)
    answer: dict[str, Any] = {"data": state.data}
    if state.errors:
        answer["errors"] = state.errors
    return answer


async def loan_with_payments(api: Api, count: int = 8) -> None:
    for amount in range(count):
        payment = await api.create(user="alice", loan="loan-1", amount=1000 + amount)
        if amount % 2:
            await api.move("submitPayment", payment, confirmationId=f"conf-{amount}")


def without_extensions(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key != "extensions"}


@pytest.mark.parametrize("accept", [APOLLO_2022, APOLLO_ALPHA_9, URQL])
async def test_the_parts_merge_into_the_plain_answer(api: Api, accept: str) -> None:
    await loan_with_payments(api)
    plain = await post(api, PLAIN_LOAN_PAGE, {"loanId": "loan-1"}, "application/json")

    response = await post(api, LOAN_PAGE, {"loanId": "loan-1"}, accept)

    assert response.status_code == 200
    payloads = parts(response)
    assert len(payloads) >= 2
    first = payloads[0]
    assert first["hasNext"] is True
    assert len(first["data"]["loan"]["payments"]["edges"]) == 5
    assert all("history" not in edge["node"] for edge in first["data"]["loan"]["payments"]["edges"])
    assert [payload["hasNext"] for payload in payloads[1:]] == [True] * (len(payloads) - 2) + [
        False
    ]
    assert merged(payloads) == without_extensions(plain.json())


# A loan as a gateway names it to the subgraph, its page read in parts.
LOAN_ENTITY = """
query LoanEntity($representations: [_Any!]!) {
  _entities(representations: $representations) {
    ... on Loan {
      id
      payments(first: 20) {
        edges @stream(initialCount: 2) {
          node { paymentId status ... @defer { history(first: 5) { edges { node { toStatus } } } } }
        }
      }
    }
  }
}
"""
PLAIN_LOAN_ENTITY = re.sub(r"@(stream|defer)\([^)]*\)|@defer", "", LOAN_ENTITY)


@pytest.mark.parametrize("accept", [APOLLO_2022, APOLLO_ALPHA_9, URQL])
@pytest.mark.parametrize(
    ("query", "plain_query", "variables"),
    [
        (LOAN_PAGE, PLAIN_LOAN_PAGE, {"loanId": "loan-1"}),
        (
            LOAN_ENTITY,
            PLAIN_LOAN_ENTITY,
            {"representations": [{"__typename": "Loan", "userId": "alice", "loanId": "loan-1"}]},
        ),
    ],
    ids=["loan page", "loan entity"],
)
async def test_the_subgraph_answers_in_parts_too(
    api: Api, accept: str, query: str, plain_query: str, variables: dict[str, Any]
) -> None:
    await loan_with_payments(api, 6)
    plain = await post(api, plain_query, variables, "application/json", endpoint="/subgraph")

    response = await post(api, query, variables, accept, endpoint="/subgraph")

    assert response.status_code == 200
    payloads = parts(response)
    assert len(payloads) >= 2
    assert payloads[0]["hasNext"] is True
    assert "errors" not in plain.json()
    assert merged(payloads) == without_extensions(plain.json())


async def test_each_format_as_its_client_reads_it(api: Api) -> None:
    await loan_with_payments(api, 6)

    newer = parts(await post(api, LOAN_PAGE, {"loanId": "loan-1"}, APOLLO_ALPHA_9))
    older = parts(await post(api, LOAN_PAGE, {"loanId": "loan-1"}, APOLLO_2022))

    # graphql-js 17: what is pending named by id, its parts by that id, each completed.
    labels = {pending["label"] for pending in newer[0]["pending"]}
    assert labels == {"edges", "history"}
    later = [entry for payload in newer[1:] for entry in payload.get("incremental", ())]
    assert later and all("id" in entry and "path" not in entry for entry in later)
    completed = [done["id"] for payload in newer[1:] for done in payload.get("completed", ())]
    pending = [p["id"] for payload in newer for p in payload.get("pending", ())]
    assert sorted(completed) == sorted(pending)
    # 2022-08-24: no ids; each part names its path and label, a streamed one its first index.
    assert "pending" not in older[0]
    entries = [entry for payload in older[1:] for entry in payload.get("incremental", ())]
    streamed = [entry for entry in entries if "items" in entry]
    assert streamed[0]["path"] == ["loan", "payments", "edges", 5]
    assert streamed[0]["label"] == "edges"
    deferred = [entry for entry in entries if "data" in entry]
    assert {entry["label"] for entry in deferred} == {"history"}
    assert all(
        entry["path"][:3] == ["loan", "payments", "edges"] and entry["path"][-1] == "node"
        for entry in deferred
    )
    assert all("id" not in entry for entry in entries)


@pytest.mark.parametrize("accept", ["application/json", "application/graphql-response+json"])
async def test_a_client_that_reads_no_parts_gets_one_body(api: Api, accept: str) -> None:
    await loan_with_payments(api, 6)
    plain = await post(api, PLAIN_LOAN_PAGE, {"loanId": "loan-1"}, accept)

    response = await post(api, LOAN_PAGE, {"loanId": "loan-1"}, accept)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith(accept)
    assert without_extensions(response.json()) == without_extensions(plain.json())


@pytest.mark.parametrize("accept", [APOLLO_2022, APOLLO_ALPHA_9])
async def test_if_false_is_the_plain_answer(api: Api, accept: str) -> None:
    await loan_with_payments(api, 6)
    plain = await post(api, PLAIN_LOAN_PAGE, {"loanId": "loan-1"}, "application/json")

    response = await post(api, LOAN_PAGE, {"loanId": "loan-1", "defer": False}, accept)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/graphql-response+json")
    assert without_extensions(response.json()) == without_extensions(plain.json())


@pytest.mark.parametrize("accept", [APOLLO_2022, APOLLO_ALPHA_9])
async def test_an_error_in_a_deferred_part_stops_at_its_boundary(api: Api, accept: str) -> None:
    await loan_with_payments(api, 2)
    variables = {"loanId": "loan-1", "after": "not-a-cursor"}
    plain = (await post(api, PLAIN_LOAN_PAGE, variables, "application/json")).json()

    payloads = parts(await post(api, LOAN_PAGE, variables, accept))

    # Without @defer the error nulls the payment and, each level non-null, the whole loan.
    assert plain["data"] is None
    # Deferred, it nulls the fragment only: the first part keeps every payment.
    edges = payloads[0]["data"]["loan"]["payments"]["edges"]
    assert len(edges) == 2
    errors = merged(payloads)["errors"]
    assert len(errors) == 2
    assert {tuple(error["path"][:4]) for error in errors} == {
        ("loan", "payments", "edges", 0),
        ("loan", "payments", "edges", 1),
    }
    assert all(error["path"][-1] == "history" for error in errors)
    assert all(error["extensions"]["code"] == "INVALID_INPUT" for error in errors)
    later = payloads[1:]
    if accept == APOLLO_2022:
        failed = [e for p in later for e in p.get("incremental", ()) if e.get("data") is None]
        assert len(failed) == 2 and all(e["label"] == "history" for e in failed)
    else:
        failed = [c for p in later for c in p.get("completed", ()) if c.get("errors")]
        assert len(failed) == 2
    assert "errors" not in payloads[0]


@pytest.mark.parametrize(
    ("document", "words"),
    [
        (
            'mutation { ... @defer { createPayment(input: {userId: "alice", loanId: "l",'
            ' amountCents: 1, method: ACH, reason: "r"}) { __typename } } }',
            "Defer directive cannot be used on root mutation type",
        ),
        (
            "query($l: ID!) { loan(loanId: $l) { id @stream(initialCount: 1) } }",
            "Stream directive cannot be used on non-list field",
        ),
        (
            "query($l: ID!) { loan(loanId: $l) { payments { edges @stream(initialCount: -1)"
            " { cursor } } } }",
            "initialCount must not be negative",
        ),
        (
            'query($l: ID!) { loan(loanId: $l) { ... @defer(label: "a") { id }'
            ' ... @defer(label: "a") { loanId } } }',
            "label argument must be unique",
        ),
        (
            "query($l: ID!, $label: String) { loan(loanId: $l) {"
            " ... @defer(label: $label) { id } } }",
            "label argument must be a static string",
        ),
    ],
    ids=["mutation-root", "stream-non-list", "negative-initial-count", "repeated", "variable"],
)
async def test_misplaced_directives_are_validation_errors(
    api: Api, document: str, words: str
) -> None:
    response = await post(
        api,
        document,
        {"l": "loan-1"},
        f"{APOLLO_2022.split(',')[0]}, application/graphql-response+json",
    )

    assert response.status_code == 400
    body = response.json()
    assert "data" not in body
    [error] = body["errors"]
    assert words in error["message"]


async def test_the_cost_is_charged_before_the_first_part_and_settled_in_the_last(
    api: Api,
) -> None:
    await loan_with_payments(api, 6)

    payloads = parts(await post(api, LOAN_PAGE, {"loanId": "loan-1"}, APOLLO_ALPHA_9, debug=True))

    first_cost = payloads[0]["extensions"]["cost"]
    assert set(first_cost) == {"requestedQueryCost", "throttleStatus"}
    plain = await post(api, PLAIN_LOAN_PAGE, {"loanId": "loan-1"}, "application/json", debug=True)
    plain_cost = plain.json()["extensions"]["cost"]
    assert first_cost["requestedQueryCost"] == plain_cost["requestedQueryCost"]
    last = payloads[-1]["extensions"]
    assert last["cost"]["actualQueryCost"] == plain_cost["actualQueryCost"]
    # Every part's DynamoDB calls, counted in the last: as many as the plain answer's.
    assert last["dynamodb"]["requests"] == plain.json()["extensions"]["dynamodb"]["requests"]
    assert all("extensions" not in payload for payload in payloads[1:-1])


async def test_the_request_log_has_one_line_once_the_last_part_is_sent(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    await loan_with_payments(api, 6)
    plain = await post(api, PLAIN_LOAN_PAGE, {"loanId": "loan-1"}, "application/json", debug=True)
    caplog.set_level(logging.INFO, logger="loc_payments.request")

    answered = await post(api, LOAN_PAGE, {"loanId": "loan-1"}, APOLLO_2022, debug=True)
    payloads = parts(answered)

    # This request's lines (the earlier requests' may still be written after the level is set:
    # lines go out once per event-loop pass, after that pass's answers).
    def lines() -> list[logging.LogRecord]:
        return [
            record
            for record in caplog.records
            if record.name == "loc_payments.request"
            and record.__dict__.get("request_id") == answered.headers["x-request-id"]
        ]

    await eventually(lambda: len(lines()) >= 1, what="the request's line")
    [line] = lines()
    fields: dict[str, Any] = line.__dict__
    assert fields["operation"] == "LoanPage"
    assert fields["outcome"] == "OK"
    # Every part's calls: as many as the plain answer made, and as the last part says.
    counted = plain.json()["extensions"]["dynamodb"]["requests"]
    assert fields["dynamodb_calls"] == counted
    assert payloads[-1]["extensions"]["dynamodb"]["requests"] == counted


class HeldHistory:
    """`payment_history` held until `release` is set, noting whether it was cancelled."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.release = asyncio.Event()
        self.waiting = 0
        self.cancelled = 0
        original = queries.payment_history

        async def held(*args: Any, **kwargs: Any) -> Any:
            self.waiting += 1
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            return await original(*args, **kwargs)

        monkeypatch.setattr(queries, "payment_history", held)


class Exchange:
    """One request to the app by hand (ASGI), its body's chunks kept as they are sent, and the
    client's going away when `gone` is set."""

    def __init__(self, api: Api, query: str, variables: dict[str, Any], accept: str) -> None:
        body = orjson.dumps({"query": query, "variables": variables})
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/graphql",
            "raw_path": b"/graphql",
            "query_string": b"",
            "root_path": "",
            "server": ("payments.test", 80),
            "client": ("127.0.0.1", 1234),
            "headers": [
                (b"host", b"payments.test"),
                (b"content-type", b"application/json"),
                (b"accept", accept.encode()),
                (b"authorization", f"Bearer {ALICE}".encode()),
            ],
        }
        self.app = api.app
        self.body = body
        self.read = False
        self.gone = asyncio.Event()
        self.chunks: list[bytes] = []
        self.first = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        if not self.read:
            self.read = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            self.chunks.append(message["body"])
            self.first.set()

    def run(self) -> asyncio.Task[None]:
        return asyncio.create_task(self.app(self.scope, self.receive, self.send))


async def test_each_part_is_sent_as_soon_as_it_is_made(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    await loan_with_payments(api, 2)
    history = HeldHistory(monkeypatch)
    exchange = Exchange(api, LOAN_PAGE, {"loanId": "loan-1"}, APOLLO_2022)

    answering = exchange.run()
    await asyncio.wait_for(exchange.first.wait(), 10)

    # The first part went out while every history read was still held.
    assert history.waiting == 2
    assert b'"hasNext":true' in exchange.chunks[0] and b"history" not in exchange.chunks[0]
    history.release.set()
    await asyncio.wait_for(answering, 10)
    body = b"".join(exchange.chunks)
    assert body.endswith(b"-----\r\n") and body.count(b'"history":{') == 2
    exchange.gone.set()


async def test_a_client_that_goes_away_cancels_the_parts_left(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    await loan_with_payments(api, 2)
    history = HeldHistory(monkeypatch)
    exchange = Exchange(api, LOAN_PAGE, {"loanId": "loan-1"}, APOLLO_ALPHA_9)
    caplog.set_level(logging.INFO, logger="loc_payments.request")

    answering = exchange.run()
    await asyncio.wait_for(exchange.first.wait(), 10)
    exchange.gone.set()
    await asyncio.wait_for(answering, 10)

    assert history.waiting == 2 and history.cancelled == 2
    assert b'"hasNext":false' not in b"".join(exchange.chunks)

    # The operation is still logged, once (the setup's writes may be logged meanwhile: lines go
    # out once per event-loop pass, after that pass's answers).
    def lines() -> list[logging.LogRecord]:
        return [
            record
            for record in caplog.records
            if record.name == "loc_payments.request"
            and record.__dict__.get("operation") == "LoanPage"
        ]

    await eventually(lambda: len(lines()) >= 1, what="the operation's line")
    assert len(lines()) == 1


async def test_a_deferred_part_s_reads_are_batched_through_the_request_s_loaders(
    api: Api,
) -> None:
    created = [await api.create(user="alice", loan="loan-1", amount=100 + n) for n in range(3)]
    lookups = " ".join(
        f'p{n}: payment(loanId: "loan-1", paymentId: "{payment["paymentId"]}") {{ amountCents }}'
        for n, payment in enumerate(created)
    )
    deferred = f'query {{ loan(loanId: "loan-1") {{ loanId }} ... @defer {{ {lookups} }} }}'
    plain = f'query {{ loan(loanId: "loan-1") {{ loanId }} {lookups} }}'

    payloads = parts(await post(api, deferred, {}, APOLLO_ALPHA_9, debug=True))
    alone = (await post(api, plain, {}, "application/json", debug=True)).json()

    assert merged(payloads) == without_extensions(alone)
    # The three lookups of the deferred part are one batch, as in the plain query.
    operations = payloads[-1]["extensions"]["dynamodb"]["operations"]
    assert operations == alone["extensions"]["dynamodb"]["operations"]
    assert operations == {"BatchGetItem": 1}


async def test_one_deadline_spans_every_part(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    await loan_with_payments(api, 3)
    seen: dict[str, list[float | None]] = {"first": [], "later": []}
    first_part, later_part = queries.loan_payments, queries.payment_history

    async def listing(*args: Any, **kwargs: Any) -> Any:
        seen["first"].append(current_deadline())
        return await first_part(*args, **kwargs)

    async def history(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)  # after the first part is on its way
        seen["later"].append(current_deadline())
        return await later_part(*args, **kwargs)

    monkeypatch.setattr(queries, "loan_payments", listing)
    monkeypatch.setattr(queries, "payment_history", history)

    payloads = parts(await post(api, LOAN_PAGE, {"loanId": "loan-1"}, APOLLO_2022))

    assert len(payloads) >= 2
    [started] = seen["first"]
    assert started is not None
    # Every deferred read runs by the deadline the operation began with, not one of its own.
    assert seen["later"] == [started] * 3
