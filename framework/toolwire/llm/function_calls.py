"""The functions a model called, however its server returned them.

A server that parses the model's tool calls returns them as ``tool_calls``; one whose chat
template renders the functions but does not parse the reply (llama.cpp without a tool-call parser
for the model, the embedded 1.5B model in practice) leaves them in the text, where the model
writes ``<tool_call>{"name": …, "arguments": …}</tool_call>`` or bare JSON objects. Both are
read, as a lenient client would.
"""

from __future__ import annotations

import json
import re
from typing import Any

from toolwire.llm.base import FunctionChoice
from toolwire.llm.transport import ChatReply

_NAME = re.compile(r'\s*\{\s*"name"\s*:\s*"([^"\\]+)"')
"""The start of a call whose JSON was cut off: ``{"name": "the_function", "argu…``."""


def function_choices(reply: ChatReply) -> list[FunctionChoice]:
    """The functions ``reply`` calls, in order, with their arguments: its parsed calls, else
    those written into its text (a call cut off at the limit included)."""
    if reply.calls:
        return [
            FunctionChoice(name=call.name, arguments=_object(call.arguments))
            for call in reply.calls
        ]
    return calls_in_text(reply.text, cut_off=reply.truncated)


def calls_in_text(text: str, *, cut_off: bool = False) -> list[FunctionChoice]:
    """Every JSON object in ``text`` with a string ``name``, in order, as a call (its
    ``arguments`` or ``parameters``, an object or JSON text). Objects nested in another are not
    read on their own: an argument called ``name`` is not a call. ``cut_off``: the text stopped
    at the completion limit, and a last object that starts with its name is a call too, without
    arguments."""
    decoder = json.JSONDecoder()
    calls: list[FunctionChoice] = []
    position = text.find("{")
    unread = -1
    """Where the first object that could not be read starts (-1: none since the last call)."""
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            unread = position if unread == -1 else unread
            position = text.find("{", position + 1)
            continue
        unread = -1
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            arguments = value.get("arguments", value.get("parameters"))
            calls.append(FunctionChoice(name=value["name"], arguments=_object(arguments)))
        position = text.find("{", end)
    if cut_off and unread != -1 and (started := _NAME.match(text, unread)):
        calls.append(FunctionChoice(name=started.group(1)))
    return calls


def _object(arguments: object) -> dict[str, Any] | None:
    """Arguments as a JSON object: given as one, or as JSON text of one; None otherwise."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return None
    return arguments if isinstance(arguments, dict) else None
