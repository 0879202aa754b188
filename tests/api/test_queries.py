"""Each access pattern through its GraphQL field, as a front end or a job would use it."""

from __future__ import annotations

import re
from typing import Any

from tests.api.conftest import ALICE, BOB, PAYMENT_FIELDS, Api, error_codes
from tests.api.documents import LOAN_PAGE

RFC3339_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


async def all_pages(api: Api, variables: dict[str, Any], *, as_: str) -> list[list[str]]:
    pages: list[list[str]] = []
    after = None
    while True:
        data = await api.data(LOAN_PAGE, {**variables, "after": after}, as_=as_)
        connection = data["loan"]["payments"]
        pages.append([edge["node"]["paymentId"] for edge in connection["edges"]])
        if not connection["pageInfo"]["hasNextPage"]:
            return pages
        after = connection["pageInfo"]["endCursor"]


async def test_payment_by_loan_and_id_returns_every_field(api: Api) -> None:
    created = await api.create(user="alice", loan="loan-1", amount=12345)

    data = await api.data(
        f"query($l: ID!, $p: ID!) {{ payment(loanId: $l, paymentId: $p) {{ {PAYMENT_FIELDS} }} }}",
        {"l": "loan-1", "p": created["paymentId"]},
        as_=ALICE,
    )

    payment = data["payment"]
    assert payment == created
    assert payment["amountCents"] == 12345
    assert payment["status"] == "PENDING"
    assert payment["method"] == "ACH"
    assert payment["process"] == "MANUAL"
    assert payment["attempts"] == 0
    assert payment["accountLastFour"] == "6789"
    assert payment["confirmationId"] is None
    assert payment["applications"] == []
    assert RFC3339_Z.fullmatch(payment["createdAt"])
    assert payment["createdAt"] == payment["updatedAt"]
    assert payment["allowedTransitions"] == ["ACHSENT", "SKIPPED"]
    assert payment["loan"]["loanId"] == "loan-1"


async def test_unknown_payment_is_null(api: Api) -> None:
    data = await api.data(
        'query { payment(userId: "alice", loanId: "loan-1",'
        ' paymentId: "0190f5a4-0000-7000-8000-000000000000") { paymentId } }'
    )
    assert data["payment"] is None


async def test_loan_lists_its_payments_newest_first_over_several_pages(api: Api) -> None:
    created = [(await api.create(loan="loan-1"))["paymentId"] for _ in range(5)]
    await api.create(loan="loan-10")  # shares a prefix with loan-1: must not appear
    await api.create(user="bob", loan="loan-1")  # another user's loan of the same id

    pages = await all_pages(api, {"loanId": "loan-1", "first": 2}, as_=ALICE)

    assert pages == [created[4:2:-1], created[2:0:-1], created[0:1]]


async def test_loan_with_no_payments_is_an_empty_connection(api: Api) -> None:
    data = await api.data(LOAN_PAGE, {"loanId": "never-seen"}, as_=ALICE)
    assert data["loan"]["payments"] == {
        "edges": [],
        "pageInfo": {
            "hasNextPage": False,
            "hasPreviousPage": False,
            "startCursor": None,
            "endCursor": None,
        },
    }


async def test_loan_payments_in_one_status_follow_status_changes(api: Api) -> None:
    first, second, third = [await api.create(loan="loan-1") for _ in range(3)]
    await api.move("skipPayment", second)
    await api.move("submitPayment", third, confirmationId="conf-3")

    async def ids(status: str) -> list[str]:
        data = await api.data(LOAN_PAGE, {"loanId": "loan-1", "status": status}, as_=ALICE)
        return [edge["node"]["paymentId"] for edge in data["loan"]["payments"]["edges"]]

    assert await ids("PENDING") == [first["paymentId"]]
    assert await ids("SKIPPED") == [second["paymentId"]]
    assert await ids("ACHSENT") == [third["paymentId"]]
    assert await ids("COMPLETED") == []


