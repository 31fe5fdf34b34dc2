"""Shared helpers of the operations tests."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
import structlog

from gpu_advisor.logs import configure_logging


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """Route all logging (structlog and stdlib) as JSON lines into a StringIO for the test,
    then put back the root logger's handlers (pytest's capture) and structlog's defaults."""
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    saved_disabled = {
        n: logging.getLogger(n).disabled for n in ("uvicorn.access", "granian.access")
    }
    stream = io.StringIO()
    configure_logging("debug", "json", stream=stream)
    try:
        yield stream
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved_handlers:
            root.addHandler(handler)
        root.setLevel(saved_level)
        for name, disabled in saved_disabled.items():
            logging.getLogger(name).disabled = disabled
        logging.captureWarnings(False)
        structlog.reset_defaults()
