"""The functions a model called, however its server returned them.

A server that parses the model's tool calls returns them as ``tool_calls``; one whose chat
template renders the functions but does not parse the reply (llama.cpp without a tool-call parser
for the model, the embedded 1.5B model in practice) leaves them in the text, where the model
writes ``<tool_call>{"name": …, "arguments": …}</tool_call>`` or bare JSON objects. Both are
read, as a lenient client would.
"""

from __future__ import annotations

import json

from toolwire.llm.transport import ChatReply


def called_names(reply: ChatReply) -> list[str]:
    """The names of the functions ``reply`` calls, in order: its parsed calls, else those
    written into its text."""
    if reply.calls:
        return [call.name for call in reply.calls]
    return names_in_text(reply.text)


def names_in_text(text: str) -> list[str]:
    """The ``name`` of every JSON object in ``text`` that has one, in order (objects nested in
    another are not read on their own: an argument named ``name`` is not a call)."""
    decoder = json.JSONDecoder()
    names: list[str] = []
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            names.append(value["name"])
        position = text.find("{", end)
    return names
