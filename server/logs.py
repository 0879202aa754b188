"""Logging: JSON lines through the standard `logging` module, or readable text on a terminal.

Loggers: `loc_payments.request` (one line per GraphQL request), `loc_payments.audit` (one event
per write), `loc_payments.graphql` (unexpected errors, with tracebacks). Nothing logs a token, a
request's variables, or more than the last four digits of an account number (inputs holding
one are refused before anything is logged).
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

from pythonjsonlogger.orjson import OrjsonFormatter as JsonFormatter

LogFormat = Literal["auto", "json", "text"]

TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(message)s"


def configure_logging(
    *, log_format: LogFormat, local: bool, level: str = "INFO", stream: TextIO | None = None
) -> logging.Handler:
    """One handler on the root logger; `auto` is text for a person (local, on a terminal) and
    JSON for everything that collects logs."""
    stream = stream or sys.stderr
    if log_format == "auto":
        log_format = "text" if local and stream.isatty() else "json"
    handler = logging.StreamHandler(stream)
    if log_format == "json":
        handler.setFormatter(
            JsonFormatter(JSON_FIELDS, rename_fields={"asctime": "time", "levelname": "level"})
        )
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    # No line prints a thread or a process (the JSON fields are above, the text format names
    # none): two of the logging HOWTO's "Optimization" switches, which save every record the
    # work of finding them. The caller's file and line stay, for handlers that show them
    # (pytest's, in a failing test's captured log).
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
