"""What the engine raises, as one tree: a caller catches a branch, or `EngineError` for all.

    EngineError
    ├── RequestError                  refused before its operation runs: nothing ran or was charged
    │   ├── DocumentRefused           the document policy's refusal, with its code
    │   ├── MalformedDocumentRequest  document fields of the wrong shape: HTTP 400
    │   ├── MissingQuery              no text to run: HTTP 400
    │   ├── NoSuchOperation           no operation of that name, or no name among several
    │   └── OperationTypeNotAllowed   a type the transport does not run (a GET mutation): 400, 405
    ├── Refusal                       the service's `Hooks.admit` (`hold`) refused the operation
    ├── ManifestsRefused              trusted documents a service cannot start with
    └── UntestedStrawberry            a Strawberry the adapter was not tested with (a RuntimeError)

`MissingQuery`, `NoSuchOperation`, `OperationTypeNotAllowed`: Strawberry's too (docs/engine.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from graphql import GraphQLError
from strawberry.exceptions import MissingQueryError
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError

__all__ = [
    "DocumentRefused",
    "EngineError",
    "MalformedDocumentRequest",
    "ManifestsRefused",
    "MissingQuery",
    "NoSuchOperation",
    "OperationTypeNotAllowed",
    "Problem",
    "Refusal",
    "RequestError",
    "UntestedStrawberry",
]


class EngineError(Exception):
    """Anything the engine raises on purpose."""


class RequestError(EngineError):
    """A request refused before its operation runs: a transport answers it."""


class DocumentRefused(RequestError):
    """A GraphQL request error: its code and words."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class MalformedDocumentRequest(RequestError):
    """A request envelope whose document fields are of the wrong shape (HTTP 400)."""


class MissingQuery(RequestError, MissingQueryError):
    """A request with no text to run (HTTP 400)."""


class NoSuchOperation(RequestError, CannotGetOperationTypeError):
    """No operation of the name asked for, or no name where the document holds several; its
    words are `as_http_error_reason()`."""


class OperationTypeNotAllowed(RequestError, InvalidOperationTypeError):
    """An operation whose type (`operation_type`) the transport does not run; its words are
    `as_http_error_reason(transport)`."""


class Refusal(EngineError):
    """An operation the service refused before it ran (`Hooks.admit`, a subscription's
    `Hooks.hold`): its `error`, and what its answer's `extensions` hold."""

    def __init__(self, error: GraphQLError, extensions: dict[str, Any] | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.extensions = extensions


@dataclass(frozen=True, slots=True)
class Problem:
    """What is wrong with a manifest (`engine.trusted_documents`): in which file, which entry."""

    source: str
    entry: str | None  # the document's id, or None: the file as a whole
    reason: str

    def __str__(self) -> str:
        where = self.source if self.entry is None else f"{self.source}: {self.entry}"
        return f"{where}: {self.reason}"


class ManifestsRefused(EngineError):
    """Manifests the service cannot start with: every problem, one per line."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        lines = "\n".join(f"  {problem}" for problem in self.problems)
        super().__init__(f"trusted documents refused (LOC_TRUSTED_DOCUMENTS):\n{lines}")


class UntestedStrawberry(EngineError, RuntimeError):
    """The installed Strawberry is not one `engine.strawberry_adapter` was tested with."""
