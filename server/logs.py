"""Logging: JSON lines through the standard `logging` module, or readable text on a terminal.

Loggers: `loc_payments.request` (one line per GraphQL request), `loc_payments.audit` (one event
per write), `loc_payments.graphql` (unexpected errors, with tracebacks). Nothing logs a token, a
request's variables, or more than the last four digits of an account number (inputs holding
one are refused before anything is logged).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, Literal, TextIO

from pythonjsonlogger.orjson import OrjsonFormatter

LogFormat = Literal["auto", "json", "text"]

TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(message)s"


class JsonFormatter(OrjsonFormatter):
    """python-json-logger's formatter, on orjson, with each second's `time` text made once.

    `logging.Formatter.formatTime` converts and formats the whole date for every line; lines of
    the same second differ only in their milliseconds. The text is the same:
    `2026-12-02 07:43:25,209`, local time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # (the second, its text): one tuple, so that a thread reads both of the same second.
        self._second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second, text = self._second
        if int(record.created) != second:
            text = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = (int(record.created), text)
        milliseconds = self.default_msec_format
        return milliseconds % (text, record.msecs) if milliseconds else text


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
