"""Live payment events from the table's DynamoDB Stream, for GraphQL subscriptions.

Every write of a payment puts its event item (`datasource.history`) in the same transaction, so
the stream's INSERT of an item whose sort key begins ``HISTORY#`` is one new `PaymentEvent`.
Everything else the stream carries (payments, idempotency records, confirmation claims, every
MODIFY and REMOVE) is skipped.

Reading model: the stream is a set of shards; a shard holds the writes of some keys in order,
closes after a while (its `NextShardIterator` ends) and is followed by child shards. Each round
`DynamoDBStreamSource` calls GetRecords once on every open shard, concurrently, then sleeps
`poll_interval` seconds. The shards open when it starts are read from LATEST: only what is written
after the service started is live, and what came before is in each payment's stored history. A
shard found later (the child of a closed one, or a new one) is read from TRIM_HORIZON, and only
once its parent is read to its end, so a payment's events come out in the order they were written.
Each shard's last sequence number is kept: an iterator that expired (unused for 15 minutes, after
an outage) is re-opened right after it, so nothing is lost or repeated (a shard that gave no
record yet is re-opened at LATEST: what was written while it could not be read is lost). Any
other failure marks the source unhealthy; it waits (a capped backoff) and tries the same round
again until cancelled.

Rounds: a `ReadRounds` given to `run` is told when each round begins, and when a round has
finished having read every open shard to its head (each call gave fewer records than it may;
none closed), so that everything the stream held when the round began is published: a live
subscription that starts at the stream's head waits for one such round begun after it.

Limits: DynamoDB advises at most two simultaneous readers per shard and allows 5 GetRecords calls
per second per shard. N service instances, each polling every `poll_interval` seconds, make
N / `poll_interval` calls per second per shard: keep that under 5 (two instances at 0.5 s), and
beyond two readers expect throttling, which botocore retries and which counts as unhealthy when it
outlasts the retries. Past that many instances, a fan-out service (Kinesis Data Streams, see
`ChangeSource`) belongs between the table and the instances.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from datasource.batch import Backoff
from datasource.history import event_from_item
from datasource.table import SK
from domain.errors import PaymentsError
from domain.history import PaymentEvent

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

logger = logging.getLogger("loc_payments.streams")

Publish = Callable[[PaymentEvent], None]

# The sort-key prefix of every payment event (`domain.keys`).
EVENT_PREFIX = "HISTORY#"
# GetRecords' maximum, and how many rounds pass between two looks for new shards.
RECORDS_PER_CALL = 1000
DESCRIBE_EVERY = 10
# The longest wait between two tries while the stream cannot be read, in seconds.
MAX_RETRY_DELAY = 5.0
# The errors of an iterator that can no longer be used: open another one where it stood.
_STALE_ITERATOR = frozenset({"ExpiredIteratorException", "TrimmedDataAccessException"})
_GONE = "ResourceNotFoundException"


class ReadRounds(Protocol):
    """Told of a source's rounds of reads (the hub of live updates)."""

    def round_started(self) -> None: ...

    def round_finished(self) -> None:
        """The round last started read the stream to its head and published what it read."""
        ...


class ChangeSource(Protocol):
    """Where live payment events come from: `run` hands each new event to `publish` until it is
    cancelled, and tells `rounds` of its rounds of reads. The DynamoDB Stream of the table is one
    source; a Kinesis Data Streams source (the table's changes sent to Kinesis, for more readers
    than a DynamoDB Stream allows) would implement the same two members."""

    @property
    def healthy(self) -> bool:
        """False while the source cannot reach its stream (and before it first has)."""
        ...

    async def run(self, publish: Publish, rounds: ReadRounds | None = None) -> None: ...


class StreamMissing(RuntimeError):
    """The table has no stream: `create_table_if_missing` (or the template) turns it on."""


@dataclass(slots=True)
class _Shard:
    shard_id: str
    parent_id: str | None
    # Where a first iterator starts: LATEST for the shards open at start, else TRIM_HORIZON.
    start: str
    iterator: str | None = None
    last_sequence: str | None = None
    closed: bool = False


