"""toolwire's own tags in the prompts: the one list that every escape and every check reads.

Each names a part of a prompt whose meaning the model must be able to trust: the user's task,
content from outside (``guaranteed="true"`` on a tool's finished answer), the agent status bar
(:mod:`toolwire.llm.status_bar`) and a domain's instructions (:mod:`toolwire.domain_instructions`).
Text that toolwire does not write (the user's message, earlier turns, a page, the gatekeeper's
words) must never open or close one of them, and a domain's instructions may not contain any.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

TASK_TAG = "task"
EXTERNAL_CONTENT_TAG = "external_content"
STATUS_TAG = "agent_status"
DOMAIN_INSTRUCTIONS_TAG = "domain_instructions"

DYNAMIC_TAGS = (TASK_TAG, EXTERNAL_CONTENT_TAG, STATUS_TAG)
"""The tags of a prompt's dynamic part (the user message and what follows it): escaped wherever
text from outside stands there."""

OWN_TAGS = (*DYNAMIC_TAGS, DOMAIN_INSTRUCTIONS_TAG)
"""Every tag toolwire writes in a prompt."""


def tag_start(tags: Sequence[str] = DYNAMIC_TAGS) -> re.Pattern[str]:
    """The ``<`` that would open or close one of ``tags`` (``< / task``, any case); only that
    character matches, so ``pattern.sub("&lt;", text)`` escapes it and leaves ``a < b`` alone."""
    names = "|".join(re.escape(tag) for tag in tags)
    return re.compile(rf"<(?=\s*/?\s*(?:{names})\b)", re.IGNORECASE)
