"""Text as toolwire takes it in and passes it on.

The user's message: ``POST /v1/ask`` and the MCP ``<domain>.ask`` tool validate it with
:data:`MessageText`, so a blank message is refused with a clear error before anything runs
(``toolwire ask`` refuses it the same way, ``toolwire.cli.text.empty_problem``, by
:func:`has_a_word`).

Text bound for a model server or a store: :func:`utf8_text`. Python keeps bytes that were not
UTF-8 (a file name listed with ``surrogateescape``, a page decoded so) as lone surrogates, which
neither a request to a model server nor a stored JSON conversation can encode.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated

from pydantic import AfterValidator

_INVISIBLE = frozenset({"Cc", "Cf"})
"""Unicode's control and format characters (a NUL, a zero-width space, a direction mark): a
message of only these shows nothing and asks nothing, as one of only whitespace."""


def has_a_word(text: str) -> bool:
    """Whether ``text`` has a character that is neither whitespace nor invisible."""
    return any(not char.isspace() and unicodedata.category(char) not in _INVISIBLE for char in text)


def with_a_word(text: str) -> str:
    """``text`` unchanged; a ``ValueError`` when it is empty or only whitespace (invisible
    characters count as whitespace here, and are kept in a message that has a word)."""
    if not has_a_word(text):
        raise ValueError(
            "the message is empty or only whitespace or invisible characters: send a question"
        )
    return text


MessageText = Annotated[str, AfterValidator(with_a_word)]


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (``text`` itself when it has none)."""
    return _LONE_SURROGATE.sub("\ufffd", text) if _LONE_SURROGATE.search(text) else text


Utf8Text = Annotated[str, AfterValidator(utf8_text)]
"""A text field that is always encodable (what a stored conversation keeps)."""
