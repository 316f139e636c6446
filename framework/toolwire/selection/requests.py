"""Whether a task joins several requests ("What is its volume, and how long is its equator?").

Read from the task's words, with no model call: a small model that names one tool for such a
task rarely names the second, and the further-request question refuses a sibling's real second
request as readily as a restated one. A task that reads as several requests is selected as such
(``ToolSelector``: every chosen tool on its own question, and a second choice when one tool was
confirmed; docs/models.md, "Several requests in one task").
"""

from __future__ import annotations

import re

SEVERAL_REQUESTS = (
    r"\?\s*\S.*\?"  # two questions
    r"|;\s"
    r"|,\s*(and|then|plus)\s"
    r"|\b(also|then|as well|too|while you're at it|besides)\b"
    r"|\band\s+(what|how|when|where|which|who|whether|"
    r"tell|give|show|find|send|book|add|set|remind|email|check|convert|look)\b"
    # a question's inverted verb ("and is it safe …?"), not a statement's ("and can pay 300")
    r"|\band\s+(is|are|can|could|do|does|will|would)\s+"
    r"(i|you|it|he|she|we|they|there|this|that|my|your|the)\b"
)
"""The default ``orchestrator.selection.several_requests``: English words and signs that join a
second request to a first (a second question, "…, and …", "also", "then", "and what …",
"and is it …", "and send …"; not a statement's "and can pay …"). Matched case-insensitively
anywhere in the task."""


def several_requests_pattern(pattern: str) -> re.Pattern[str] | None:
    """``pattern`` compiled (case-insensitive); None for ``""``, which turns the reading off.
    A pattern that does not compile is a ``ValueError`` that says so."""
    if not pattern:
        return None
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as error:
        raise ValueError(f"several_requests is not a regular expression: {error}") from error
