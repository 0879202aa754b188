"""GraphiQL in a real headless Chromium (issue 15): it renders offline, runs the prefilled query,
asks no other host for anything, logs no error, shows a subscription's events live, and reads an
answer in parts (`@defer`, `@stream`; issue 66) into the plain answer.

The server is what `make run` starts (`local`, demonstration data on a new table), on DynamoDB
Local. The page's every request is recorded: any to a host other than the service fails the test,
as does any console error (a Content-Security-Policy violation is one).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.async_api import Page, Request
from playwright.async_api import TimeoutError as PlaywrightTimeout

from tests.api.conftest import SERVICE
from tests.api.live_instances import METRICS, Instance
from tests.backends import Backend
from tests.servers import served

REPO = Path(__file__).resolve().parents[2]
# The README's picture, made by this test when asked: LOC_SCREENSHOT_README=1.
README_SCREENSHOT = REPO / "docs" / "graphiql.png"
# The query editor's CodeMirror.
EDITOR = "document.querySelector('.graphiql-query-editor .CodeMirror')"
# The result pane's text, from its CodeMirror (the visible text carries folding markers).
RESULT = "document.querySelector('.result-window .CodeMirror')?.CodeMirror.getValue() || ''"
SUBSCRIPTION = """subscription Follow {
  paymentEvents(userId: "user-1", loanId: "loan-1") {
    version fromStatus toStatus reason
    payment { paymentId status }
  }
}"""


@pytest.fixture
async def local_server(ddblocal_backend: Backend) -> AsyncIterator[str]:
    """A `make run`-style server: `local`, a table it creates and fills with demo payments."""
    table_name = f"test-graphiql-{uuid.uuid4().hex}"
    async with served(
        ddblocal_backend.endpoint_url, table_name, stream_poll_interval="0.1", metrics=METRICS
    ) as (url,):
        yield url
    await ddblocal_backend.client.delete_table(TableName=table_name)


async def open_graphiql(page: Page, url: str, requests: list[str]) -> None:
    def record(request: Request) -> None:
        requests.append(request.url)

    page.on("request", record)
    await page.set_viewport_size({"width": 1280, "height": 760})
    await page.goto(f"{url}/graphql", wait_until="load")
    # The query editor, filled with the README's first query.
    await page.wait_for_selector(".graphiql-query-editor .CodeMirror", timeout=20_000)


async def run(page: Page) -> None:
    await page.click(".graphiql-execute-button")


async def result_text(page: Page, contains: str) -> str:
    try:
        await page.wait_for_function(
            f"(text) => ({RESULT}).includes(text)", arg=contains, timeout=20_000
        )
    except PlaywrightTimeout:
        shown = await page.evaluate(f"() => {RESULT}")
        raise AssertionError(f"the result pane never showed {contains!r}: {shown!r}") from None
    text: str = await page.evaluate(f"() => {RESULT}")
    return text


def foreign(requests: list[str], url: str) -> list[str]:
    service = urlsplit(url).netloc
    return [
        seen
        for seen in requests
        if not seen.startswith("data:") and urlsplit(seen).netloc != service
    ]


@pytest.mark.ddblocal
async def test_graphiql_runs_the_prefilled_query_offline(
    local_server: str, page: Page, console_errors: list[str], tmp_path: Path
) -> None:
    requests: list[str] = []
    await open_graphiql(page, local_server, requests)
    await run(page)
    text = await result_text(page, "paymentId")

    answer = json.loads(text)
    edges = answer["data"]["loan"]["payments"]["edges"]
    assert len(edges) == 3  # the seeded payments of user-1's loan-1, first page
    assert {edge["node"]["method"] for edge in edges} == {"ACH"}
    await page.screenshot(path=str(tmp_path / "graphiql.png"))
    if os.environ.get("LOC_SCREENSHOT_README") == "1":
        await page.screenshot(path=str(README_SCREENSHOT))
    assert requests, "the page made no request at all"
    assert foreign(requests, local_server) == []
    assert console_errors == []


@pytest.mark.ddblocal
async def test_a_subscription_in_graphiql_shows_events_as_they_happen(
    local_server: str, page: Page, console_errors: list[str]
) -> None:
    requests: list[str] = []
    await open_graphiql(page, local_server, requests)
    # Replace the editor's text (CodeMirror's own API: typing would auto-close brackets).
    await page.evaluate(f"(text) => {EDITOR}.CodeMirror.setValue(text)", SUBSCRIPTION)
    # GraphiQL reads the operation's name from the new text after a short debounce, onto the
    # editor that a run reads it from.
    await page.wait_for_function(f"() => {EDITOR}?.CodeMirror.operationName === 'Follow'")
    await run(page)
    # A write over HTTP once the service has taken the subscription up.
    await Instance(local_server).until_subscriptions("live", lambda count: count >= 1)
    async with httpx.AsyncClient(base_url=local_server) as http:
        response = await http.post(
            "/graphql",
            json={
                "query": 'mutation { createPayment(input: {userId: "user-1", loanId: "loan-1",'
                " amountCents: 777, method: ACH}) { ... on PaymentPayload { payment { paymentId } }"
                " } }"
            },
            headers={"Authorization": f"Bearer {SERVICE}"},
        )
    created = response.json()["data"]["createPayment"]["payment"]["paymentId"]

    text = await result_text(page, created)
    event = json.loads(text)["data"]["paymentEvents"]
    assert event["toStatus"] == "PENDING" and event["fromStatus"] is None
    assert event["payment"] == {"paymentId": created, "status": "PENDING"}
    assert foreign(requests, local_server) == []
    assert console_errors == []


DEFERRED = """query Page {
  loan(userId: "user-1", loanId: "loan-1") {
    loanId
    payments(first: 10) {
      edges @stream(initialCount: 1) {
        node { paymentId ... @defer { history(first: 5) { edges { node { version } } } } }
      }
    }
  }
}"""


@pytest.mark.ddblocal
async def test_graphiql_reads_an_answer_in_parts(
    local_server: str, page: Page, console_errors: list[str]
) -> None:
    requests: list[str] = []
    answers: list[str] = []
    page.on(
        "response",
        lambda response: (
            answers.append(response.headers.get("content-type", ""))
            if response.request.method == "POST"
            else None
        ),
    )
    await open_graphiql(page, local_server, requests)
    await page.evaluate(f"(text) => {EDITOR}.CodeMirror.setValue(text)", DEFERRED)
    await page.wait_for_function(f"() => {EDITOR}?.CodeMirror.operationName === 'Page'")
    async with httpx.AsyncClient(base_url=local_server) as http:
        plain = await http.post(
            "/graphql",
            json={"query": DEFERRED.replace("@stream(initialCount: 1)", "").replace("@defer", "")},
            headers={"Authorization": f"Bearer {SERVICE}"},
        )
    expected = plain.json()["data"]
    last = expected["loan"]["payments"]["edges"][-1]["node"]["paymentId"]

    await run(page)
    await result_text(page, last)  # the streamed edges, then every deferred history
    await page.wait_for_function(
        f"(count) => ({RESULT}).split('\"version\"').length > count",
        arg=len(expected["loan"]["payments"]["edges"]),
        timeout=20_000,
    )
    text = await page.evaluate(f"() => {RESULT}")

    # GraphiQL's fetcher asked for parts (its Accept names multipart/mixed), was answered in
    # them, and merged them into the plain answer.
    assert any(kind.startswith("multipart/mixed") for kind in answers), answers
    assert json.loads(text)["data"] == expected
    assert foreign(requests, local_server) == []
    assert console_errors == []
