"""The functions a model called, however its server returned them.

A server that parses the model's tool calls returns them as ``tool_calls``; one whose chat
template renders the functions but does not parse the reply (llama.cpp without a tool-call parser
for the model, the embedded 1.5B model in practice) leaves them in the text, where the model
writes ``<tool_call>{"name": …, "arguments": …}</tool_call>`` or bare JSON objects. Both are
read, as a lenient client would.
"""

from __future__ import annotations

import json
from typing import Any

from toolwire.llm.base import FunctionChoice
from toolwire.llm.transport import ChatReply


def function_choices(reply: ChatReply) -> list[FunctionChoice]:
    """The functions ``reply`` calls, in order, with their arguments: its parsed calls, else
    those written into its text."""
    if reply.calls:
        return [
            FunctionChoice(name=call.name, arguments=_object(call.arguments))
            for call in reply.calls
        ]
    return calls_in_text(reply.text)


def calls_in_text(text: str) -> list[FunctionChoice]:
    """Every JSON object in ``text`` with a string ``name``, in order, as a call (its
    ``arguments`` or ``parameters``, an object or JSON text). Objects nested in another are not
    read on their own: an argument called ``name`` is not a call."""
    decoder = json.JSONDecoder()
    calls: list[FunctionChoice] = []
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            arguments = value.get("arguments", value.get("parameters"))
            calls.append(FunctionChoice(name=value["name"], arguments=_object(arguments)))
        position = text.find("{", end)
    return calls


def _object(arguments: object) -> dict[str, Any] | None:
    """Arguments as a JSON object: given as one, or as JSON text of one; None otherwise."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return None
    return arguments if isinstance(arguments, dict) else None
