"""A JSON POST takes the service's short path: it must answer exactly as Strawberry's view does,
refusals included, and a request Strawberry's view would stream or render still reaches it."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

import server.graphql_http
from tests.api.conftest import SERVICE, Api
from tests.backends import Backend
from tests.conftest import _fresh_table
from tests.servers import served

PAYMENT_QUERY = 'query Named { loan(userId: "alice", loanId: "loan-1") { loanId } }'
HEADERS = {"Authorization": f"Bearer {SERVICE}"}


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
        ({"variables": {}}, "No GraphQL query found in the request"),
        ({"query": PAYMENT_QUERY, "operationName": "Other"}, 'Unknown operation named "Other"'),
        ({"query": "subscription { x }"}, "subscriptions are not allowed when using POST"),
    ],
)
async def test_malformed_requests_are_refused_in_strawberrys_words(
    api: Api, body: Any, words: str
) -> None:
    response = await post(api, body)

    assert response.status_code == 400
    assert words in response.text


async def test_an_answer_is_json_with_its_request_id(api: Api) -> None:
    response = await post(api, {"query": PAYMENT_QUERY}, **{"X-Request-ID": "req-42"})

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-request-id"] == "req-42"
    assert int(response.headers["content-length"]) == len(response.content)
    assert response.json() == {"data": {"loan": {"loanId": "loan-1"}}}


async def test_the_short_path_and_the_view_give_the_same_bytes(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {"query": PAYMENT_QUERY, "operationName": "Named"}
    short = await post(api, body, **{"X-Request-ID": "same"})
    monkeypatch.setattr(server.graphql_http, "_plain_json_post", lambda _: False)
    viewed = await post(api, body, **{"X-Request-ID": "same"})

    assert (short.status_code, short.content) == (viewed.status_code, viewed.content)
    assert short.headers["x-request-id"] == viewed.headers["x-request-id"] == "same"
    assert short.headers["content-type"] == viewed.headers["content-type"]


async def test_an_idle_connection_is_kept_open_longer_than_uvicorns_default(
    ddblocal_backend: Backend,
) -> None:
    """A client (or a load balancer) that keeps a connection idle for 6 s may send on it again:
    uvicorn's default would have closed it after 5 s, racing that request."""
    table_name = await _fresh_table(ddblocal_backend)
    try:
        async with served(ddblocal_backend.endpoint_url, table_name) as [url]:
            host, port = url.removeprefix("http://").split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            request = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
            try:
                for _ in range(2):
                    writer.write(request)
                    status = await asyncio.wait_for(reader.readline(), 10)
                    assert status.startswith(b"HTTP/1.1 200"), status
                    headers = await reader.readuntil(b"\r\n\r\n")
                    length = next(
                        int(line.split(b":")[1])
                        for line in headers.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    )
                    await reader.readexactly(length)
                    await asyncio.sleep(6)
                    assert not reader.at_eof()
            finally:
                writer.close()
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)
