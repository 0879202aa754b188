"""GraphQL over HTTP, as the GraphQL Foundation's specification says (SPEC §13): the media type
of an answer, what a request's envelope must hold, and the status of every answer.

`negotiate` picks the answer's media type from `Accept` (application/graphql-response+json when
asked for, preferred at equal `q`; else application/json, whatever the header says);
`post_envelope` and `get_envelope` read a request's envelope, raising `Refused` with its status
(400, 405, 413) when it is malformed; `answer` gives an executed or refused operation its status
(a refusal before execution: 200 in application/json, 400 in graphql-response+json) and body.
Every answer, refusals included, is a GraphQL response in JSON: `{"errors": [{"message"}]}` when
nothing ran.

The status of every answer: docs/protocols.md#http-and-websocket.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from strawberry.types import ExecutionResult
from strawberry.types.execution import PreExecutionError

from server.errors import Refused

__all__ = [
    "GRAPHQL_RESPONSE",
    "JSON",
    "Envelope",
    "answer",
    "envelope",
    "get_envelope",
    "negotiate",
    "post_envelope",
    "refused_answer",
]

JSON = "application/json"
GRAPHQL_RESPONSE = "application/graphql-response+json"
# The request fields, the JSON types each may have (null aside), and the words of a refusal.
_FIELDS: dict[str, tuple[type, str]] = {
    "query": (str, "The GraphQL operation's `query` must be a string or null, if provided."),
    "operationName": (
        str,
        "The GraphQL operation's `operationName` must be a string or null, if provided.",
    ),
    "variables": (
        dict,
        "The GraphQL operation's `variables` must be an object or null, if provided.",
    ),
    "extensions": (
        dict,
        "The GraphQL operation's `extensions` must be an object or null, if provided.",
    ),
    # A trusted document by id (`engine.document_policy`): the working group's and Relay's.
    "documentId": (str, "The `documentId` must be a string or null, if provided."),
    "doc_id": (str, "The `doc_id` must be a string or null, if provided."),
}


@dataclass(frozen=True, slots=True)
class Envelope:
    """A request's GraphQL parameters, each of the type the specification gives it."""

    query: str | None
    operation_name: str | None
    variables: dict[str, Any] | None
    extensions: dict[str, Any] | None
    document_id: str | None = None
    doc_id: str | None = None


@functools.lru_cache(maxsize=256)
def negotiate(accept: str | None) -> str:
    """The media type of the answer to a request with this `Accept` header."""
    best, best_rank = JSON, (0.0, -1)
    for media_range in (accept or "").split(","):
        media_type, *parameters = media_range.split(";")
        kind = media_type.strip().lower()
        if kind == GRAPHQL_RESPONSE:
            candidate, specificity = GRAPHQL_RESPONSE, 2
        elif kind == JSON:
            candidate, specificity = JSON, 1
        elif kind in ("*/*", "application/*"):
            candidate, specificity = JSON, 0
        else:
            continue
        rank = (_quality(parameters), specificity)
        if rank[0] > 0 and rank > best_rank:
            best, best_rank = candidate, rank
    return best


def _quality(parameters: list[str]) -> float:
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "q":
            try:
                return min(max(float(value), 0.0), 1.0)
            except ValueError:
                return 0.0
    return 1.0


def envelope(data: object) -> Envelope:
    """The envelope of a decoded JSON body (or WebSocket `subscribe` payload)."""
    if isinstance(data, list):
        raise Refused(400, "Batching is not enabled")
    if not isinstance(data, dict):
        raise Refused(400, "The request body must be a JSON object")
    for name, (kind, refusal) in _FIELDS.items():
        value = data.get(name)
        if value is not None and not isinstance(value, kind):
            raise Refused(400, refusal)
    return Envelope(
        query=data.get("query"),
        operation_name=data.get("operationName"),
        variables=data.get("variables"),
        extensions=data.get("extensions"),
        document_id=data.get("documentId"),
        doc_id=data.get("doc_id"),
    )


def post_envelope(content_type: str | None, body: bytes) -> Envelope:
    """The envelope of a POST: only a JSON body is an operation (no form can post one)."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type != JSON:
        raise Refused(400, "Unsupported content type")
    return envelope(_json(body, "Unable to parse request body as JSON"))


def get_envelope(parameters: Mapping[str, str]) -> Envelope:
    """The envelope of a GET: `variables` and `extensions` are JSON in the query string."""
    data: dict[str, object] = dict(parameters)
    for name in ("variables", "extensions"):
        if name in data:
            data[name] = _json(parameters[name].encode(), _FIELDS[name][1])
    return envelope(data)


def _json(body: bytes, refusal: str) -> object:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise Refused(400, refusal) from None


def answer(result: ExecutionResult, media_type: str) -> tuple[int, dict[str, object]]:
    """The status and GraphQL response of an operation's result. A result refused before it
    ran (`PreExecutionError`) has no `data` entry."""
    response: dict[str, object] = {}
    started = not isinstance(result, PreExecutionError)
    if started:
        response["data"] = result.data
    if result.errors:
        response["errors"] = [error.formatted for error in result.errors]
    if result.extensions:
        response["extensions"] = result.extensions
    return request_error_status(media_type) if not started else 200, response


def request_error_status(media_type: str) -> int:
    """A GraphQL request error (nothing executed): 200 under application/json, as before the
    specification's watershed; 400 under application/graphql-response+json."""
    return 400 if media_type == GRAPHQL_RESPONSE else 200


def refusal(message: str, code: str | None = None) -> dict[str, object]:
    error: dict[str, object] = {"message": message}
    if code is not None:
        error["extensions"] = {"code": code}
    return {"errors": [error]}


def refused_answer(refused: Refused, media_type: str) -> tuple[int, dict[str, object]]:
    """The status and body of `refused`'s answer in `media_type`."""
    status = request_error_status(media_type) if refused.status is None else refused.status
    body = refusal(refused.message, refused.code)
    if refused.error is not None:
        body = {"errors": [{"message": refused.message, "extensions": dict(refused.error)}]}
    if refused.extensions is not None:
        body["extensions"] = dict(refused.extensions)
    return status, body
