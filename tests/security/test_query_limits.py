"""Query limits refuse an operation before any resolver or DynamoDB call runs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import SERVICE, Api

PAYMENT_ID = "0190f5a4-0000-7000-8000-000000000000"


def nested_loans(levels: int) -> str:
    """A query whose depth grows by four with each level: loan.payments.edges.node."""
    inner = "paymentId"
    for _ in range(levels):
        inner = f"loan {{ payments(first: 1) {{ edges {{ node {{ {inner} }} }} }} }}"
    return f'query {{ payment(userId: "u", loanId: "l", paymentId: "{PAYMENT_ID}") {{ {inner} }} }}'


async def refused(api: Api, query: str, variables: dict[str, Any] | None = None) -> str:
    body = await api.post(query, variables, debug=True)
    assert body.get("data") is None, body
    assert body["errors"], body
    # Nothing ran: no DynamoDB call was made.
    assert body.get("extensions", {}).get("dynamodb", {}).get("requests", 0) == 0
    message: str = body["errors"][0]["message"]
    return message


async def test_depth_over_the_limit_is_refused(api: Api) -> None:
    # depth: payment(1) + 4 per level + the leaf
    allowed = await api.post(nested_loans(2))
    assert "errors" not in allowed
    message = await refused(api, nested_loans(3))
    assert "exceeds maximum operation depth" in message


async def test_depth_counts_through_fragments(api: Api) -> None:
    query = """
    fragment Deep on Payment { loan { payments(first: 1) { edges { node { loan {
      payments(first: 1) { edges { node { loan { payments(first: 1) { edges { node {
      paymentId } } } } } } } } } } } } }
    query { payment(userId: "u", loanId: "l", paymentId: "PAYMENT") { ...Deep } }
    """.replace("PAYMENT", PAYMENT_ID)
    assert "depth" in await refused(api, query)


async def test_circular_fragments_are_refused(api: Api) -> None:
    query = """
    fragment A on Payment { loan { payments { edges { node { ...B } } } } }
    fragment B on Payment { loan { payments { edges { node { ...A } } } } }
    query { payment(userId: "u", loanId: "l", paymentId: "PAYMENT") { ...A } }
    """.replace("PAYMENT", PAYMENT_ID)
    assert "Cannot spread fragment" in await refused(api, query)


def aliased(count: int) -> str:
    fields = " ".join(f"a{n}: __typename" for n in range(count))
    return f"query {{ {fields} }}"


async def test_aliases_over_the_limit_are_refused(api: Api) -> None:
    assert "errors" not in await api.post(aliased(15))
    assert "16 aliases found. Allowed: 15" in await refused(api, aliased(16))


async def test_aliases_count_through_fragment_spreads(api: Api) -> None:
    fragment = " ".join(f"x{n}: paymentId" for n in range(8))
    query = f"""
    fragment Many on Payment {{ {fragment} }}
    query {{
      a: payment(userId: "u", loanId: "l", paymentId: "{PAYMENT_ID}") {{ ...Many }}
      b: payment(userId: "u", loanId: "l", paymentId: "{PAYMENT_ID}") {{ ...Many }}
    }}"""
    assert "aliases" in await refused(api, query)


async def test_tokens_over_the_limit_are_refused(api: Api) -> None:
    fields = " ".join(["__typename"] * 1000)
    assert "token" in (await refused(api, f"query {{ {fields} }}")).lower()


COSTLY = """query($n: Int) { loan(userId: "u", loanId: "l") { payments(first: $n) {
  edges { node { paymentId loan { payments(first: $n) { edges { node { paymentId } } } } } } }
} }"""


async def test_nested_pages_multiply_their_cost(api: Api) -> None:
    body = await api.post(COSTLY, {"n": 5})
    assert "errors" not in body
    message = await refused(api, COSTLY, {"n": 100})
    assert "more than the limit of 10000" in message


async def test_pages_backward_cost_as_pages_forward(api: Api) -> None:
    backward = COSTLY.replace("first: $n", "last: $n")
    assert "errors" not in await api.post(backward, {"n": 5})
    assert "more than the limit" in await refused(api, backward, {"n": 100})
    literal = backward.replace("query($n: Int) ", "").replace("$n", "100")
    assert "more than the limit" in await refused(api, literal, {})


async def test_cost_error_says_how_much(api: Api) -> None:
    body = await api.post(COSTLY, {"n": 100})
    assert body["errors"][0]["extensions"]["code"] == "QUERY_TOO_COSTLY"
    assert body["errors"][0]["extensions"]["cost"] > 10_000


async def test_http_batching_is_refused(api: Api) -> None:
    response = await api.http.post(
        "/graphql",
        json=[{"query": "{ __typename }"}, {"query": "{ __typename }"}],
        headers={"Authorization": f"Bearer {SERVICE}"},
    )
    assert response.status_code == 400
    assert "Batching is not enabled" in response.text


async def test_request_bodies_are_bounded(api: Api) -> None:
    padding = " " * (64 * 1024)
    response = await api.http.post(
        "/graphql",
        content=f'{{"query": "{{ __typename }}{padding}"}}',
        headers={"Authorization": f"Bearer {SERVICE}", "Content-Type": "application/json"},
    )
    assert response.status_code == 413


async def test_request_bodies_without_a_length_are_counted(api: Api) -> None:
    async def chunks() -> Any:
        yield b'{"query": "{ __typename }'
        for _ in range(70):
            yield b" " * 1024
        yield b'"}'

    response = await api.http.post(
        "/graphql",
        content=chunks(),
        headers={"Authorization": f"Bearer {SERVICE}", "Content-Type": "application/json"},
    )
    assert response.status_code == 413


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
async def test_only_json_bodies_are_operations(api: Api, content_type: str) -> None:
    mutation = (
        'mutation { skipPayment(input: {userId: "u", loanId: "l",'
        f' paymentId: "{PAYMENT_ID}", reason: "csrf"}}) {{ __typename }} }}'
    )
    response = await api.http.post(
        "/graphql",
        content=f'{{"query": {mutation!r}}}'.replace("'", '"'),
        headers={"Authorization": f"Bearer {SERVICE}", "Content-Type": content_type},
    )
    assert response.status_code == 400
    assert "Unsupported content type" in response.text


async def test_mutations_never_run_over_get(api: Api) -> None:
    response = await api.http.get(
        "/graphql",
        params={"query": "mutation { __typename }"},
        headers={"Authorization": f"Bearer {SERVICE}", "Accept": "application/json"},
    )
    assert response.status_code in (400, 405)


async def test_a_body_that_is_not_json_is_a_400(api: Api) -> None:
    response = await api.http.post(
        "/graphql",
        content=b'{"query": "{ __typename }"',
        headers={"Authorization": f"Bearer {SERVICE}", "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert "Unable to parse request body as JSON" in response.text


@pytest.mark.parametrize(
    "document",
    [
        COSTLY.replace("query($n: Int)", "query($n: Int = 100)"),
        # Reached through a named fragment and an inline one, under an alias.
        """query($n: Int = 100) { a: paymentsByStatus(status: PENDING, first: $n) { ...Page } }
        fragment Page on PaymentConnection { edges { node { ... on Payment {
          loan { payments(first: $n) { edges { node { paymentId } } } } } } } }""",
    ],
    ids=["plain", "through fragments"],
)
async def test_a_defaulted_page_size_is_costed_as_if_it_were_sent(api: Api, document: str) -> None:
    sent = await refused(api, document, {"n": 100})
    defaulted = await refused(api, document, {})
    assert "more than the limit of 10000" in sent
    assert defaulted == sent


async def test_a_defaulted_list_of_ids_is_costed_by_its_length(api: Api) -> None:
    ids = ", ".join(f'"UGF5bWVudDp1L2wv{n:04d}"' for n in range(100))
    document = f"""query($ids: [ID!]! = [{ids}]) {{ nodes(ids: $ids) {{ ... on Payment {{
      loan {{ payments(first: 100) {{ edges {{ node {{ paymentId }} }} }} }} }} }} }}"""
    sent = await refused(api, document, {"ids": [f"UGF5bWVudDp1L2wv{n:04d}" for n in range(100)]})
    defaulted = await refused(api, document, {})
    assert "more than the limit of 10000" in sent
    assert defaulted == sent
