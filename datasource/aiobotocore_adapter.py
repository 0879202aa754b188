"""DynamoDB's successful answers decoded by orjson, without botocore's shape walker.

For the data operations of `FAST_OPERATIONS`, a successful answer is `orjson.loads` of the body
as it is (attribute values stay `{"S": ...}` / `{"N": "..."}` for `datasource.items`); error
answers, the control plane and any other operation keep botocore's parsing exactly. The parser
comes in through the session's `response_parser_factory` component (`fast_session`, which also
shares one loader of botocore's data files between sessions). This is the one module that names
aiobotocore's and botocore's private attributes; `check_fast_parsing` refuses a client without
the parser or an aiobotocore outside `TESTED_RELEASE`, so an upgrade that moves the hook stops
the service at start instead of leaving it slow.

Why: docs/performance.md#what-makes-the-service-fast ("decoded by orjson").
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import aiobotocore
import orjson
from aiobotocore.parsers import AioJSONParser, AioResponseParserFactory
from aiobotocore.session import AioSession
from botocore.loaders import Loader, create_loader

from datasource.errors import FastParsingMissing

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

__all__ = ["check_fast_parsing", "fast_session", "verifies_tls"]

# The operations whose successful answers are items, keys, counts and capacity: plain JSON.
FAST_OPERATIONS = frozenset(
    {
        "BatchGetItem",
        "BatchWriteItem",
        "DeleteItem",
        "GetItem",
        "PutItem",
        "Query",
        "Scan",
        "TransactGetItems",
        "TransactWriteItems",
        "UpdateItem",
    }
)
_PARSER_FACTORY = "response_parser_factory"
_DATA_LOADER = "data_loader"
# The release line whose private names this module reads (pyproject.toml bounds it too).
TESTED_RELEASE = "2.25."
_JSON_PROTOCOL = "json"


class DynamoDBJSONParser(AioJSONParser):  # type: ignore[misc]
    async def _do_parse(self, response: dict[str, Any], shape: Any) -> dict[str, Any]:
        body = response["body"]
        if response["context"].get("operation_name") not in FAST_OPERATIONS or not isinstance(
            body, bytes
        ):
            parsed: dict[str, Any] = await super()._do_parse(response, shape)
            return parsed
        parsed = orjson.loads(body) if body else {}
        self._inject_response_metadata(parsed, response["headers"])
        return parsed


class DynamoDBParserFactory(AioResponseParserFactory):  # type: ignore[misc]
    """One `DynamoDBJSONParser` for every answer. aiobotocore asks for a parser per response, and
    a botocore parser holds a bound method of itself (its event-stream parser's blob parser): a
    cycle per call, left to the garbage collector. A parser keeps nothing of a response (its
    attributes are set once, from the defaults), so one serves them all."""

    def __init__(self) -> None:
        super().__init__()
        self._json_parser: DynamoDBJSONParser | None = None

    def set_parser_defaults(self, **kwargs: Any) -> None:
        super().set_parser_defaults(**kwargs)
        self._json_parser = None  # made again with the new defaults

    def create_parser(self, protocol_name: str) -> Any:
        if protocol_name != _JSON_PROTOCOL:
            return super().create_parser(protocol_name)
        if self._json_parser is None:
            self._json_parser = DynamoDBJSONParser(**self._defaults)
        return self._json_parser


# One loader for every session of the process (per AWS_DATA_PATH, as botocore makes it): a
# botocore session otherwise reads and decodes its JSON files again (endpoints, partitions,
# DynamoDB's service model: most of the time it takes to open a client), which the tests and the
# bench pay for each app they start. A loader reads only the data files and caches what it
# decoded.
@functools.cache
def _shared_loader(data_path: str | None) -> Loader:
    return create_loader(data_path)


def fast_session() -> AioSession:
    """A botocore session whose clients decode DynamoDB's data answers with `DynamoDBJSONParser`,
    on the process's one loader of botocore's data files."""
    session = AioSession()
    session.register_component(_PARSER_FACTORY, DynamoDBParserFactory())
    session.register_component(
        _DATA_LOADER, _shared_loader(session.get_config_variable("data_path"))
    )
    return session


def check_fast_parsing(client: DynamoDBClient) -> None:
    """Refuse a client whose answers would not go through `DynamoDBJSONParser`, or an aiobotocore
    of a release line this module was not tested with."""
    if not aiobotocore.__version__.startswith(TESTED_RELEASE):
        raise FastParsingMissing(
            f"aiobotocore {aiobotocore.__version__} is not of the release line "
            f"{TESTED_RELEASE}x that datasource/aiobotocore_adapter.py was tested with: check "
            "the private names it reads, then update TESTED_RELEASE"
        )
    factory = getattr(getattr(client, "_endpoint", None), "_response_parser_factory", None)
    parser = factory.create_parser(_JSON_PROTOCOL) if factory is not None else None
    if not isinstance(parser, DynamoDBJSONParser):
        raise FastParsingMissing(
            "the DynamoDB client does not use the service's response parser (aiobotocore's "
            "response_parser_factory hook moved?): check datasource/aiobotocore_adapter.py "
            "against the installed aiobotocore"
        )


def verifies_tls(client: DynamoDBClient) -> bool:
    """Whether the client checks the endpoint's certificate (aiobotocore's http session keeps
    botocore's `verify`: the CA bundle's path, or False)."""
    session = getattr(getattr(client, "_endpoint", None), "http_session", None)
    return bool(getattr(session, "_verify", True))
