"""Webhook endpoints, their delivery attempts and due retries, as items of the one table.

`WebhookStore` keeps an endpoint (`WEBHOOKS` / `ENDPOINT#<id>`: its URL, types, owner, status,
secrets, where its deliveries have reached in the feed, and the lease of the instance delivering
it; a client's change is made on the condition that the endpoint is that client's) and,
under `WEBHOOK#<id>`, its attempts (kept 30 days) and due retries. Attempts and retries are written
plainly (`write_plainly`); `commit` then moves the endpoint's position past them, once per batch,
on the condition that the writer still holds the lease and no enabling moved the position
meanwhile: an instance that lost it writes no position, and what it sends again is at most its
window (at least once).

Every attribute: docs/data-model.md#the-item.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from datasource.batch import Backoff
from datasource.cursors import CursorCodec, ListScope
from datasource.deadline import pause, storage_call
from datasource.items import Item
from datasource.pages import PageOf, PageQuery, Paging, query_page
from datasource.table import GSI4SK, PK, SK, TTL_ATTRIBUTE
from domain import keys
from domain.errors import NotFound, StorageUnavailable
from domain.validation import format_timestamp, parse_timestamp
from domain.webhooks import EndpointStatus, WebhookDelivery, WebhookEndpoint

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = [
    "Commit",
    "DueRetry",
    "EndpointState",
    "WebhookStore",
    "WrittenPlainly",
    "delivery_item",
    "retry_item",
]

DELIVERY_RETENTION = timedelta(days=30)
RETRY_RETENTION = timedelta(days=7)
# A failed attempt keeps the answer's first bytes (why it failed); a delivered one keeps none, so
# that its record stays under 1 KB (one write unit).
MAX_RESPONSE_BODY = 2048
# DynamoDB's limit of items per BatchWriteItem request.
WRITE_BATCH_SIZE = 25
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
    failing_since: datetime | None = None
    delivers_from: datetime | None = None
    retries_changed: str | None = None

    def signing_secrets(self, now: datetime) -> list[str]:
        """The current secret, and the previous one while its grace lasts."""
        if self.previous_secret is None or self.previous_secret_until is None:
            return [self.secret]
        if now >= self.previous_secret_until:
            return [self.secret]
        return [self.secret, self.previous_secret]

    @property
    def position(self) -> str:
        """Where its deliveries have reached, as a feed sort key (compared as text)."""
        return self.feed_from if self.feed_key is None else self.feed_key[GSI4SK]["S"]

    @property
    def stopped_at(self) -> str:
        """The time of its position (RFC 3339 with milliseconds)."""
        return self.position[: len("2026-01-01T00:00:00.000Z")]


@dataclass(frozen=True, slots=True)
class DueRetry:
    event_id: str
    attempt: int
    sort_key: str
    due: datetime
    body: str | None = None  # an operational event's JSON; None: a payment event's, read by id


@dataclass(slots=True)
class WrittenPlainly:
    """Items written without a transaction: attempts and retries to put, retries to delete."""

    puts: list[Item] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Commit:
    """What one batch of an endpoint's deliveries changes on the endpoint: its position (None:
    unchanged), its status, since when it has answered no 2xx (`failing_since`; None with
    `succeeded`: a 2xx came), and why it was disabled."""

    feed_key: Item | None = None
    status: EndpointStatus | None = None
    failing_since: datetime | None = None
    succeeded: bool = False
    disabled: tuple[datetime, str] | None = None


def _endpoint_key(endpoint_id: str) -> Item:
    return {
        PK: {"S": keys.WEBHOOKS_PARTITION},
        SK: {"S": keys.endpoint_sort_key(endpoint_id)},
    }


def _owned(of_client: str | None) -> tuple[str, dict[str, Any]]:
    """The condition that the endpoint exists and, unless `of_client` is None (an operator's
    change), is that client's; and the values it names."""
    if of_client is None:
        return f"attribute_exists({PK})", {}
    return f"attribute_exists({PK}) AND loc_owner = :of_client", {":of_client": {"S": of_client}}


