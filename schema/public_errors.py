"""How errors reach the response.

`errors[]` carries three kinds of failure, each with `extensions.code`:
- caller refusals (`UNAUTHENTICATED`, `FORBIDDEN`);
- domain errors raised by a query field (`INVALID_INPUT` with the `field`, `NOT_FOUND`, ...);
- anything else, masked as "Unexpected error." and logged with its traceback.
GraphQL's own syntax and validation errors pass through as graphql-core words them.
"""

from __future__ import annotations

import re
from typing import Any

from graphql import GraphQLError

from domain.errors import InvalidInput, PaymentsError
from resolvers.errors import CallerError

__all__ = ["is_unexpected", "public_error"]

UNEXPECTED = "Unexpected error."


# graphql-core repeats a refused value ("Int cannot represent ... 4111111111111111"); a long
# digit run may be an account number, of which no response holds more than the last four.
_LONG_DIGITS = re.compile(r"[0-9](?:[ -]?[0-9]){12,}")


def _last_four_only(message: str) -> str:
    return _LONG_DIGITS.sub(lambda run: "…" + re.sub("[ -]", "", run.group())[-4:], message)


def is_unexpected(error: GraphQLError) -> bool:
    """An error the caller did not cause and we did not foresee: logged, and masked."""
    original = error.original_error
    if isinstance(original, PaymentsError):
        # The base class is DynamoDB refusing a request we built: a bug of ours.
        return original.code == PaymentsError.code
    return original is not None and not isinstance(original, (CallerError, GraphQLError))


def public_error(error: GraphQLError) -> GraphQLError:
    original = error.original_error
    if original is None or isinstance(original, GraphQLError):
        message = _last_four_only(error.message)
        if message == error.message:
            return error
        return _reworded(error, message, error.extensions)
    extensions: dict[str, Any]
    if is_unexpected(error):
        message = UNEXPECTED
        extensions = {"code": "INTERNAL"}
    else:
        assert isinstance(original, CallerError | PaymentsError)
        message = str(original)
        extensions = {"code": original.code}
        if isinstance(original, InvalidInput):
            extensions["field"] = original.field
    return _reworded(error, message, extensions)


def _reworded(error: GraphQLError, message: str, extensions: Any) -> GraphQLError:
    """The same error, where it was, in other words (and without its original exception)."""
    return GraphQLError(
        message,
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        extensions=extensions,
    )