async def test_payments_by_status_spans_users_and_pages(api: Api) -> None:
    retry = []
    for user in ("alice", "bob", "carol"):
        payment = await api.create(user=user, method="PINLESS")
        await api.move("schedulePaymentRetry", payment, reason="insufficient funds")
        retry.append(payment["paymentId"])
    await api.create(user="dave")  # PENDING: not in the list

    query = """
    query($after: String) {
      paymentsByStatus(status: RETRY, first: 2, after: $after) {
        edges { node { paymentId userId status } }
        pageInfo { hasNextPage endCursor }
      }
    }"""
    first = (await api.data(query))["paymentsByStatus"]
    second = (await api.data(query, {"after": first["pageInfo"]["endCursor"]}))["paymentsByStatus"]

    listed = [edge["node"]["paymentId"] for edge in first["edges"] + second["edges"]]
    assert listed == retry[::-1]
    assert first["pageInfo"]["hasNextPage"] is True
    assert second["pageInfo"]["hasNextPage"] is False
    assert {edge["node"]["status"] for edge in first["edges"] + second["edges"]} == {"RETRY"}


async def test_payment_by_confirmation_appears_once_submitted(api: Api) -> None:
    payment = await api.create(user="alice")
    query = (
        """query($c: String!) { paymentByConfirmation(confirmationId: $c) { paymentId status } }"""
    )

    assert (await api.data(query, {"c": "conf-77"}, as_=ALICE))["paymentByConfirmation"] is None
    await api.move("submitPayment", payment, confirmationId="conf-77")

    found = (await api.data(query, {"c": "conf-77"}, as_=ALICE))["paymentByConfirmation"]
    assert found == {"paymentId": payment["paymentId"], "status": "ACHSENT"}
    assert (await api.data(query, {"c": "conf-77"}, as_=BOB))["paymentByConfirmation"] is None


async def test_node_resolves_payment_and_loan_ids(api: Api) -> None:
    payment = await api.create(user="alice", loan="loan-9")
    query = """query($id: ID!) { node(id: $id) { __typename id
        ... on Payment { paymentId } ... on Loan { loanId userId } } }"""

    by_payment = (await api.data(query, {"id": payment["id"]}, as_=ALICE))["node"]
    by_loan = (await api.data(query, {"id": payment["loan"]["id"]}, as_=ALICE))["node"]

    assert by_payment == {
        "__typename": "Payment",
        "id": payment["id"],
        "paymentId": payment["paymentId"],
    }
    assert by_loan == {
        "__typename": "Loan",
        "id": payment["loan"]["id"],
        "loanId": "loan-9",
        "userId": "alice",
    }


async def test_a_malformed_node_id_is_invalid_input(api: Api) -> None:
    for bad in ("not-base64!", "UGF5bWVudCNh", "TG9hbiNhI2IjYw"):
        body = await api.post("query($id: ID!) { node(id: $id) { id } }", {"id": bad})
        assert error_codes(body) == ["INVALID_INPUT"], body
        assert body["errors"][0]["extensions"]["field"] == "id"


async def test_an_altered_cursor_is_refused(api: Api) -> None:
    for _ in range(3):
        await api.create(loan="loan-1")
    data = await api.data(LOAN_PAGE, {"loanId": "loan-1", "first": 1}, as_=ALICE)
    cursor = data["loan"]["payments"]["pageInfo"]["endCursor"]
    altered = cursor[:-2] + ("A" if cursor[-2] != "A" else "B") + cursor[-1]

    body = await api.post(LOAN_PAGE, {"loanId": "loan-1", "after": altered}, as_=ALICE)
    assert error_codes(body) == ["INVALID_INPUT"]
    assert body["errors"][0]["extensions"]["field"] == "after"

    # The same cursor on another status or loan is refused too.
    for other in ({"loanId": "loan-1", "status": "PENDING"}, {"loanId": "loan-2"}):
        body = await api.post(LOAN_PAGE, {**other, "after": cursor}, as_=ALICE)
        assert error_codes(body) == ["INVALID_INPUT"], other