def _deliveries_scope(endpoint_id: str) -> ListScope:
    return ListScope(None, user_id=keys.webhook_partition(endpoint_id))


class WebhookStore:
    def __init__(
        self,
        client: DynamoDBClient,
        *,
        table_name: str,
        cursors: CursorCodec,
        backoff: Backoff | None = None,
    ) -> None:
        self._client = client
        self._table = table_name
        self._cursors = cursors
        self._backoff = backoff or Backoff()

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
        if endpoint.owner is not None:
            item["loc_owner"] = {"S": endpoint.owner}
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

    async def delete(self, endpoint_id: str, *, of_client: str | None) -> WebhookEndpoint:
        """The endpoint deleted; NotFound unless it exists and (`of_client`) is that client's.
        Its attempts and retries stay until their TTL; nothing delivers an endpoint that is
        gone."""
        condition, values = _owned(of_client)
        # DynamoDB refuses an empty map of values.
        named: dict[str, Any] = {"ExpressionAttributeValues": values} if values else {}
        async with storage_call():
            try:
                response = await self._client.delete_item(
                    TableName=self._table,
                    Key=_endpoint_key(endpoint_id),
                    ConditionExpression=condition,
                    ReturnValues="ALL_OLD",
                    **named,
                )
            except self._client.exceptions.ConditionalCheckFailedException:
                raise _MISSING from None
        return _state(response["Attributes"]).endpoint

    async def rotate(
        self,
        endpoint_id: str,
        *,
        of_client: str | None,
        secret: str,
        now: datetime,
        grace: timedelta,
    ) -> EndpointState:
        """A new signing secret; the one it replaces still signs until `now + grace`."""
        return await self._update(
            endpoint_id,
            of_client,
            "SET loc_previous_secret = loc_secret, loc_secret = :secret, "
            "loc_previous_secret_until = :until, loc_secret_rotated_date = :now",
            {
                ":secret": {"S": secret},
                ":until": {"S": format_timestamp(now + grace)},
                ":now": {"S": format_timestamp(now)},
            },
        )

    async def enable(
        self, endpoint_id: str, *, of_client: str | None, from_now: datetime | None
    ) -> EndpointState:
        """ENABLED again: from where it stopped, or (`from_now`) from the events after then,
        the retries of older events dropped."""
        update = (
            "SET loc_status = :enabled "
            "REMOVE loc_disabled_date, loc_disabled_reason, loc_failing_since"
        )
        values: dict[str, Any] = {":enabled": {"S": EndpointStatus.ENABLED.value}}
        if from_now is not None:
            moment = format_timestamp(from_now)
            update = (
                "SET loc_status = :enabled, loc_feed_from = :from, loc_delivers_from = :now "
                "REMOVE loc_disabled_date, loc_disabled_reason, loc_failing_since, loc_feed_key"
            )
            values |= {":from": {"S": keys.feed_bound(moment)}, ":now": {"S": moment}}
        return await self._update(endpoint_id, of_client, update, values)

    async def assign_owner(
        self, endpoint_id: str, *, owner: str
    ) -> tuple[str | None, EndpointState]:
        """The endpoint given to the service client `owner`, and whose it was before (None: no
        client's); NotFound unless it exists."""
        async with storage_call():
            try:
                response = await self._client.update_item(
                    TableName=self._table,
                    Key=_endpoint_key(endpoint_id),
                    UpdateExpression="SET loc_owner = :owner",
                    ConditionExpression=f"attribute_exists({PK})",
                    ExpressionAttributeValues={":owner": {"S": owner}},
                    ReturnValues="ALL_OLD",
                )
            except self._client.exceptions.ConditionalCheckFailedException:
                raise _MISSING from None
        before = response["Attributes"]
        previous = before.get("loc_owner")
        return None if previous is None else previous["S"], _state(
            {**before, "loc_owner": {"S": owner}}
        )

    async def _update(
        self, endpoint_id: str, of_client: str | None, update: str, values: dict[str, Any]
    ) -> EndpointState:
        condition, owned = _owned(of_client)
        async with storage_call():
            try:
                response = await self._client.update_item(
                    TableName=self._table,
                    Key=_endpoint_key(endpoint_id),
                    UpdateExpression=update,
                    ConditionExpression=condition,
                    ExpressionAttributeValues=values | owned,
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

    async def retries(self, endpoint_id: str, *, limit: int) -> list[DueRetry]:
        """The endpoint's first `limit` retries, soonest due first (due or not)."""
        async with storage_call():
            response = await self._client.query(
                TableName=self._table,
                KeyConditionExpression="#pk = :pk AND begins_with(#sk, :prefix)",
                ExpressionAttributeNames={"#pk": PK, "#sk": SK},
                ExpressionAttributeValues={
                    ":pk": {"S": keys.webhook_partition(endpoint_id)},
                    ":prefix": {"S": keys.RETRY_PREFIX},
                },
                ConsistentRead=True,
                Limit=limit,
            )
        return [_retry(item) for item in response.get("Items", [])]

    async def schedule(
        self,
        endpoint_id: str,
        *,
        event_id: str,
        due: datetime,
        attempt: int,
        body: str | None = None,
    ) -> None:
        """A retry (a resend, an operational event) of `event_id`, due at `due`, made from
        outside the endpoint's delivery: the endpoint is marked so that its delivery looks."""
        async with storage_call():
            await self._client.put_item(
                TableName=self._table,
                Item=retry_item(endpoint_id, event_id, due, attempt, body=body),
            )
        async with storage_call():
            with contextlib.suppress(self._client.exceptions.ConditionalCheckFailedException):
                await self._client.update_item(
                    TableName=self._table,
                    Key=_endpoint_key(endpoint_id),
                    UpdateExpression="SET loc_retries_changed = :at",
                    ConditionExpression=f"attribute_exists({PK})",
                    ExpressionAttributeValues={":at": {"S": format_timestamp(due)}},
                )

    async def write_plainly(self, endpoint_id: str, writes: WrittenPlainly) -> None:
        """Attempts and retries, in BatchWriteItems of 25 (puts first: a retry's next one is
        stored before the one it replaces is deleted), what DynamoDB leaves unprocessed
        retried; StorageUnavailable if it stays unwritten."""
        partition = keys.webhook_partition(endpoint_id)
        requests: list[Any] = [{"PutRequest": {"Item": item}} for item in writes.puts] + [
            {"DeleteRequest": {"Key": {PK: {"S": partition}, SK: {"S": sort_key}}}}
            for sort_key in writes.deletes
        ]
        for start in range(0, len(requests), WRITE_BATCH_SIZE):
            await self._write_chunk(requests[start : start + WRITE_BATCH_SIZE])

    async def _write_chunk(self, requests: list[Any]) -> None:
        pending = requests
        for attempt in range(self._backoff.retries + 1):
            if attempt:
                await pause(self._backoff.delay(attempt - 1))
            async with storage_call():
                response = await self._client.batch_write_item(RequestItems={self._table: pending})
            pending = list(response.get("UnprocessedItems", {}).get(self._table, []))
            if not pending:
                return
        raise StorageUnavailable("DynamoDB left part of a batch write unprocessed; retry shortly")

    async def commit(self, endpoint_id: str, *, owner: str, feed_from: str, commit: Commit) -> bool:
        """Store what a batch changed on the endpoint, if `owner` still holds the lease and the
        position still starts at `feed_from` (no enabling from now moved it); False if not."""
        sets = ["loc_lease_owner = :owner"]
        removes: list[str] = []
        values: dict[str, Any] = {":owner": {"S": owner}, ":from": {"S": feed_from}}
        if commit.feed_key is not None:
            sets.append("loc_feed_key = :key")
            values[":key"] = {"M": commit.feed_key}
        if commit.status is not None:
            sets.append("loc_status = :status")
            values[":status"] = {"S": commit.status.value}
        if commit.succeeded:
            removes.append("loc_failing_since")
        elif commit.failing_since is not None:
            sets.append("loc_failing_since = if_not_exists(loc_failing_since, :failing)")
            values[":failing"] = {"S": format_timestamp(commit.failing_since)}
        if commit.disabled is not None:
            at, reason = commit.disabled
            sets += ["loc_disabled_date = :disabled", "loc_disabled_reason = :reason"]
            values |= {":disabled": {"S": format_timestamp(at)}, ":reason": {"S": reason}}
        update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        async with storage_call():
            try:
                await self._client.update_item(
                    TableName=self._table,
                    Key=_endpoint_key(endpoint_id),
                    UpdateExpression=update,
                    ConditionExpression="loc_lease_owner = :owner AND loc_feed_from = :from",
                    ExpressionAttributeValues=values,
                )
            except self._client.exceptions.ConditionalCheckFailedException:
                return False
        return True

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


def retry_item(
    endpoint_id: str, event_id: str, due: datetime, attempt: int, *, body: str | None = None
) -> Item:
    item: Item = {
        PK: {"S": keys.webhook_partition(endpoint_id)},
        SK: {"S": keys.retry_sort_key(format_timestamp(due), event_id)},
        "loc_event_id": {"S": event_id},
        "loc_attempt": {"N": str(attempt)},
        TTL_ATTRIBUTE: {"N": str(int((due + RETRY_RETENTION).timestamp()))},
    }
    if body is not None:
        item["loc_body"] = {"S": body}
    return item


def delivery_item(endpoint_id: str, delivery: WebhookDelivery) -> Item:
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
    if delivery.response_body and not delivery.succeeded:
        item["loc_response_body"] = {"S": delivery.response_body[:MAX_RESPONSE_BODY]}
    return item


def _retry(item: Item) -> DueRetry:
    body = item.get("loc_body")
    sort_key = item[SK]["S"]
    due = sort_key.removeprefix(keys.RETRY_PREFIX).partition("#")[0]
    return DueRetry(
        event_id=item["loc_event_id"]["S"],
        attempt=int(item["loc_attempt"]["N"]),
        sort_key=sort_key,
        due=parse_timestamp("due", due),
        body=None if body is None else body["S"],
    )


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


def _moment(item: Item, name: str) -> datetime | None:
    value = item.get(name)
    return None if value is None else parse_timestamp(name, value["S"])


def _state(item: Item) -> EndpointState:
    get = item.get
    types = get("loc_event_types")
    description = get("loc_description")
    previous = get("loc_previous_secret")
    lease_owner = get("loc_lease_owner")
    feed_key = get("loc_feed_key")
    reason = get("loc_disabled_reason")
    changed = get("loc_retries_changed")
    owner = get("loc_owner")
    endpoint = WebhookEndpoint(
        endpoint_id=item["loc_endpoint_id"]["S"],
        url=item["loc_url"]["S"],
        event_types=None if types is None else tuple(value["S"] for value in types["L"]),
        description=None if description is None else description["S"],
        status=EndpointStatus(item["loc_status"]["S"]),
        created_at=parse_timestamp("loc_created_date", item["loc_created_date"]["S"]),
        secret_rotated_at=_moment(item, "loc_secret_rotated_date"),
        disabled_at=_moment(item, "loc_disabled_date"),
        disabled_reason=None if reason is None else reason["S"],
        owner=None if owner is None else owner["S"],
    )
    return EndpointState(
        endpoint=endpoint,
        secret=item["loc_secret"]["S"],
        previous_secret=None if previous is None else previous["S"],
        previous_secret_until=_moment(item, "loc_previous_secret_until"),
        feed_from=item["loc_feed_from"]["S"],
        feed_key=None if feed_key is None else dict(feed_key["M"]),
        lease_owner=None if lease_owner is None else lease_owner["S"],
        lease_until_ms=int(item["loc_lease_until"]["N"]),
        failing_since=_moment(item, "loc_failing_since"),
        delivers_from=_moment(item, "loc_delivers_from"),
        retries_changed=None if changed is None else changed["S"],
    )
