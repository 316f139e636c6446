"""Whether a task asks to do what its chosen tool does ("Cancel my hotel reservation" and a hotel
search): the leading-action check of ``choose`` mode (``orchestrator.selection.action_check``).

A small model accepts a tool whose question names the task's object, whatever the task asks to do
with it: asked "Does the message ask to find a hotel?", it says yes to "Cancel my hotel
reservation in Vienna." Asked to name the one of two options that fits, the tool or "Does the
message ask to cancel something?", it names the second, and it still names the tool for "Tell
me the exchange rate …" (docs/models.md, "The leading action"). The check runs only where the
task's first word may be an action the tool does not do: the task is a request, not a question
(it does not end with "?"), reads as one request, and its first word (after "please") is not a
stopword and appears nowhere in the tool's indexed text (stemmed: "booking" matches "book").
"""

from __future__ import annotations

from collections.abc import Collection

from toolwire.llm.base import Option
from toolwire.search.index import STOPWORDS, WORD

COURTESY_WORDS = frozenset({"please", "pls", "plz", "kindly", "hey", "hi", "hello", "ok", "okay"})
"""Words before a request's action that are not the action ("Please cancel …")."""

OTHER_REQUEST = "other_request"
"""The bare action's name in the check's choice (made unique among the options)."""


def leading_action(task_prompt: str) -> str | None:
    """The task's first word, lower case, when it may name the action the task asks for: None for
    a question (it ends with "?"), for text that does not begin with a letter (a coordinator's
    JSON task prompt, a quotation), or when the first word after courtesy words is a stopword
    ("What's …", "I'm …", "Will it …") or holds a digit ("500 euros in dollars")."""
    text = task_prompt.strip()
    if not text[:1].isalpha() or text.endswith("?"):
        return None
    words: list[str] = WORD.findall(text.lower())
    for word in words:
        if word in COURTESY_WORDS:
            continue
        if word in STOPWORDS or not word.isalpha() or len(word) < 2:
            return None
        return word
    return None


def action_option(action: str, taken: Collection[str]) -> Option:
    """The option the chosen tool is put against: the task's bare action, named apart from
    ``taken`` (the tool's name)."""
    name = OTHER_REQUEST
    while name in taken:
        name += "_"
    return Option(name=name, question=f"Does the message ask to {action} something?")
