"""Logging: structlog, one JSON object per line (or coloured console lines), no secrets.

:func:`configure_logging` is called once by the composition root. The standard library's
loggers (uvicorn, granian, litestar, redis) are routed through the same processors, so every
line on stdout has the same shape: ``{"event", "level", "timestamp", "logger", "request_id",
...}``. A processor masks values under secret-looking keys and passwords inside URLs, so a
mistaken ``log.info("x", token=...)`` does not leak. Request bodies are never logged (the
access log in :mod:`gpu_advisor.api.middleware` logs method, route, status and duration).

Tracebacks are rendered WITHOUT stack-frame locals, in both formats: a frame's locals hold the
ASGI scope (the ``Authorization`` and ``Cookie`` headers) and the request body, so structlog's
defaults -- ``dict_tracebacks`` and the Rich console traceback both show locals (structlog
``tracebacks.SHOW_LOCALS = True``, ``dev.RichTracebackFormatter.show_locals = True``) -- would
write them to the log. A traceback keeps the file, line, function and exception message.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import sys
from collections.abc import MutableMapping
from typing import IO, Any, Final

import msgspec
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

_SECRET_KEY = re.compile(r"token|secret|password|passwd|authorization|cookie|api_?key", re.I)
_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s]+(?P<tail>@)", re.I)
# A query string of a URL: presigned-URL signatures and ?token= values are secrets.
_URL_QUERY = re.compile(r"(?P<url>[a-z][a-z0-9+.-]*://[^\s?#]*\?)(?P<query>[^\s#\"']*)", re.I)
_QUERY_VALUE = re.compile(r"=[^&;]*")
MASK: Final = "***"

# Loggers of libraries that would otherwise keep their own handlers and formats.
_LIBRARY_LOGGERS: Final = (
    "uvicorn",
    "uvicorn.error",
    "uvicorn.access",
    "_granian",
    "granian.access",
    "litestar",
    "py.warnings",
)


@functools.lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    # Log keys are a small fixed set: each is matched once.
    return _SECRET_KEY.search(key) is not None


def _is_secret(key: object, value: object) -> bool:
    # An absent value (None) is no secret: the settings line shows "admin_token": null when
    # unset and "***" when set.
    return value is not None and _secret_key(str(key))


def _mask_url_password(value: str) -> str:
    """``scheme://user:password@host`` -> ``scheme://user:***@host``, and every value of a
    URL's query string masked (``?X-Amz-Signature=***&token=***``: presigned URLs carry their
    credentials there); the substring tests skip the regexes for the strings that cannot hold
    a URL (almost all of them)."""
    if "://" not in value:
        return value
    if "@" in value:
        value = _URL_PASSWORD.sub(rf"\g<head>{MASK}\g<tail>", value)
    if "?" in value:
        value = _URL_QUERY.sub(_mask_query, value)
    return value


def _mask_query(match: re.Match[str]) -> str:
    return match["url"] + _QUERY_VALUE.sub(f"={MASK}", match["query"])


def redact_secrets(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """structlog processor: mask values under secret-looking keys and URL passwords."""
    for key, value in list(event_dict.items()):
        if _is_secret(key, value):
            event_dict[key] = MASK
        elif isinstance(value, str):
            event_dict[key] = _mask_url_password(value)
        elif isinstance(value, MutableMapping):
            event_dict[key] = _redact_mapping(value)
    return event_dict


def _redact_mapping(mapping: MutableMapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if _is_secret(key, value):
            out[key] = MASK
        elif isinstance(value, str):
            out[key] = _mask_url_password(value)
        else:
            out[key] = value
    return out


JSON_TRACEBACKS: Final = structlog.processors.ExceptionRenderer(
    structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
)
"""``exc_info`` -> a structured ``exception`` field (frames: file, line, function), no locals."""


def _drop_color_message(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """uvicorn adds a duplicate ``color_message`` with ANSI codes; drop it."""
    event_dict.pop("color_message", None)
    return event_dict


_LINE_ENCODER = msgspec.json.Encoder(enc_hook=repr)


def json_line(event_dict: EventDict, **_: Any) -> str:
    """One log line's JSON (structlog ``JSONRenderer``'s serializer): msgspec, about 4 us less
    per line than the standard library's ``json.dumps``; a value msgspec cannot encode is
    written as its ``repr`` (as structlog's own fallback does), NaN and infinities as
    ``null`` (strict JSON, which ``json.dumps`` is not), ``bytes`` in base64 (msgspec's
    encoding of them).

    A string msgspec refuses -- a lone surrogate, which an environment variable or file name
    with a non-UTF-8 byte decodes to (``surrogateescape``) -- sends the line through
    ``json.dumps``, which escapes it: a log line must never fail the code that logs it.
    """
    try:
        return _LINE_ENCODER.encode(event_dict).decode()
    except UnicodeEncodeError:
        return json.dumps(event_dict, default=repr)


class NamedWriteLogger(structlog.WriteLogger):
    """structlog's ``WriteLogger`` (one rendered line per call, written and flushed under a
    per-file lock) with the ``name`` that ``structlog.stdlib.add_logger_name`` reads, so the
    service's lines carry ``"logger"`` as the standard library's do."""

    def __init__(self, file: IO[str], name: str | None) -> None:
        super().__init__(file)  # type: ignore[arg-type]
        self.name = name


def configure_logging(
    level: str = "info", fmt: str = "json", stream: IO[str] | None = None
) -> None:
    """Configure structlog and the standard library's root logger (process-wide, once).

    Two paths write to the same stream with the same processors:

    * the service's own loggers (:func:`get_logger`) are structlog-native: a filtering bound
      logger (a call below ``level`` returns at once) writing rendered lines straight to
      ``stream`` -- about half the cost of a line through the standard library's
      ``LogRecord`` and handler machinery, which the access log pays on every request
      (``bench/bench_edge.py``; structlog docs, "Performance");
    * the libraries' standard library loggers go through a handler whose
      ``ProcessorFormatter`` runs the same processors (``foreign_pre_chain``).

    Args:
        level: ``debug|info|warning|error|critical``.
        fmt: ``json`` or ``console``.
        stream: where lines go; stdout by default (the container's log).
    """
    numeric_level = logging.getLevelNamesMapping()[level.upper()]
    target = stream if stream is not None else sys.stdout
    tail: list[Processor] = [
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _drop_color_message,
        redact_secrets,
        structlog.processors.StackInfoRenderer(),
    ]
    renderer: Processor
    if fmt == "console":
        # The standard library's traceback text: no locals (the Rich default shows them).
        renderer = structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
    else:
        tail.append(JSON_TRACEBACKS)
        renderer = structlog.processors.JSONRenderer(serializer=json_line)

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.stdlib.add_logger_name,
            *tail,
            renderer,
        ],
        logger_factory=lambda name=None, *_: NamedWriteLogger(target, name),
        wrapper_class=structlog.make_filtering_bound_logger(numeric_level),
        # Not cached: a later configure_logging (tests switch streams and formats) must
        # reach the module-level loggers too.
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.stdlib.ExtraAdder(),
            *tail,
        ],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(target)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric_level)
    for name in _LIBRARY_LOGGERS:
        library_logger = logging.getLogger(name)
        library_logger.handlers.clear()
        library_logger.propagate = True
    # Warnings (numpy's RuntimeWarning, a library's DeprecationWarning) go to the
    # "py.warnings" logger and so out as log lines of the same shape, not as raw stderr text.
    logging.captureWarnings(True)
    # The access log is ours (with the request id); the servers' own would duplicate it.
    logging.getLogger("uvicorn.access").disabled = True
    logging.getLogger("granian.access").disabled = True


def get_logger(name: str) -> Any:
    """A structlog logger whose lines carry ``"logger": name`` (the module's ``__name__``)."""
    return structlog.get_logger(name)
