"""What the service may do to DynamoDB, and what it does, as IAM sees both.

`SERVICE_GRANTS` is the least privilege of the serving process in AWS: the IAM actions it needs
on each resource of its one table (the table, each index, the stream). The stack's task role is
built from it (`infra.stack`).

`record_operations` hooks a client so that each call it makes is written down as the IAM
actions it needs on those resources (a transaction needs its items' `PutItem`, `UpdateItem`,
`DeleteItem`, `ConditionCheckItem`; IAM has no `TransactWriteItems`). The test suite records
every call of every service it runs (`LOC_AWS_OPERATION_LOG`) and checks, at its end, that each
is granted and that every grant was used (`tests/least_privilege.py`).

A call is made *as* a role: `service` unless the caller says otherwise with `acting_as`, as the
local table's creation (`local-setup`, never made in AWS) and the operators' jobs do.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from contextvars import Context, ContextVar
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from datasource.table import GSI1, GSI2, GSI3, GSI4

__all__ = [
    "COLLECT_JOB",
    "LOCAL_SETUP",
    "RESHARD_JOB",
    "SERVICE",
    "SERVICE_GRANTS",
    "STREAM",
    "TABLE",
    "Grant",
    "Operation",
    "acting_as",
    "carry_role",
    "granted",
    "operations_of",
    "record_operations",
    "required",
]

SERVICE = "service"
LOCAL_SETUP = "local-setup"
COLLECT_JOB = "collect-job"
RESHARD_JOB = "reshard-job"
# The resources of the one table, as a policy's statements name them.
TABLE = "table"
STREAM = "stream"


def index(name: str) -> str:
    return f"index/{name}"


@dataclass(frozen=True, slots=True)
class Grant:
    resource: str  # TABLE, index(<name>) or STREAM
    actions: tuple[str, ...]


SERVICE_GRANTS: tuple[Grant, ...] = (
    Grant(
        TABLE,
        (
            # Reads: a payment, a batch of them, a user's or a loan's pages (PK = USER#…).
            "dynamodb:GetItem",
            "dynamodb:BatchGetItem",
            "dynamodb:Query",
            # Writes, alone or as the items of a transaction (webhook endpoints are deleted).
            # No ConditionCheckItem: every condition sits on an item the transaction writes.
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            # Webhook attempts and retries, written plainly in batches.
            "dynamodb:BatchWriteItem",
            # Readiness, the breaker's probe, and finding the stream.
            "dynamodb:DescribeTable",
        ),
    ),
    *(Grant(index(name), ("dynamodb:Query",)) for name in (GSI1, GSI2, GSI3, GSI4)),
    Grant(STREAM, ("dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords")),
)


@dataclass(frozen=True, slots=True, order=True)
class Operation:
    """An IAM action on a resource, made as a role."""

    role: str
    action: str
    resource: str


def granted(grants: tuple[Grant, ...]) -> set[tuple[str, str]]:
    """(action, resource) pairs the grants allow."""
    return {(action, grant.resource) for grant in grants for action in grant.actions}


_role: ContextVar[str] = ContextVar("aws_role", default=SERVICE)

_ITEM_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
_STREAM_OPERATIONS = frozenset({"DescribeStream", "GetShardIterator", "GetRecords"})


@contextlib.contextmanager
def acting_as(role: str) -> Iterator[None]:
    """Calls made in the block (and the tasks it starts) are recorded as `role`'s."""
    token = _role.set(role)
    try:
        yield
    finally:
        _role.reset(token)


def carry_role(context: Context) -> None:
    """Calls made in `context` (a fresh one, as a coalesced lookup's) are made as the current
    role."""
    context.run(_role.set, _role.get())


def required(operation: str, params: Mapping[str, Any], *, table_name: str) -> set[tuple[str, str]]:
    """The (IAM action, resource) pairs a call of `operation` with `params` needs. A table
    other than `table_name` is named in full (`table:<name>`): no grant covers it."""

    def table(name: str) -> str:
        return TABLE if name == table_name else f"table:{name}"

    if operation in ("TransactWriteItems", "TransactGetItems"):
        return {
            (f"dynamodb:{_ITEM_ACTIONS[kind]}", table(request["TableName"]))
            for entry in params["TransactItems"]
            for kind, request in entry.items()
        }
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return {(f"dynamodb:{operation}", table(name)) for name in params["RequestItems"]}
    if operation in _STREAM_OPERATIONS:
        return {(f"dynamodb:{operation}", STREAM)}
    if "TableName" not in params:
        return {(f"dynamodb:{operation}", "*")}
    where = table(params["TableName"])
    if params.get("IndexName"):
        on_index = index(params["IndexName"])
        where = on_index if where == TABLE else f"{where}/{on_index}"
    return {(f"dynamodb:{operation}", where)}


def record_operations(client: Any, *, log_directory: Path, table_name: str) -> None:
    """Append each distinct operation `client` makes to `<log_directory>/<pid>.jsonl`."""
    seen: set[Operation] = set()
    path = log_directory / f"{os.getpid()}.jsonl"

    def record(params: Mapping[str, Any], model: Any, **_: Any) -> None:
        role = _role.get()
        new = [
            Operation(role, action, resource)
            for action, resource in required(model.name, params, table_name=table_name)
            if Operation(role, action, resource) not in seen
        ]
        if not new:
            return
        seen.update(new)
        log_directory.mkdir(parents=True, exist_ok=True)
        with path.open("a") as log:
            log.writelines(json.dumps(asdict(operation)) + "\n" for operation in new)

    client.meta.events.register(
        "before-parameter-build", record, unique_id="loc-payments-operation-log"
    )


def operations_of(log_directory: Path) -> set[Operation]:
    """Every operation recorded under `log_directory`, by any process."""
    return {
        Operation(**json.loads(line))
        for path in sorted(log_directory.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line
    }