async def test_page_size_is_bounded(api: Api) -> None:
    for first in (0, -1, 101):
        body = await api.post(LOAN_PAGE, {"loanId": "loan-1", "first": first}, as_=ALICE)
        assert error_codes(body) == ["INVALID_INPUT"], first


BACKWARD_PAGE = """
query($loanId: ID!, $status: PaymentStatus, $first: Int, $after: String, $last: Int,
      $before: String) {
  loan(loanId: $loanId) {
    payments(status: $status, first: $first, after: $after, last: $last, before: $before) {
      edges { cursor node { paymentId } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
}
"""


async def test_relays_load_previous_pages_back_from_any_start_cursor(api: Api) -> None:
    """What Relay's `usePaginationFragment` sends for `loadPrevious` (`last`, `before:
    startCursor`) and reads back (`hasPreviousPage`, `startCursor`), from a page reached
    forward and from the end of the list."""
    created = [(await api.create(loan="loan-1"))["paymentId"] for _ in range(7)]
    newest_first = created[::-1]

    async def page(**variables: Any) -> dict[str, Any]:
        data = await api.data(BACKWARD_PAGE, {"loanId": "loan-1", **variables}, as_=ALICE)
        connection: dict[str, Any] = data["loan"]["payments"]
        return connection

    def ids(connection: dict[str, Any]) -> list[str]:
        return [edge["node"]["paymentId"] for edge in connection["edges"]]

    first = await page(first=3)
    middle = await page(first=3, after=first["pageInfo"]["endCursor"])
    assert ids(middle) == newest_first[3:6]
    assert middle["pageInfo"]["hasPreviousPage"] is True  # reached with `after`
    previous = await page(last=3, before=middle["pageInfo"]["startCursor"])
    assert ids(previous) == newest_first[0:3]
    assert previous["pageInfo"] == {
        "hasNextPage": True,
        "hasPreviousPage": False,  # the list's start: exact
        "startCursor": previous["edges"][0]["cursor"],
        "endCursor": previous["edges"][-1]["cursor"],
    }

    end = await page(last=3)
    assert ids(end) == newest_first[4:7]
    assert (end["pageInfo"]["hasPreviousPage"], end["pageInfo"]["hasNextPage"]) == (True, False)
    before_end = await page(last=3, before=end["pageInfo"]["startCursor"])
    assert ids(before_end) == newest_first[1:4]
    rest = await page(last=3, before=before_end["pageInfo"]["startCursor"])
    assert ids(rest) == newest_first[0:1]
    assert rest["pageInfo"]["hasPreviousPage"] is False


async def test_paging_both_ways_at_once_is_invalid_input(api: Api) -> None:
    await api.create(loan="loan-1")
    cursor = (await api.data(BACKWARD_PAGE, {"loanId": "loan-1", "first": 1}, as_=ALICE))["loan"][
        "payments"
    ]["pageInfo"]["endCursor"]
    for variables, field in (
        ({"first": 2, "last": 2}, "last"),
        ({"after": cursor, "before": cursor}, "before"),
        ({"first": 2, "before": cursor}, "before"),
        ({"last": 2, "after": cursor}, "after"),
        ({"last": 0}, "last"),
        ({"last": 101}, "last"),
        ({"last": 2, "before": "junk"}, "before"),
    ):
        body = await api.post(BACKWARD_PAGE, {"loanId": "loan-1", **variables}, as_=ALICE)
        assert error_codes(body) == ["INVALID_INPUT"], variables
        assert body["errors"][0]["extensions"]["field"] == field, body


async def test_a_service_must_name_the_user(api: Api) -> None:
    body = await api.post('query { loan(loanId: "loan-1") { payments { edges { cursor } } } }')
    assert error_codes(body) == ["INVALID_INPUT"]
    assert body["errors"][0]["extensions"]["field"] == "userId"
