"""GraphQL over HTTP (SPEC §13, `server.graphql_over_http`): what graphql-http's audit
(`test_http_audit.py`) does not check. Every refusal is a GraphQL response in JSON in
Strawberry's words; a mutation over GET is 405; an unknown operation is a GraphQL request error;
no `data` entry when execution did not start, under either media type."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from process.settings import Settings
from tests.api.conftest import SERVICE, Api, without_cost
from tests.backends import Backend, fresh_table
from tests.servers import served

PAYMENT_QUERY = 'query Named { loan(userId: "alice", loanId: "loan-1") { loanId } }'
HEADERS = {"Authorization": f"Bearer {SERVICE}"}
JSON = "application/json"
GRAPHQL_RESPONSE = "application/graphql-response+json"
# Seconds an idle connection is kept, in the keep-alive test: the default is 75.
KEEP_ALIVE = 1.0


async def post(api: Api, body: Any, **headers: str) -> httpx.Response:
    return await api.http.post("/graphql", json=body, headers=HEADERS | headers)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ([{"query": "{ __typename }"}], "Batching is not enabled"),
        ("{ __typename }", "The request body must be a JSON object"),
        ({"query": 5}, "`query` must be a string or null"),
        ({"query": "{ __typename }", "variables": [1]}, "`variables` must be an object or null"),
        ({"query": "{ __typename }", "extensions": "x"}, "`extensions` must be an object"),
        *(
            ({"query": PAYMENT_QUERY, "operationName": name}, "`operationName` must be a string")
            for name in ({"a": 1}, ["Named"], 5, True)
        ),
        ({"variables": {}}, "No GraphQL query found in the request"),
        ({"query": ""}, "No GraphQL query found in the request"),
        ({"query": "subscription { x }"}, "subscriptions are not allowed when using POST"),
    ],
)
@pytest.mark.parametrize("accept", [JSON, GRAPHQL_RESPONSE])
async def test_malformed_requests_are_refused_in_strawberrys_words(
    api: Api, body: Any, words: str, accept: str
) -> None:
    response = await post(api, body, accept=accept)

    assert response.status_code == 400
    assert response.headers["content-type"] == accept
    [error] = response.json()["errors"]
    assert words in error["message"]
    assert set(response.json()) == {"errors"}


@pytest.mark.parametrize(("accept", "status"), [(JSON, 200), (GRAPHQL_RESPONSE, 400)])
async def test_an_unknown_operation_name_is_a_graphql_request_error(
    api: Api, accept: str, status: int
) -> None:
    response = await post(api, {"query": PAYMENT_QUERY, "operationName": "Other"}, accept=accept)

    assert (response.status_code, response.headers["content-type"]) == (status, accept)
    assert response.json() == {"errors": [{"message": 'Unknown operation named "Other".'}]}


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"query": "{ loan(loanId: "}, "Syntax Error"),
        # Found by the envelope fuzzer: Strawberry's depth limiter failed on it, a 500.
        ({"query": '{ __typename loan(loanId: "l") { } }'}, "Syntax Error: Expected Name"),
        ({"query": "{ noSuchField }"}, "Cannot query field 'noSuchField'"),
        ({"query": "{ a: __typename " + "b: __typename " * 20 + "}"}, "aliases"),
        (
            {"query": "query($l: ID!) { loan(loanId: $l) { loanId } }", "variables": {"l": None}},
            "Variable '$l' has invalid value",
        ),
        ({"query": "query A { __typename } query B { __typename }"}, "Must provide operation"),
    ],
)
@pytest.mark.parametrize(("accept", "status"), [(JSON, 200), (GRAPHQL_RESPONSE, 400)])
async def test_no_data_entry_when_execution_did_not_start(
    api: Api, body: dict[str, Any], words: str, accept: str, status: int
) -> None:
    response = await post(api, body, accept=accept)

    assert (response.status_code, response.headers["content-type"]) == (status, accept)
    answer = response.json()
    assert "data" not in answer, answer
    assert words in answer["errors"][0]["message"], answer


@pytest.mark.parametrize("accept", [JSON, GRAPHQL_RESPONSE])
async def test_a_data_entry_once_execution_started_even_when_null(api: Api, accept: str) -> None:
    # `loan` is non-null: refusing the caller inside it nulls the whole `data`.
    response = await api.http.post(
        "/graphql", json={"query": PAYMENT_QUERY}, headers={"accept": accept}
    )

    assert (response.status_code, response.headers["content-type"]) == (200, accept)
    answer = response.json()
    assert answer["data"] is None
    assert answer["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


@pytest.mark.parametrize("accept", [JSON, GRAPHQL_RESPONSE, "*/*"])
async def test_a_mutation_over_get_is_405_with_allow_post(api: Api, accept: str) -> None:
    response = await api.http.get(
        "/graphql",
        params={"query": 'mutation { skipPayment(input: {loanId: "l"}) { __typename } }'},
        headers=HEADERS | {"accept": accept},
    )

    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json() == {"errors": [{"message": "mutations are not allowed when using GET"}]}


async def test_a_refused_request_carries_its_request_id_as_an_answer_does(api: Api) -> None:
    """Each refusal once the request is read (a mutation over GET, no query, a malformed
    document id, an unknown operation) names the request, so that a caller can report it."""
    refused = [
        await api.http.get(
            "/graphql",
            params={"query": 'mutation { skipPayment(input: {loanId: "l"}) { __typename } }'},
            headers=HEADERS | {"X-Request-ID": "req-1"},
        ),
        await post(api, {"variables": {}}, **{"X-Request-ID": "req-2"}),
        await post(api, {"documentId": "sha256:xyz"}, **{"X-Request-ID": "req-3"}),
        await post(
            api, {"query": PAYMENT_QUERY, "operationName": "Nope"}, **{"X-Request-ID": "req-4"}
        ),
    ]

    assert [(r.status_code, r.headers["x-request-id"]) for r in refused] == [
        (405, "req-1"),
        (400, "req-2"),
        (400, "req-3"),
        (200, "req-4"),  # a GraphQL request error, in application/json
    ]
    assert all("errors" in r.json() and "data" not in r.json() for r in refused)


async def test_a_method_other_than_get_and_post_is_405_in_json(api: Api) -> None:
    for method in ("PUT", "DELETE", "PATCH", "HEAD"):
        response = await api.http.request(method, "/graphql", headers=HEADERS)
        assert response.status_code == 405, method
        assert response.headers["allow"] == "GET, POST"
        if method != "HEAD":
            assert response.headers["content-type"] == JSON
            assert "GET and POST" in response.json()["errors"][0]["message"]


@pytest.mark.parametrize(
    ("accept", "media_type"),
    [
        (None, JSON),
        ("*/*", JSON),
        ("application/*", JSON),
        (JSON, JSON),
        (GRAPHQL_RESPONSE, GRAPHQL_RESPONSE),
        (f"{GRAPHQL_RESPONSE}, {JSON};q=0.9", GRAPHQL_RESPONSE),
        (f"{JSON}, {GRAPHQL_RESPONSE}", GRAPHQL_RESPONSE),
        (f"{GRAPHQL_RESPONSE};q=0.5, {JSON}", JSON),
        (f"{GRAPHQL_RESPONSE};q=0, */*", JSON),
        ("text/html", JSON),  # none we speak: the header is disregarded
        ("multipart/mixed, text/event-stream", JSON),
    ],
)
async def test_the_answer_takes_the_media_type_accept_prefers(
    api: Api, accept: str | None, media_type: str
) -> None:
    headers = {} if accept is None else {"accept": accept}
    response = await post(api, {"query": PAYMENT_QUERY}, **headers)

    assert response.status_code == 200
    assert response.headers["content-type"] == media_type
    assert response.headers["vary"] == "Accept"
    assert without_cost(response.json()) == {"data": {"loan": {"loanId": "loan-1"}}}


async def test_a_body_over_the_limit_is_413_in_json(api: Api) -> None:
    body = b'{"query": "{ __typename }", "x": "' + b"x" * 70_000 + b'"}'

    async def streamed() -> Any:
        yield body

    for content in (body, streamed()):
        response = await api.http.post(
            "/graphql", content=content, headers=HEADERS | {"content-type": JSON}
        )
        assert response.status_code == 413
        assert response.json() == {"errors": [{"message": "Content Too Large"}]}


async def test_an_answer_is_json_with_its_request_id(api: Api) -> None:
    response = await post(api, {"query": PAYMENT_QUERY}, **{"X-Request-ID": "req-42"})

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-request-id"] == "req-42"
    assert int(response.headers["content-length"]) == len(response.content)
    assert without_cost(response.json()) == {"data": {"loan": {"loanId": "loan-1"}}}


async def test_get_and_post_give_the_same_bytes(api: Api) -> None:
    body = {"query": PAYMENT_QUERY, "operationName": "Named", "variables": {}}
    posted = await post(api, body, **{"X-Request-ID": "same"})
    got = await api.http.get(
        "/graphql",
        params={"query": PAYMENT_QUERY, "operationName": "Named", "variables": "{}"},
        headers=HEADERS | {"X-Request-ID": "same", "accept": JSON},
    )

    # The same answer but for the budget left, which moves between the two.
    assert posted.status_code == got.status_code
    assert without_cost(posted.json()) == without_cost(got.json())
    assert posted.headers["content-type"] == got.headers["content-type"]
    assert posted.headers["x-request-id"] == got.headers["x-request-id"] == "same"
    assert posted.headers["content-type"] == got.headers["content-type"]


def test_an_idle_connection_outlasts_a_load_balancers_by_default() -> None:
    """A load balancer keeps an idle connection 60 s (AWS's) and may send on it again then: the
    service keeps it longer, so that request never races the close (uvicorn's default is 5 s)."""
    assert Settings.model_fields["keep_alive_seconds"].default > 60


async def test_an_idle_connection_is_closed_after_the_keep_alive_setting_not_before(
    ddblocal_backend: Backend,
) -> None:
    """`LOC_KEEP_ALIVE_SECONDS` reaches uvicorn: the server closes a connection idle that long,
    and no sooner."""
    table_name = await fresh_table(ddblocal_backend)
    try:
        async with served(
            ddblocal_backend.endpoint_url, table_name, keep_alive_seconds=str(KEEP_ALIVE)
        ) as [url]:
            host, port = url.removeprefix("http://").split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            try:
                writer.write(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
                status = await asyncio.wait_for(reader.readline(), 10)
                assert status.startswith(b"HTTP/1.1 200"), status
                headers = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in headers.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
                idle_from = time.monotonic()
                assert await asyncio.wait_for(reader.read(), 30) == b"", "closed by the server"
                idle = time.monotonic() - idle_from
            finally:
                writer.close()
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)

    assert idle > 0.9 * KEEP_ALIVE, idle
