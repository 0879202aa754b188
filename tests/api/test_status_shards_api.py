"""`LOC_GSI2_SHARDS` reaches the store: `paymentsByStatus` over four shards pages as one does."""

from __future__ import annotations

from datasource import DynamoConfig
from tests.api.conftest import api_client

PAGE = """query($after: String) { paymentsByStatus(status: PENDING, first: 3, after: $after) {
  edges { node { paymentId } } pageInfo { hasNextPage endCursor } } }"""


async def test_payments_by_status_over_four_shards(moto_config: DynamoConfig) -> None:
    async with api_client(moto_config, gsi2_shards=4) as api:
        created = [await api.create(loan=f"loan-{n % 3}") for n in range(10)]
        pages, after = [], None
        while True:
            body = await api.post(PAGE, {"after": after}, debug=True)
            listed = body["data"]["paymentsByStatus"]
            pages.append([edge["node"]["paymentId"] for edge in listed["edges"]])
            # Every shard is read at once, then only a shard read short of the page's end again:
            # which one holds more of a page depends on the payments' random ids.
            dynamodb = body["extensions"]["dynamodb"]
            assert dynamodb["operations"].keys() == {"Query"}
            assert 4 <= dynamodb["operations"]["Query"] <= 4 * dynamodb["listRounds"]
            assert dynamodb["listRounds"] <= 3
            if not listed["pageInfo"]["hasNextPage"]:
                break
            after = listed["pageInfo"]["endCursor"]

    newest_first = [payment["paymentId"] for payment in reversed(created)]
    assert pages == [newest_first[0:3], newest_first[3:6], newest_first[6:9], newest_first[9:]]
