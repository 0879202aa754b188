"""Webhook endpoints, their delivery attempts and due retries, as items of the one table.

    endpoint   PK = WEBHOOKS, SK = ENDPOINT#<id>
        loc_endpoint_id, loc_url, loc_event_types (L, absent: every type), loc_description,
        loc_status (ENABLED | FAILING), loc_created_date, loc_secret, loc_previous_secret and
        loc_previous_secret_until (while a rotation's grace lasts), loc_secret_rotated_date,
        loc_feed_from (S, the feed's lower bound: the creation's time) and loc_feed_key (M, the
        GSI4 key of the last event handled): where the endpoint's deliveries have reached;
        loc_lease_owner, loc_lease_until (N, epoch ms): the instance delivering its events.
    attempt    PK = WEBHOOK#<id>, SK = DELIVERY#<time>#<event id>   (30 days, then TTL)
        loc_event_id, loc_event_type, loc_attempt, loc_attempted_date, loc_duration_ms,
        loc_status_code or loc_error, loc_response_body (the answer's first 2 KB)
    retry      PK = WEBHOOK#<id>, SK = RETRY#<due time>#<event id>  (TTL a week after it is due)
        loc_event_id, loc_attempt (the attempt it will be)

Every write that records an attempt is one transaction with the endpoint's progress, on the
condition that the writer still holds the lease: an instance that lost it (paused past its lease,
then woken) writes nothing, and at most one instance delivers an endpoint's events at a time.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from datasource.cursors import CursorCodec, ListScope
from datasource.deadline import storage_call
from datasource.items import Item
from datasource.pages import PageOf, PageQuery, Paging, query_page
from datasource.table import PK, SK, TTL_ATTRIBUTE
from datasource.transactions import cancellation_reasons
from domain import keys
from domain.errors import NotFound
from domain.validation import format_timestamp, parse_timestamp
from domain.webhooks import EndpointStatus, WebhookDelivery, WebhookEndpoint

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import TransactWriteItemTypeDef

__all__ = ["DueRetry", "EndpointState", "Progress", "WebhookStore"]

DELIVERY_RETENTION = timedelta(days=30)
RETRY_RETENTION = timedelta(days=7)
MAX_RESPONSE_BODY = 2048
_MISSING = NotFound("webhook endpoint not found")


@dataclass(frozen=True, slots=True)
class EndpointState:
    """An endpoint with what its delivery needs: its secrets and where its deliveries stand."""

    endpoint: WebhookEndpoint
    secret: str
    previous_secret: str | None
    previous_secret_until: datetime | None
    feed_from: str
    feed_key: Item | None
    lease_owner: str | None
    lease_until_ms: int

    def signing_secrets(self, now: datetime) -> list[str]:
        """The current secret, and the previous one while its grace lasts."""
        if self.previous_secret is None or self.previous_secret_until is None:
            return [self.secret]
        if now >= self.previous_secret_until:
            return [self.secret]
        return [self.secret, self.previous_secret]


@dataclass(frozen=True, slots=True)
class DueRetry:
    event_id: str
    attempt: int
    sort_key: str


@dataclass(frozen=True, slots=True)
class Progress:
    """What one handled event changes: the attempt made (if one was), the retry it used up and
    the one it schedules (due time, attempt), the feed position it reached, the endpoint's
    status."""

    delivery: WebhookDelivery | None = None
    retry_done: str | None = None
    retry_next: tuple[datetime, int] | None = None
    feed_key: Item | None = None
    status: EndpointStatus | None = None


def _endpoint_key(endpoint_id: str) -> Item:
    return {
        PK: {"S": keys.WEBHOOKS_PARTITION},
        SK: {"S": keys.endpoint_sort_key(endpoint_id)},
    }


def _deliveries_scope(endpoint_id: str) -> ListScope:
    return ListScope(None, user_id=keys.webhook_partition(endpoint_id))


class WebhookStore:
    def __init__(self, client: DynamoDBClient, *, table_name: str, cursors: CursorCodec) -> None:
        self._client = client
        self._table = table_name
        self._cursors = cursors

    async def create(self, endpoint: WebhookEndpoint, *, secret: str) -> None:
        item: Item = {
            **_endpoint_key(endpoint.endpoint_id),
            "loc_endpoint_id": {"S": endpoint.endpoint_id},
            "loc_url": {"S": endpoint.url},
            "loc_status": {"S": endpoint.status.value},
            "loc_created_date": {"S": format_timestamp(endpoint.created_at)},
            "loc_secret": {"S": secret},
            # Deliveries start with the events after the endpoint's creation.
            "loc_feed_from": {"S": keys.feed_bound(format_timestamp(endpoint.created_at))},
            "loc_lease_until": {"N": "0"},
        }
        if endpoint.event_types is not None:
            item["loc_event_types"] = {"L": [{"S": name} for name in endpoint.event_types]}
        if endpoint.description is not None:
            item["loc_description"] = {"S": endpoint.description}
        async with storage_call():
            await self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression=f"attribute_not_exists({PK})",
            )

    async def endpoints(self) -> list[EndpointState]:
        """Every endpoint, in the order of their ids (time-ordered UUIDs: oldest first)."""
        items: list[Item] = []
        start: Item | None = None
        while True:
            parameters = {
                "TableName": self._table,
                "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
                "ExpressionAttributeNames": {"#pk": PK, "#sk": SK},
                "ExpressionAttributeValues": {
                    ":pk": {"S": keys.WEBHOOKS_PARTITION},
                    ":prefix": {"S": keys.ENDPOINT_PREFIX},
                },
                "ConsistentRead": True,
            }
            if start is not None:
                parameters["ExclusiveStartKey"] = start
            async with storage_call():
                response = await self._client.query(**parameters)  # type: ignore[arg-type]
            items.extend(response.get("Items", []))
            start = response.get("LastEvaluatedKey")
            if start is None:
                return [_state(item) for item in items]

    async def endpoint(self, endpoint_id: str) -> EndpointState | None:
        async with storage_call():
            response = await self._client.get_item(
                TableName=self._table, Key=_endpoint_key(endpoint_id), ConsistentRead=True
            )
        item = response.get("Item")
        return None if item is None else _state(item)

    async def delete(self, endpoint_id: str) -> None:
        """NotFound unless it exists. Its attempts and retries stay until their TTL; nothing
        delivers an endpoint that is gone."""
        async with storage_call():
            try:
                await self._client.delete_item(
                    TableName=self._table,
                    Key=_endpoint_key(endpoint_id),
                    ConditionExpression=f"attribute_exists({PK})",
                )
            except self._client.exceptions.ConditionalCheckFailedException:
                raise _MISSING from None

    async def rotate(
        self, endpoint_id: str, *, secret: str, now: datetime, grace: timedelta
    ) -> EndpointState:
        """A new signing secret; the one it replaces still signs until `now + grace`."""
        async with storage_call():
            try:
                response = await self._client.update_item(
                    TableName=self._table,
                    Key=_endpoint_key(endpoint_id),
                    UpdateExpression=(
                        "SET loc_previous_secret = loc_secret, loc_secret = :secret, "
                        "loc_previous_secret_until = :until, loc_secret_rotated_date = :now"
                    ),
                    ConditionExpression=f"attribute_exists({PK})",
                    ExpressionAttributeValues={
                        ":secret": {"S": secret},
                        ":until": {"S": format_timestamp(now + grace)},
                        ":now": {"S": format_timestamp(now)},
                    },
                    ReturnValues="ALL_NEW",
                )
            except self._client.exceptions.ConditionalCheckFailedException:
                raise _MISSING from None
        return _state(response["Attributes"])

    async def take_lease(self, endpoint_id: str, *, owner: str, now_ms: int, until_ms: int) -> bool:
        """Whether `owner` now holds the endpoint's lease until `until_ms` (taken when it was
        free or had run out, or renewed when it was `owner`'s)."""
        async with storage_call():
            try:
                await self._client.update_item(
                    TableName=self._table,
                    Key=_endpoint_key(endpoint_id),
                    UpdateExpression="SET loc_lease_owner = :owner, loc_lease_until = :until",
                    ConditionExpression=(
                        f"attribute_exists({PK}) AND "
                        "(loc_lease_until < :now OR loc_lease_owner = :owner)"
                    ),
                    ExpressionAttributeValues={
                        ":owner": {"S": owner},
                        ":until": {"N": str(until_ms)},
                        ":now": {"N": str(now_ms)},
                    },
                )
            except self._client.exceptions.ConditionalCheckFailedException:
                return False
        return True

    async def release_lease(self, endpoint_id: str, *, owner: str) -> None:
        """Let another instance take the endpoint at once (an orderly stop)."""
        async with storage_call():
            with contextlib.suppress(self._client.exceptions.ConditionalCheckFailedException):
                await self._client.update_item(
                    TableName=self._table,
                    Key=_endpoint_key(endpoint_id),
                    UpdateExpression="SET loc_lease_until = :zero",
                    ConditionExpression="loc_lease_owner = :owner",
                    ExpressionAttributeValues={":owner": {"S": owner}, ":zero": {"N": "0"}},
                )

    async def due_retries(self, endpoint_id: str, *, now: datetime, limit: int) -> list[DueRetry]:
        async with storage_call():
            response = await self._client.query(
                TableName=self._table,
                KeyConditionExpression="#pk = :pk AND #sk BETWEEN :from AND :to",
                ExpressionAttributeNames={"#pk": PK, "#sk": SK},
                ExpressionAttributeValues={
                    ":pk": {"S": keys.webhook_partition(endpoint_id)},
                    ":from": {"S": keys.RETRY_PREFIX},
                    ":to": {"S": keys.retry_sort_key(format_timestamp(now), "~")},
                },
                ConsistentRead=True,
                Limit=limit,
            )
        return [
            DueRetry(
                event_id=item["loc_event_id"]["S"],
                attempt=int(item["loc_attempt"]["N"]),
                sort_key=item[SK]["S"],
            )
            for item in response.get("Items", [])
        ]

    async def schedule(
        self, endpoint_id: str, *, event_id: str, due: datetime, attempt: int
    ) -> None:
        """A retry (or a resend) of `event_id`, due at `due`."""
        async with storage_call():
            await self._client.put_item(
                TableName=self._table, Item=self._retry_item(endpoint_id, event_id, due, attempt)
            )

    async def record(self, endpoint_id: str, *, owner: str, progress: Progress) -> bool:
        """Store what one handled event changed, in one transaction, if `owner` still holds the
        lease; False when it does not (nothing is written)."""
        endpoint_update = self._progress_update(endpoint_id, owner, progress)
        writes: list[TransactWriteItemTypeDef] = [endpoint_update]
        if progress.delivery is not None:
            writes.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": _delivery_item(endpoint_id, progress.delivery),
                    }
                }
            )
        if progress.retry_done is not None:
            writes.append(
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": {
                            PK: {"S": keys.webhook_partition(endpoint_id)},
                            SK: {"S": progress.retry_done},
                        },
                    }
                }
            )
        if progress.retry_next is not None and progress.delivery is not None:
            due, attempt = progress.retry_next
            item = self._retry_item(endpoint_id, progress.delivery.event_id, due, attempt)
            writes.append({"Put": {"TableName": self._table, "Item": item}})
        if len(writes) == 1:
            async with storage_call():
                try:
                    await self._client.update_item(**endpoint_update["Update"])
                except self._client.exceptions.ConditionalCheckFailedException:
                    return False
            return True
        reasons = await cancellation_reasons(self._client, writes)
        return reasons is None

    def _progress_update(
        self, endpoint_id: str, owner: str, progress: Progress
    ) -> TransactWriteItemTypeDef:
        sets = ["loc_lease_owner = :owner"]
        values: dict[str, object] = {":owner": {"S": owner}}
        if progress.feed_key is not None:
            sets.append("loc_feed_key = :key")
            values[":key"] = {"M": progress.feed_key}
        if progress.status is not None:
            sets.append("loc_status = :status")
            values[":status"] = {"S": progress.status.value}
        return {
            "Update": {
                "TableName": self._table,
                "Key": _endpoint_key(endpoint_id),
                "UpdateExpression": "SET " + ", ".join(sets),
                "ConditionExpression": "loc_lease_owner = :owner",
                "ExpressionAttributeValues": values,  # type: ignore[typeddict-item]
            }
        }

    def _retry_item(self, endpoint_id: str, event_id: str, due: datetime, attempt: int) -> Item:
        return {
            PK: {"S": keys.webhook_partition(endpoint_id)},
            SK: {"S": keys.retry_sort_key(format_timestamp(due), event_id)},
            "loc_event_id": {"S": event_id},
            "loc_attempt": {"N": str(attempt)},
            TTL_ATTRIBUTE: {"N": str(int((due + RETRY_RETENTION).timestamp()))},
        }

    async def deliveries(
        self, endpoint_id: str, *, first: int | None, after: str | None
    ) -> PageOf[WebhookDelivery]:
        """An endpoint's delivery attempts, newest first."""
        query = PageQuery(
            scope=_deliveries_scope(endpoint_id),
            partition_attribute=PK,
            partition=keys.webhook_partition(endpoint_id),
            sort_attribute=SK,
            sort_prefix=keys.DELIVERY_PREFIX,
            newest_first=True,
        )
        return await query_page(
            self._client,
            table_name=self._table,
            query=query,
            cursors=self._cursors,
            paging=Paging.of(first=first, after=after),
            node=_delivery,
        )


