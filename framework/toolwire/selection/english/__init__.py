"""The English language pack: selection steps that read English words.

Off unless listed in ``orchestrator.selection.steps`` (``english.several_requests``,
``english.leading_action``); another language's pack registers its own steps the same way.
"""

from __future__ import annotations

from collections.abc import Callable

from toolwire.hookspecs import hookimpl
from toolwire.selection.english.leading_action import LeadingAction
from toolwire.selection.english.several_requests import SeveralRequests
from toolwire.selection.state import StepFactory, fixed


@hookimpl
def register_selection_steps(register: Callable[[str, StepFactory], None]) -> None:
    register("english.several_requests", fixed(SeveralRequests()))
    register("english.leading_action", fixed(LeadingAction()))
