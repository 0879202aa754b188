"""What a webhook carries (SPEC §18): `data.payment` is the payment as its write left it, with the
names and values the GraphQL API gives the same fields; the rest of the body says which write."""

from __future__ import annotations

from typing import Any

from datasource import DynamoConfig, event_from_item
from resolvers.webhooks import event_body
from tests.api.conftest import Api, stored_items


def _stored_events(config: DynamoConfig, payment_id: str) -> list[dict[str, Any]]:
    items = [
        item
        for item in stored_items(config)
        if item["SK"]["S"].startswith("HISTORY#") and item["loc_payment_id"]["S"] == payment_id
    ]
    return [event_body(event_from_item(item, with_payment=True)) for item in items]


async def test_the_body_names_the_payment_as_the_api_does_at_each_version(
    api: Api, moto_config: DynamoConfig
) -> None:
    created = await api.create(method="PINLESS")
    moved = await api.move("completePayment", created, confirmationId="conf-body")
    completed = moved["payment"]
    bodies = _stored_events(moto_config, created["paymentId"])
    keys = sorted(bodies[-1]["data"]["payment"])
    selection = " ".join(
        "applications { paymentId installmentId amountCents paymentDate }"
        if key == "applications"
        else key
        for key in keys
    )
    read = await api.data(
        f"""query($l: ID!, $p: ID!) {{
              payment(userId: "alice", loanId: $l, paymentId: $p) {{ {selection} }} }}""",
        {"l": created["loanId"], "p": created["paymentId"]},
    )

    assert [body["data"]["version"] for body in bodies] == [1, 2]
    assert bodies[-1]["data"]["payment"] == read["payment"], "the API's names and values"
    first = bodies[0]["data"]["payment"]
    assert (first["status"], first["version"], first["applications"]) == ("PENDING", 1, [])
    assert bodies[0]["type"] == "payment.created"
    assert bodies[-1]["type"] == "payment.completed"
    assert bodies[-1]["data"]["fromStatus"] == "PENDING"
    assert bodies[-1]["data"]["toStatus"] == completed["status"] == "COMPLETED"
    assert bodies[-1]["createdAt"] == completed["updatedAt"]
    assert bodies[-1]["id"] != bodies[0]["id"]
