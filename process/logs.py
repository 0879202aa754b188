"""Logging: JSON lines through the standard `logging` module, or readable text on a terminal.

Loggers: `loc_payments.request` (one line per GraphQL request), `loc_payments.audit` (one event
per write), `loc_payments.graphql` (unexpected errors, with tracebacks). Nothing logs a token, a
request's variables, or more than the last four digits of an account number (inputs holding
one are refused before anything is logged).

Request lines and the audit lines of payment writes are written once per event-loop pass, after
that pass's answers are sent (their record of history is the stored events); any other line
writes them first, and a graceful stop flushes them (docs/operating.md, "Logs").
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import os
import sys
import time
from typing import Any, Literal, TextIO

import orjson
from pythonjsonlogger.orjson import OrjsonFormatter

__all__ = ["JsonHandler", "configure_logging", "log_info"]

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
        return self.time_text(record.created, record.msecs)

    def time_text(self, created: float, msecs: float) -> str:
        second, text = self._second
        if int(created) != second:
            text = time.strftime(self.default_time_format, self.converter(created))
            self._second = (int(created), text)
        milliseconds = self.default_msec_format
        if milliseconds == "%s,%03d":  # `logging.Formatter`'s: formatted without `%`'s parsing
            return f"{text},{int(msecs):03d}"
        return milliseconds % (text, msecs) if milliseconds else text


class JsonHandler(logging.StreamHandler[TextIO]):
    """The JSON lines' handler, which can also write a line without a `LogRecord` (`log_info`)."""

    formatter: JsonFormatter

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.setFormatter(
            JsonFormatter(JSON_FIELDS, rename_fields={"asctime": "time", "levelname": "level"})
        )
        self._descriptor = _utf8_descriptor(stream)
        # Lines made during this pass of the event loop, written together at its end.
        self._pending: list[bytes] = []
        self._flush_scheduled = False

    def setStream(self, stream: TextIO) -> TextIO | None:
        replaced = super().setStream(stream)
        self._descriptor = _utf8_descriptor(stream)
        return replaced

    def write_info(self, name: str, message: str, fields: dict[str, Any], created: float) -> None:
        """The line the formatter makes of an INFO record of logger `name` made at `created`,
        with `message` and `fields` (JSON values under text keys) as its `extra`: the same keys
        in the same order, in one orjson pass, its bytes written straight to the stream's file
        when it has one (each record through `emit` is flushed, so none waits in its buffer)."""
        msecs = int((created - int(created)) * 1000)  # as `LogRecord` reckons them
        line = {
            "time": self.formatter.time_text(created, msecs),
            "level": "INFO",
            "name": name,
            "message": message,
            **fields,
        }
        try:
            data = orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)
            if self._descriptor is None:
                with self.lock:  # type: ignore[union-attr]  # made by `Handler.__init__`
                    self.stream.write(data.decode())
                    self.stream.flush()
            else:
                self._write_after_pass(data)
        except RecursionError:  # as `StreamHandler.emit`
            raise
        except Exception:
            record = logging.makeLogRecord({"name": name, "msg": message, **fields})
            self.handleError(record)

    def emit(self, record: logging.LogRecord) -> None:
        """An audit line of a payment write waits for the pass's end as a request line does; any
        other line is written at once, after the lines waiting (so the order holds)."""
        if self._descriptor is not None and _after_pass(record):
            try:
                self._write_after_pass((self.format(record) + self.terminator).encode())
            except RecursionError:
                raise
            except Exception:
                self.handleError(record)
            return
        self.write_pending()
        super().emit(record)

    def flush(self) -> None:
        """The lines waiting, then the stream's buffer (`logging.shutdown` calls it at exit)."""
        self.write_pending()
        super().flush()

    def write_pending(self) -> None:
        """Write the lines waiting for the end of the event loop's pass, in one system call."""
        self._flush_scheduled = False
        if not self._pending:
            return
        with self.lock:  # type: ignore[union-attr]
            pending, self._pending = self._pending, []
            assert self._descriptor is not None  # lines wait only when written to a file
            _write_all(self._descriptor, b"".join(pending))

    def _write_after_pass(self, data: bytes) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._pending.append(data)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a command, a job's thread): at once
            self.write_pending()
            return
        if not self._flush_scheduled:
            self._flush_scheduled = True
            # Called in the loop's next pass: after every callback of this one, the writes of
            # this pass's answers to their sockets included.
            loop.call_soon(self.write_pending)


def _after_pass(record: logging.LogRecord) -> bool:
    """A line that may wait for the pass's end: a payment write's audit line (its event is
    stored in the same transaction as the write)."""
    return record.name == "loc_payments.audit" and str(getattr(record, "event", "")).startswith(
        "payment."
    )


def _utf8_descriptor(stream: TextIO) -> int | None:
    """The file descriptor under `stream`, if it has one and writes UTF-8 (as orjson does)."""
    if codecs.lookup(getattr(stream, "encoding", None) or "ascii").name != "utf-8":
        return None
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def log_info(logger: logging.Logger, message: str, fields: dict[str, Any]) -> None:
    """`logger.info(message, extra=fields)`. When the one handler its lines reach is the JSON
    handler (the running service's, but not under pytest, whose capture adds its own), the line
    is written without a `LogRecord`: making the record, finding its caller and passing it from
    logger to handler to formatter was most of the request log's cost (docs/performance.md)."""
    if not logger.isEnabledFor(logging.INFO):
        return
    handler = _sole_json_handler(logger)
    if handler is None:
        logger.info(message, extra=fields, stacklevel=2)
    else:
        handler.write_info(logger.name, message, fields, time.time())


def _sole_json_handler(logger: logging.Logger) -> JsonHandler | None:
    """The handler `logger`'s INFO lines reach, if they reach one alone and it is a JSON
    handler without filters (as `Logger.callHandlers` walks the loggers)."""
    found: JsonHandler | None = None
    current: logging.Logger | None = logger
    while current is not None:
        if current.filters:
            return None
        for handler in current.handlers:
            if found is not None or not isinstance(handler, JsonHandler):
                return None
            found = handler
        if not current.propagate:
            break
        current = current.parent
    if found is None or found.filters or found.level > logging.INFO:
        return None
    return found


def configure_logging(
    *, log_format: LogFormat, local: bool, level: str = "INFO", stream: TextIO | None = None
) -> logging.Handler:
    """One handler on the root logger; `auto` is text for a person (local, on a terminal) and
    JSON for everything that collects logs."""
    stream = stream or sys.stderr
    if log_format == "auto":
        log_format = "text" if local and stream.isatty() else "json"
    handler: logging.Handler
    if log_format == "json":
        handler = JsonHandler(stream)
    else:
        handler = logging.StreamHandler(stream)
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
