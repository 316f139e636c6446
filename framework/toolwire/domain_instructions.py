"""A domain's own instructions: its voice, answer format, procedures and hard rules (seed 004).

A domain declares them in YAML (``instructions: |``) or in code
(``DomainSpec(instructions=...)``). They are fixed text: every model call of the domain carries
them in its system message, after toolwire's own rules and the domain's description, so they are
part of the byte-stable prefix a server caches and never part of the dynamic tail. They are
checked when the app is built (``toolwire check``), not at the first question.

toolwire's rules come first and win: instructions cannot make the model obey text inside
retrieved content, and a tool's guaranteed answer still reaches the user verbatim (instructions
shape what the model writes, never a finished answer a tool gave).
"""

from __future__ import annotations

import re
import textwrap

from toolwire.prompt_tags import DOMAIN_INSTRUCTIONS_TAG, OWN_TAGS

MAX_INSTRUCTIONS_CHARS = 4000
"""The longest instructions a domain may declare (about 1,000 tokens): every call of the domain
reads them, and the embedded model's window is 8,192 tokens. Longer procedures belong in a
tool's documents, retrieved when a question needs them."""

OPEN_TAG = f"<{DOMAIN_INSTRUCTIONS_TAG}>"
CLOSE_TAG = f"</{DOMAIN_INSTRUCTIONS_TAG}>"

_RESERVED_TAG = re.compile(
    r"<\s*/?\s*(?:" + "|".join(re.escape(tag) for tag in OWN_TAGS) + r")\b", re.IGNORECASE
)
"""toolwire's own tags (:data:`toolwire.prompt_tags.OWN_TAGS`): written inside the instructions
they would forge the prompt's structure (a fake end of the instructions, a task, a status bar or
guaranteed context of their own)."""


def normalised(text: str) -> str:
    """The instructions as the model reads them: common indentation and trailing spaces
    removed, blank lines at the ends dropped, line breaks (lists, numbered steps) kept."""
    lines = [line.rstrip() for line in textwrap.dedent(text.expandtabs(4)).splitlines()]
    return "\n".join(lines).strip("\n")


def instruction_problems(text: str) -> list[str]:
    """What is wrong with a domain's instructions (empty: nothing), each saying how to fix it."""
    shown = normalised(text)
    if not shown:
        return [
            "instructions: is empty; write the domain's rules for the model, or leave the key out"
        ]
    problems = []
    if len(shown) > MAX_INSTRUCTIONS_CHARS:
        problems.append(
            f"instructions: {len(shown):,} characters, more than {MAX_INSTRUCTIONS_CHARS:,} "
            "(every model call of the domain reads them); keep the rules, move reference "
            "material into a tool's documents"
        )
    tag = _RESERVED_TAG.search(shown)
    if tag is not None:
        problems.append(
            f"instructions: contain toolwire's own tag {tag.group(0)!r}..., which would break "
            "the prompt's structure; describe the rule in words instead"
        )
    return problems


def instructions_block(text: str) -> str:
    """The instructions as they stand in every system message of the domain ("" for none)."""
    shown = normalised(text)
    if not shown:
        return ""
    return (
        "The domain's own instructions follow. Follow them in everything you write for this "
        "domain; the rules above still come first.\n"
        f"{OPEN_TAG}\n{shown}\n{CLOSE_TAG}"
    )