class DynamoDBStreamSource:
    """A `ChangeSource` polling the table's DynamoDB Stream (see the module's docstring)."""

    def __init__(
        self,
        dynamodb_client: DynamoDBClient,
        streams_client: Any,
        *,
        table_name: str,
        poll_interval: float,
        backoff: Backoff | None = None,
    ) -> None:
        self._dynamodb = dynamodb_client
        self._streams = streams_client
        self._table_name = table_name
        self._poll_interval = poll_interval
        self._backoff = backoff or Backoff(base=0.1, cap=MAX_RETRY_DELAY)
        self._stream_arn: str | None = None
        self._shards: dict[str, _Shard] = {}
        self._described = False  # the shards open at start are known
        self._describe_due = True
        self._healthy = False
        self._ready = asyncio.Event()

    @property
    def healthy(self) -> bool:
        return self._healthy

    @property
    def ready(self) -> asyncio.Event:
        """Set once every shard open at start has its iterator: writes from then on are seen."""
        return self._ready

    async def run(self, publish: Publish, rounds: ReadRounds | None = None) -> None:
        """Poll until cancelled. `publish` must not raise: what it raises ends the run."""
        failures = 0
        done = 0
        while True:
            try:
                if self._stream_arn is None or self._describe_due or done % DESCRIBE_EVERY == 0:
                    await self._describe()
                if rounds is not None:
                    rounds.round_started()
                at_head = await self._poll_round(publish)
                if rounds is not None and at_head:
                    rounds.round_finished()
            except (BotoCoreError, ClientError, StreamMissing) as error:
                self._healthy = False
                if isinstance(error, ClientError) and error.response["Error"]["Code"] == _GONE:
                    self._stream_arn = None  # the table or its stream was deleted: look again
                delay = min(MAX_RETRY_DELAY, self._backoff.delay(min(failures, 16)))
                failures += 1
                logger.warning("cannot read the stream of %s (%s)", self._table_name, error)
                await asyncio.sleep(delay)
                continue
            failures = 0
            done += 1
            self._healthy = True
            self._ready.set()
            await asyncio.sleep(self._poll_interval)

    def _due(self) -> list[_Shard]:
        """The shards to poll: open, and whose parent (if still known) is read to its end."""
        return [
            shard
            for shard in self._shards.values()
            if not shard.closed
            if shard.parent_id not in self._shards or self._shards[shard.parent_id].closed
        ]

    async def _describe(self) -> None:
        """Find the table's stream (once) and its shards; remember the new ones."""
        if self._stream_arn is None:
            table = (await self._dynamodb.describe_table(TableName=self._table_name))["Table"]
            if not table.get("StreamSpecification", {}).get("StreamEnabled", False):
                raise StreamMissing(f"the table {self._table_name} has no stream")
            self._stream_arn = table["LatestStreamArn"]
        first = not self._described
        listed: set[str] = set()
        page: dict[str, Any] = {}
        while True:
            answer = await self._streams.describe_stream(StreamArn=self._stream_arn, **page)
            description = answer["StreamDescription"]
            for found in description["Shards"]:
                shard_id = found["ShardId"]
                listed.add(shard_id)
                if shard_id in self._shards:
                    continue
                open_now = "EndingSequenceNumber" not in found["SequenceNumberRange"]
                self._shards[shard_id] = _Shard(
                    shard_id,
                    found.get("ParentShardId"),
                    start="LATEST" if first else "TRIM_HORIZON",
                    # What closed before we started is history, not news.
                    closed=first and not open_now,
                )
            if "LastEvaluatedShardId" not in description:
                break
            page = {"ExclusiveStartShardId": description["LastEvaluatedShardId"]}
        # Forget the closed shards the stream no longer lists (trimmed after 24 hours).
        self._shards = {
            shard_id: shard
            for shard_id, shard in self._shards.items()
            if shard_id in listed or not shard.closed
        }
        self._described = True
        self._describe_due = False
        if description["StreamStatus"] == "DISABLED" and not self._due():
            # Turned off, and read to its end: look for the table's next stream from now on.
            self._stream_arn = None

    async def _poll_round(self, publish: Publish) -> bool:
        """One call on every due shard; whether each was read to its head."""
        polls = [self._poll(shard, publish) for shard in self._due()]
        # Every shard's call finishes, whatever the others do; then the first failure counts.
        results = await asyncio.gather(*polls, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return all(results)

    async def _poll(self, shard: _Shard, publish: Publish) -> bool:
        """Whether the shard is read to its head: fewer records than asked, still open."""
        if shard.iterator is None:
            shard.iterator = await self._open(shard)
        try:
            answer = await self._streams.get_records(
                ShardIterator=shard.iterator, Limit=RECORDS_PER_CALL
            )
        except ClientError as error:
            if error.response["Error"]["Code"] not in _STALE_ITERATOR:
                raise
            shard.iterator = None  # re-opened after its last record in the next round
            return False
        for record in answer["Records"]:
            shard.last_sequence = record["dynamodb"]["SequenceNumber"]
            event = _event_of(record)
            if event is not None:
                publish(event)
        shard.iterator = answer.get("NextShardIterator")
        if shard.iterator is None:
            # Read to its end: its children (if any) come next.
            shard.closed = self._describe_due = True
            return False
        return len(answer["Records"]) < RECORDS_PER_CALL

    async def _open(self, shard: _Shard) -> str:
        where = {"ShardIteratorType": shard.start}
        if shard.last_sequence is not None:
            where = {
                "ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
                "SequenceNumber": shard.last_sequence,
            }
        try:
            answer = await self._streams.get_shard_iterator(
                StreamArn=self._stream_arn, ShardId=shard.shard_id, **where
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "TrimmedDataAccessException":
                raise
            # Down for longer than the stream keeps records: read what is left.
            logger.warning("stream records of shard %s were trimmed unread", shard.shard_id)
            answer = await self._streams.get_shard_iterator(
                StreamArn=self._stream_arn, ShardId=shard.shard_id, ShardIteratorType="TRIM_HORIZON"
            )
        iterator: str = answer["ShardIterator"]
        return iterator


def _event_of(record: dict[str, Any]) -> PaymentEvent | None:
    """The payment event a stream record inserted, if it did."""
    image = record["dynamodb"].get("NewImage")
    if record["eventName"] != "INSERT" or image is None:
        return None
    if not image.get(SK, {}).get("S", "").startswith(EVENT_PREFIX):
        return None
    try:
        return event_from_item(image)
    except (KeyError, ValueError, PaymentsError):
        logger.exception("skipped a payment event item that does not decode: %s", image[SK])
        return None
