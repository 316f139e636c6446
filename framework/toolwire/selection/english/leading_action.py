"""``english.leading_action`` (after ``confirm``): whether a task asks to do what its one selected
tool does ("Cancel my hotel reservation" and a hotel search).

A small model accepts a tool whose question names the task's object, whatever the task asks to do
with it: asked "Does the message ask to find a hotel?", it says yes to "Cancel my hotel
reservation in Vienna." Asked to name the one of two options that fits, the tool or "Does the
message ask to cancel something?", it names the second, and it still names the tool for "Tell
me the exchange rate …" (docs/models.md, "The leading action"). The check runs only where the
task's first word may be an action the tool does not do: the task is a request, not a question
(it does not end with "?"), reads as one request, and its first word (after "please") is not a
stopword and appears nowhere in the tool's indexed text (stemmed: "booking" matches "book").
The tool is then put against the bare action in a choice of two and dropped unless the model
names it. A synonym the tool's text lacks ("Create a contact" for an ``add_contact`` tool) can
lose a right tool: give the tool an example that uses it. A failed call keeps the tool.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from functools import partial

from toolwire.llm.base import Option, Purpose
from toolwire.search.index import STOPWORDS, WORD
from toolwire.selection.english.several_requests import reads_as_several
from toolwire.selection.state import SelectionState
from toolwire.selection.trace import StepRecord

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


@dataclass(frozen=True)
class LeadingAction:
    name: str = "english.leading_action"

    async def run(self, state: SelectionState, record: StepRecord) -> None:
        action = leading_action(state.task_prompt)
        selected = state.selected or []
        if action is None or len(selected) != 1 or reads_as_several(state.task_prompt):
            return
        [tool] = selected
        if state.catalogue.index.shared_terms(action, tool.qualified_name)[0]:
            return
        options = [tool.option(), action_option(action, {tool.short_name})]
        named = await state.ask(
            Purpose.CHOICE,
            partial(state.llm.choose, state.task_prompt, options, several=False),
            "the leading-action check failed, the tool runs unchecked",
        )
        offered = {option.name for option in options}
        state.record.ignored.extend(name for name in named if name not in offered)
        if tool.short_name in named:
            record.verdicts[tool.qualified_name] = f"named over the task's bare action {action!r}"
        else:
            state.select([])
            record.verdicts[tool.qualified_name] = (
                f"dropped: the model named the bare action {action!r} over it"
            )
