"""Text from outside shown on a terminal: control characters escaped, never obeyed.

An answer's text comes from the model, which read tool output and retrieved pages; an error can
quote an MCP server's stderr. Written to a terminal as it is, an escape sequence in it would run:
recolour or clear the screen, retitle the window, hide the text before it, or write the
clipboard (OSC 52), all without the user seeing it. :func:`printable` shows each such character
as its escape (``\\x1b``), so the text stays readable and nothing is dropped. The command line
prints everything that did not come from toolwire itself through it; log events rendered for a
terminal pass through :func:`printable_event`.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from typing import Any

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 controls but tab and newline (ESC among them), DEL, C1 controls, and the bidirectional
overrides that make a line read in another order than it is written."""


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab escaped (``\\x1b``,
    ``\\u202e``); a Windows line end is a newline."""
    text = text.replace("\r\n", "\n")
    return _CONTROL.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable_event(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor for a terminal: every string value of the event :func:`printable`."""
    for key, value in event_dict.items():
        if isinstance(value, str):
            event_dict[key] = printable(value)
    return event_dict
