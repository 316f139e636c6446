"""What the command line prints of text it did not write, and what it accepts as text.

Answers, tool output, error messages and MCP servers' listings are shown :func:`literal`: rich
markup escaped, control characters escaped (``toolwire.printable``). A message or session id
typed on the command line or at the chat prompt that is not UTF-8 (Python keeps its bytes as lone
surrogates) is refused with a sentence saying so, instead of a traceback from deep in the model
client; so is a message that is empty or only whitespace, instead of a whole question run on it.
"""

from __future__ import annotations

from rich.markup import escape

from toolwire.message_text import has_a_word
from toolwire.printable import printable
from toolwire.sessions.base import checked_session_id


def literal(text: str) -> str:
    """``text`` for ``Console.print`` with markup: printable, and no markup of its own."""
    return escape(printable(text))


def not_utf8(text: str, what: str) -> str | None:
    """Why ``text`` (``what``: "the message") is not UTF-8 text, or None when it is."""
    for position, character in enumerate(text):
        if "\ud800" <= character <= "\udfff":
            byte = ord(character) - 0xDC00
            shown_byte = f"byte 0x{byte:02x}" if 0x80 <= byte <= 0xFF else "a character"
            return (
                f"{what} is not UTF-8 text ({shown_byte} at character {position + 1}): set the "
                "terminal to UTF-8 (LANG=C.UTF-8, say) and type it again"
            )
    return None


def empty_problem(text: str, what: str) -> str | None:
    """Why ``text`` (``what``: "the message") holds no question, or None when it has a word:
    an empty or blank message is refused before anything runs, as ``POST /v1/ask`` refuses an
    empty one."""
    if has_a_word(text):
        return None
    shown = "empty" if not text else f"only whitespace ({printable(text)!r})"
    return f'{what} is {shown}: pass the question as the argument: toolwire ask "your question"'


def session_id_problem(session_id: str) -> str | None:
    """Why ``session_id`` (``--session``) cannot be a session id, or None."""
    try:
        checked_session_id(session_id)
    except ValueError as error:
        return f"--session: {error}"
    return None