def _delivery_item(endpoint_id: str, delivery: WebhookDelivery) -> Item:
    at = format_timestamp(delivery.at)
    item: Item = {
        PK: {"S": keys.webhook_partition(endpoint_id)},
        SK: {"S": keys.delivery_sort_key(at, f"{delivery.event_id}#{delivery.attempt}")},
        "loc_event_id": {"S": delivery.event_id},
        "loc_event_type": {"S": delivery.event_type},
        "loc_attempt": {"N": str(delivery.attempt)},
        "loc_attempted_date": {"S": at},
        "loc_duration_ms": {"N": str(delivery.duration_ms)},
        TTL_ATTRIBUTE: {"N": str(int((delivery.at + DELIVERY_RETENTION).timestamp()))},
    }
    if delivery.status_code is not None:
        item["loc_status_code"] = {"N": str(delivery.status_code)}
    if delivery.error is not None:
        item["loc_error"] = {"S": delivery.error}
    if delivery.response_body:
        item["loc_response_body"] = {"S": delivery.response_body[:MAX_RESPONSE_BODY]}
    return item


def _delivery(item: Item) -> WebhookDelivery:
    status_code = item.get("loc_status_code")
    error = item.get("loc_error")
    body = item.get("loc_response_body")
    return WebhookDelivery(
        event_id=item["loc_event_id"]["S"],
        event_type=item["loc_event_type"]["S"],
        attempt=int(item["loc_attempt"]["N"]),
        at=parse_timestamp("loc_attempted_date", item["loc_attempted_date"]["S"]),
        duration_ms=int(item["loc_duration_ms"]["N"]),
        status_code=None if status_code is None else int(status_code["N"]),
        error=None if error is None else error["S"],
        response_body=None if body is None else body["S"],
    )


