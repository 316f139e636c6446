"""The built-in selection steps, registered through the hook a plugin's steps use.

``retrieve``, ``choose``, ``call``, ``confirm``, ``decisive_words`` and ``arguments`` are
language-neutral; language packs (``toolwire.selection.english``) add steps that read a
language's words.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from toolwire.hookspecs import hookimpl
from toolwire.llm.profiles import DEFAULT_SELECTION_STEPS
from toolwire.selection.state import SelectionStep, StepFactory, fixed
from toolwire.selection.steps.arguments import CallArguments
from toolwire.selection.steps.call import CallFunctions
from toolwire.selection.steps.choose import Choose
from toolwire.selection.steps.confirm import Confirm
from toolwire.selection.steps.decisive_words import DecisiveWords
from toolwire.selection.steps.retrieve import Retrieve
from toolwire.settings import SelectionSettings


@hookimpl
def register_selection_steps(register: Callable[[str, StepFactory], None]) -> None:
    def retrieve(settings: SelectionSettings) -> SelectionStep:
        return Retrieve(settings.top_k)

    register("retrieve", retrieve)
    register("choose", fixed(Choose()))
    register("call", fixed(CallFunctions()))
    register("confirm", fixed(Confirm()))
    register("decisive_words", fixed(DecisiveWords()))
    register("arguments", fixed(CallArguments()))


def builtin_steps(settings: SelectionSettings) -> tuple[SelectionStep, ...]:
    """``settings.steps`` (None: :data:`~toolwire.llm.profiles.DEFAULT_SELECTION_STEPS`, the
    steps of a profile that names none) from toolwire's own steps alone: for an orchestrator
    built without an app, which resolves no model profile (the app builds them from every
    plugin's steps and its model's profile)."""
    from toolwire.selection import english
    from toolwire.selection.pipeline import make_steps

    registered: dict[str, StepFactory] = {}
    for pack in (sys.modules[__name__], english):
        pack.register_selection_steps(registered.__setitem__)
    return make_steps(registered, settings, DEFAULT_SELECTION_STEPS)
