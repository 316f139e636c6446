"""structlog, configured once: JSON lines when logs go to a pipe, readable lines on a terminal.

Logs are written to stderr so that command output on stdout (``toolwire tools --json``) stays
clean. ``TOOLWIRE_LOG_LEVEL`` (default ``warning``) sets the threshold; a value that is no level
is warned about once (``log_level_unknown``) and the default applies. Build steps
(``plugin_loaded``, ``tool_registered``, ``tool_wired``) are ``info`` events. Every event is
redacted before it is rendered (``toolwire.redaction``): secret shapes and known secret values
are masked. On a terminal, control characters in values are shown escaped
(``toolwire.printable``).

The libraries toolwire runs log through the standard library (the ``mcp`` SDK, uvicorn): their
warnings and errors are routed into the same stream as ``library_log`` events (``logger``,
``message``, ``exception``), redacted like any other, so the log stays JSON lines and a secret in
what they quote is masked. A validation error's quoted input (pydantic's ``input_value=…``,
which the SDK's traceback of a malformed message carries, cut in the middle where no secret
pattern can find it) is withheld altogether.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

import structlog

from toolwire.printable import printable_event
from toolwire.redaction import redact_event

LOG_LEVEL_ENV = "TOOLWIRE_LOG_LEVEL"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
"""What ``TOOLWIRE_LOG_LEVEL`` takes (any case; the standard library's aliases pass too)."""

_WARNED_LEVELS: set[str] = set()
"""``TOOLWIRE_LOG_LEVEL`` values already warned about: a process configures logging more than
once (the command line, then its command), and says so once."""

ROUTED_LOGGERS = ("mcp", "uvicorn")
"""Standard-library loggers whose records become ``library_log`` events (module docstring)."""


def configure_logging(
    *,
    stream: TextIO | None = None,
    force: bool = False,
    default_level: str = "warning",
    extra_processors: Sequence[structlog.typing.Processor] = (),
) -> None:
    """Configure structlog for toolwire unless the host application already did (or ``force``).

    ``default_level`` applies when ``TOOLWIRE_LOG_LEVEL`` is unset (the server logs access events
    at ``info``); ``extra_processors`` run on every event just before it is rendered.
    """
    if structlog.is_configured() and not force:
        return
    explicit = stream is not None
    stream = sys.stderr if stream is None else stream
    given = os.environ.get(LOG_LEVEL_ENV, "")  # set but empty: as unset
    levels = logging.getLevelNamesMapping()
    unknown = bool(given) and given.upper() not in levels
    level = levels[(given if given and not unknown else default_level).upper()]
    renderer: structlog.typing.Processor
    shown: list[structlog.typing.Processor] = []
    if stream.isatty():
        renderer = structlog.dev.ConsoleRenderer()
        shown = [printable_event]  # JSON escapes control characters; a terminal would run them
    else:
        renderer = structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            *extra_processors,
            redact_event,
            *shown,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_stream_logger_factory(stream if explicit else None),
        cache_logger_on_first_use=False,  # so structlog.testing.capture_logs() sees events
    )
    route_library_logging()
    if unknown:
        _warn_unknown_level(given, level)


def _warn_unknown_level(given: str, level: int) -> None:
    """Say once that ``TOOLWIRE_LOG_LEVEL`` holds no level, so the default applies (a typo is
    otherwise a silent change of what the log shows); only at a level that shows a warning, so
    a quieter configuration (``toolwire check``'s) does not use up the one time."""
    if given in _WARNED_LEVELS or level > logging.WARNING:
        return
    _WARNED_LEVELS.add(given)
    structlog.get_logger(__name__).warning(
        "log_level_unknown",
        variable=LOG_LEVEL_ENV,
        value=given,
        accepted=", ".join(LOG_LEVELS),
    )


def route_library_logging(names: Sequence[str] = ROUTED_LOGGERS) -> None:
    """Send the records of the standard-library loggers ``names`` (and their children) to
    structlog, and only there (idempotent). Their levels are left as they are: warnings and
    errors pass, as the standard library's own default lets them."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(handler, StructlogHandler) for handler in logger.handlers):
            logger.addHandler(StructlogHandler())
        logger.propagate = False  # not printed a second time, as plain text, by the root


class StructlogHandler(logging.Handler):
    """A ``logging`` handler that logs each record as a structlog ``library_log`` event."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields: dict[str, Any] = {"logger": record.name, "message": record.getMessage()}
            if record.exc_info and record.exc_info[1] is not None:
                fields["exception"] = exception_text(record.exc_info[1])
            structlog.get_logger(record.name).log(record.levelno, "library_log", **fields)
        except Exception:  # a handler must not raise into the library that logged
            self.handleError(record)


_QUOTED_INPUT = re.compile(r"input_value=.*?, input_type=")


def exception_text(error: BaseException) -> str:
    """``error``'s traceback (its causes too), validation errors' quoted input withheld."""
    text = "".join(traceback.format_exception(error))
    return _QUOTED_INPUT.sub("input_value=(withheld), input_type=", text)


def _stream_logger_factory(stream: TextIO | None) -> Callable[..., structlog.PrintLogger]:
    """Loggers writing to ``stream``, or to whatever ``sys.stderr`` is at the time of the event
    (test runners and CLIs swap it)."""

    def factory(*args: Any) -> structlog.PrintLogger:
        return structlog.PrintLogger(stream if stream is not None else sys.stderr)

    return factory


@contextmanager
def bound(**fields: Any) -> Iterator[None]:
    """Bind ``fields`` into structlog's context variables for the block, then put back what was
    there (every event logged meanwhile carries them, in the tasks and tool threads started
    meanwhile too).

    ``structlog.contextvars.bound_contextvars`` without reading the whole context first: the
    orchestrator binds on every step of every question. Enter and leave it in one task.
    """
    tokens = structlog.contextvars.bind_contextvars(**fields)
    try:
        yield
    finally:
        structlog.contextvars.reset_contextvars(**tokens)