def _state(item: Item) -> EndpointState:
    get = item.get
    types = get("loc_event_types")
    description = get("loc_description")
    rotated = get("loc_secret_rotated_date")
    previous = get("loc_previous_secret")
    previous_until = get("loc_previous_secret_until")
    owner = get("loc_lease_owner")
    feed_key = get("loc_feed_key")
    endpoint = WebhookEndpoint(
        endpoint_id=item["loc_endpoint_id"]["S"],
        url=item["loc_url"]["S"],
        event_types=None if types is None else tuple(value["S"] for value in types["L"]),
        description=None if description is None else description["S"],
        status=EndpointStatus(item["loc_status"]["S"]),
        created_at=parse_timestamp("loc_created_date", item["loc_created_date"]["S"]),
        secret_rotated_at=(
            None if rotated is None else parse_timestamp("loc_secret_rotated_date", rotated["S"])
        ),
    )
    return EndpointState(
        endpoint=endpoint,
        secret=item["loc_secret"]["S"],
        previous_secret=None if previous is None else previous["S"],
        previous_secret_until=(
            None
            if previous_until is None
            else parse_timestamp("loc_previous_secret_until", previous_until["S"])
        ),
        feed_from=item["loc_feed_from"]["S"],
        feed_key=None if feed_key is None else dict(feed_key["M"]),
        lease_owner=None if owner is None else owner["S"],
        lease_until_ms=int(item["loc_lease_until"]["N"]),
    )
