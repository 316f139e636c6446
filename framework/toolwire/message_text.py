"""The user's message as the front doors accept it: text with at least one word.

``POST /v1/ask`` and the MCP ``<domain>.ask`` tool validate it with :data:`MessageText`, so a
blank message is refused with a clear error before anything runs (``toolwire ask`` refuses it
the same way, ``toolwire.cli.text.empty_problem``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator


def with_a_word(text: str) -> str:
    """``text`` unchanged; a ``ValueError`` when it is empty or only whitespace."""
    if not text.strip():
        raise ValueError("the message is empty or only whitespace: send a question")
    return text


MessageText = Annotated[str, AfterValidator(with_a_word)]
