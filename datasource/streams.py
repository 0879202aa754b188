"""Live payment events from the table's DynamoDB Stream, for GraphQL subscriptions.

`DynamoDBStreamSource.run` follows every shard of the stream, children after their parents, and
hands its `StreamSink` each INSERT of an event item (sort key ``HISTORY#``) as a `PaymentEvent`,
in the order each payment's were written, together with the shard's new `ShardPosition`: a sink
that keeps both in one step can hand the reading over to a process that resumes there
(`positions`). A delivery the sink refuses is offered again; the sink hears when each round begins
and when one has read every shard to its head. Everything else the stream carries is skipped.
With a tracer each event is a span linked to the write. A failure marks the source unhealthy and
the round is tried again, with a capped backoff, until cancelled.

How it reads, and why: docs/live-updates.md#reading-the-stream.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from datasource import tracing
from datasource.batch import Backoff
from datasource.errors import SinkRefused, StreamMissing, error_code
from datasource.history import event_from_item
from datasource.table import SK
from domain.errors import PaymentsError
from domain.history import PaymentEvent

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = ["ChangeSource", "DynamoDBStreamSource", "Received", "ShardPosition", "SinkRefused"]

logger = logging.getLogger("loc_payments.streams")


@dataclass(frozen=True, slots=True)
class ShardPosition:
    """Where a reader stands in a shard: after `sequence` (the last record it read), or at
    `iterator` (an iterator not yet used, while the shard gave no record: valid 15 minutes);
    `closed` once read to its end."""

    sequence: str | None = None
    iterator: str | None = None
    closed: bool = False


@dataclass(frozen=True, slots=True)
class Received:
    """A payment event read from the stream: decoded, as its item was stored, and the record's
    sequence number."""

    event: PaymentEvent
    image: dict[str, Any]
    sequence: str


class StreamSink(Protocol):
    """Where a source's reads go (see the module's docstring)."""

    async def round_started(self) -> None: ...

    async def deliver(
        self, shard_id: str, events: Sequence[Received], position: ShardPosition
    ) -> None:
        """The events one call read from `shard_id`, in order, and where the shard stands after
        them. Raising refuses them: the source reads them again."""
        ...

    async def round_finished(self) -> None:
        """The round last started read the stream to its head and delivered what it read."""
        ...


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


class ChangeSource(Protocol):
    """Where live payment events come from: `run` hands what it reads to `sink` until it is
    cancelled. The DynamoDB Stream of the table is one source; a Kinesis Data Streams source
    (the table's changes sent to Kinesis) would implement the same two members."""

    @property
    def healthy(self) -> bool:
        """False while the source cannot reach its stream (and before it first has)."""
        ...

    async def run(self, sink: StreamSink) -> None: ...


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
        tracer: Tracer | None = None,
        positions: Mapping[str, ShardPosition] | None = None,
    ) -> None:
        """With a tracer, each event read is a span linked to its write (`tracing.received`).
        `positions` (a checkpoint of another reader's, by shard id) resumes where that reader
        stood: a shard it holds is read from there, a shard it does not whose parent it holds is
        new (read from its start), any other is placed as at a first start."""
        self._dynamodb = dynamodb_client
        self._tracer = tracer
        self._streams = streams_client
        self._table_name = table_name
        self._poll_interval = poll_interval
        self._backoff = backoff or Backoff(base=0.1, cap=MAX_RETRY_DELAY)
        self._stream_arn: str | None = None
        self._shards: dict[str, _Shard] = {}
        self._resumed = dict(positions or {})
        self._resumed_parents = frozenset(self._resumed)
        self._described = False  # the shards open at start are known
        self._describe_due = True
        self._healthy = False
        self._ready = asyncio.Event()
        # When a round last read every shard to its head (monotonic); the start until then.
        self._at_head = time.monotonic()

    @property
    def healthy(self) -> bool:
        return self._healthy

    @property
    def seconds_behind(self) -> float:
        """Seconds since a round last read every shard to its head: about the poll interval
        while the reader keeps up, growing while it falls behind or cannot read."""
        return time.monotonic() - self._at_head

    @property
    def ready(self) -> asyncio.Event:
        """Set once every shard open at start has its iterator: writes from then on are seen."""
        return self._ready

    async def run(self, sink: StreamSink) -> None:
        """Poll until cancelled. What the sink raises, but `SinkRefused`, ends the run."""
        failures = 0
        done = 0
        while True:
            try:
                if self._stream_arn is None or self._describe_due or done % DESCRIBE_EVERY == 0:
                    await self._describe()
                await sink.round_started()
                if await self._poll_round(sink):
                    self._at_head = time.monotonic()
                    await sink.round_finished()
            except (BotoCoreError, ClientError, StreamMissing, SinkRefused) as error:
                self._healthy = False
                if isinstance(error, ClientError) and error_code(error) == _GONE:
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
                self._shards[shard_id] = self._placed(
                    shard_id, found.get("ParentShardId"), first=first, open_now=open_now
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

    def _placed(
        self, shard_id: str, parent_id: str | None, *, first: bool, open_now: bool
    ) -> _Shard:
        """A shard found by `_describe`: where its reading starts."""
        resumed = self._resumed.pop(shard_id, None)
        if resumed is not None:
            # Without a sequence the shard gave its reader no record: its iterator, if still
            # valid, else from now (what came before that reader's start is history).
            return _Shard(
                shard_id,
                parent_id,
                start="LATEST",
                iterator=None if resumed.sequence else resumed.iterator,
                last_sequence=resumed.sequence,
                closed=resumed.closed,
            )
        if first and parent_id is not None and parent_id in self._resumed_parents:
            return _Shard(shard_id, parent_id, start="TRIM_HORIZON")
        return _Shard(
            shard_id,
            parent_id,
            start="LATEST" if first else "TRIM_HORIZON",
            # What closed before we started is history, not news.
            closed=first and not open_now,
        )

    async def _poll_round(self, sink: StreamSink) -> bool:
        """One call on every due shard; whether each was read to its head."""
        polls = [self._poll(shard, sink) for shard in self._due()]
        # Every shard's call finishes, whatever the others do; then the first failure counts.
        results = await asyncio.gather(*polls, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return all(results)

    async def _poll(self, shard: _Shard, sink: StreamSink) -> bool:
        """Whether the shard is read to its head: fewer records than asked, still open."""
        if shard.iterator is None:
            shard.iterator = await self._open(shard)
        try:
            answer = await self._streams.get_records(
                ShardIterator=shard.iterator, Limit=RECORDS_PER_CALL
            )
        except ClientError as error:
            if error_code(error) not in _STALE_ITERATOR:
                raise
            shard.iterator = None  # re-opened after its last record in the next round
            return False
        records = answer["Records"]
        received = []
        for record in records:
            event = _event_of(record)
            if event is not None:
                sequence = record["dynamodb"]["SequenceNumber"]
                with tracing.received(
                    self._tracer, event, table_name=self._table_name, sequence_number=sequence
                ):
                    received.append(Received(event, record["dynamodb"]["NewImage"], sequence))
        last_sequence = (
            records[-1]["dynamodb"]["SequenceNumber"] if records else shard.last_sequence
        )
        next_iterator = answer.get("NextShardIterator")
        await sink.deliver(
            shard.shard_id,
            received,
            ShardPosition(
                sequence=last_sequence,
                iterator=next_iterator,
                closed=next_iterator is None,
            ),
        )
        # Delivered: only now does the shard move on (a refused delivery is read again).
        shard.last_sequence, shard.iterator = last_sequence, next_iterator
        if next_iterator is None:
            # Read to its end: its children (if any) come next.
            shard.closed = self._describe_due = True
            return False
        return len(records) < RECORDS_PER_CALL

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
            if error_code(error) != "TrimmedDataAccessException":
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
