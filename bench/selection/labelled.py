"""The labelled tool-selection set (``labelled.yaml``): its model, loader, check and figures.

    .venv/bin/python bench/selection/labelled.py     # check the set, then print its figures

The set is measured against an app built from the two bundled plugins and the synthetic
selection domains (:func:`selection_app`). :func:`check_labelled` reports every label that the
app contradicts (an unknown tool, a tool that the orchestrator never selects, a tool of another
domain, a repeated id) and every tool the set leaves untested, each at ``labelled.yaml:line``.
Import it with this folder on ``sys.path`` (a script here has it there already).
"""

from __future__ import annotations

import difflib
import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import toolwire_pharma.plugin
import toolwire_pydocs.plugin
import toolwire_selection_bench.plugin
from entries import SPLITS, Entry, Split, read_entries, repeated
from pydantic import Field

from toolwire import App, OrchestratorActivatedTool
from toolwire.errors import Problem

DEFAULT_PATH = Path(__file__).with_name("labelled.yaml")

SELECTION_PLUGINS: tuple[object, ...] = (
    toolwire_pharma.plugin,
    toolwire_pydocs.plugin,
    toolwire_selection_bench.plugin,
)
"""The plugins the set is labelled against, loaded as plugin objects (no entry points)."""


class LabelledMessage(Entry):
    """One user message and the exact set of tools that should take it."""

    message: str = Field(min_length=1)
    domain: str | None
    """The domain the message belongs to (or sounds like); None: off-topic for every domain."""
    tools: tuple[str, ...] = ()
    """Prefixed names of the orchestrator-activated tools that should run; empty: none."""


def load_labelled(
    path: str | os.PathLike[str] | None = None, split: Split | None = None
) -> list[LabelledMessage]:
    """The messages of the set (``labelled.yaml`` next to this module by default), in file order,
    only those of ``split`` when given. Raises one ``ConfigError`` listing every malformed entry."""
    shape = "{id, message, domain, tools, split}"
    return read_entries(Path(path or DEFAULT_PATH), "messages", LabelledMessage, shape, split)


def selection_app(config_path: str | os.PathLike[str] | None = None, **kwargs: Any) -> App:
    """An app with exactly the plugins the set is labelled against (entry points are ignored).

    ``config_path`` and ``kwargs`` (``llm``, ``session_store``) go to ``App.load``; building it
    starts no model.
    """
    return App.load(config_path, plugins=SELECTION_PLUGINS, load_entry_points=False, **kwargs)


def selectable_tools(app: App) -> dict[str, list[str]]:
    """Domain → the prefixed names of the tools the orchestrator may select for a user message:
    built, orchestrator-activated, neither coordinator-only nor the domain's RAG tool, and not
    excluded. Every installed domain is listed, also one without such tools."""
    selectable: dict[str, list[str]] = {}
    for name, spec in app.domains.items():
        not_selected = {
            app.registry.resolve(tool, name).qualified_name
            for tool in [*spec.excluded_tools, *([spec.rag_tool] if spec.rag_tool else [])]
        }
        selectable[name] = [
            registration.qualified_name
            for registration in app.registry.in_domain(name)
            if _is_selectable(app.tools.get(registration.qualified_name))
            and registration.qualified_name not in not_selected
        ]
    return selectable


def _is_selectable(tool: object) -> bool:
    return isinstance(tool, OrchestratorActivatedTool) and not tool.coordinator_only


def check_labelled(
    messages: Sequence[LabelledMessage], app: App, path: str | os.PathLike[str] | None = None
) -> list[Problem]:
    """Every contradiction between the labels and the app, and every gap in the set's coverage:
    a repeated id or message, an unknown domain, a tool that does not exist, is not selectable or
    belongs to another domain, a message that is also a tool's declared example, and a selectable
    tool that is labelled fewer than twice or is missing from one of the splits. Empty when the
    set is sound."""
    where = str(path if path is not None else DEFAULT_PATH)
    selectable = selectable_tools(app)
    problems: list[Problem] = []

    def report(message: LabelledMessage | None, text: str) -> None:
        prefix = f"{message.id}: " if message is not None else ""
        problems.append(Problem(prefix + text, where, message.line if message else None))

    for message, text in repeated(messages, lambda message: message.message, "message"):
        report(message, text)
    first_of_text: dict[str, LabelledMessage] = {}
    for message in messages:
        first_of_text.setdefault(message.message.strip().casefold(), message)
        if message.domain is not None and message.domain not in app.domains:
            report(
                message,
                f"unknown domain {message.domain!r}; installed: "
                f"{', '.join(sorted(app.domains))} (or null for off-topic)",
            )
        if len(set(message.tools)) != len(message.tools):
            report(message, "a tool is listed twice")
        for tool in message.tools:
            problem = _tool_problem(tool, message.domain, app, selectable)
            if problem:
                report(message, problem)

    for registration in app.registry:
        for example in registration.examples:
            copied = first_of_text.get(example.strip().casefold())
            if copied is not None:
                report(
                    copied,
                    f"tool {registration.qualified_name!r} declares this message among its "
                    "examples; retrieval would find the labelled answer verbatim: rewrite one",
                )

    uses = {
        split: Counter(t for m in messages if m.split == split for t in m.tools) for split in SPLITS
    }
    for tools in selectable.values():
        for tool in tools:
            total = sum(uses[split][tool] for split in SPLITS)
            if total < 2:
                report(
                    None,
                    f"tool {tool!r} is labelled on {total} message(s); "
                    "every selectable tool needs at least 2",
                )
            for split in SPLITS:
                if total and not uses[split][tool]:
                    report(
                        None,
                        f"tool {tool!r} has no message in the {split!r} split; "
                        "every tool appears in both",
                    )
    return problems


def _tool_problem(
    tool: str, domain: str | None, app: App, selectable: dict[str, list[str]]
) -> str | None:
    if tool not in app.registry:
        every = [name for names in selectable.values() for name in names]
        close = difflib.get_close_matches(tool, every, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else " (use the prefixed name)"
        return f"unknown tool {tool!r}{hint}"
    owner = app.registry.resolve(tool).domain
    if tool not in selectable.get(owner, []):
        return (
            f"tool {tool!r} is never selected for a user message (not orchestrator-activated, "
            "coordinator-only, the domain's RAG tool, disabled or excluded); label the tools "
            "the orchestrator chooses from"
        )
    if owner != domain:
        return (
            f"tool {tool!r} belongs to domain {owner!r}, not to the message's domain "
            f"{domain!r}; a message is labelled with tools of its own domain"
        )
    return None


@dataclass(frozen=True)
class SetFigures:
    """The set's composition, as the summary prints it."""

    total: int
    per_domain: dict[str, Counter[str]]
    """Domain ("null" for off-topic) → kind of message → count."""
    per_split: Counter[Split]
    no_tool: int
    """Messages no tool should take: near misses, off-topic and questions of a domain that
    has no selectable tool."""
    near_miss_or_off_topic: int
    """The no-tool messages except those of a domain without selectable tools."""
    two_tools: int
    tools_per_domain: dict[str, int]
    messages_per_tool: dict[str, Counter[Split]]
    """Prefixed tool name → split → messages labelled with it (selectable tools only)."""

    def share(self, count: int) -> float:
        return count / self.total if self.total else 0.0


def kind_of(message: LabelledMessage, selectable: dict[str, list[str]]) -> str:
    """``one tool``, ``two tools`` (or more), ``near miss``, ``off-topic`` or ``no tool in the
    domain`` (a domain, such as pydocs, whose retrieval runs for every question)."""
    if len(message.tools) == 1:
        return "one tool"
    if message.tools:
        return "two tools" if len(message.tools) == 2 else f"{len(message.tools)} tools"
    if message.domain is None:
        return "off-topic"
    return "near miss" if selectable.get(message.domain) else "no tool in the domain"


def figures(messages: Sequence[LabelledMessage], app: App) -> SetFigures:
    """Count the set's messages by domain, kind, split and tool."""
    selectable = selectable_tools(app)
    per_domain: dict[str, Counter[str]] = {}
    for message in messages:
        counts = per_domain.setdefault(message.domain or "null", Counter())
        counts[kind_of(message, selectable)] += 1
    kinds = Counter(kind_of(message, selectable) for message in messages)
    messages_per_tool = {
        tool: Counter(m.split for m in messages if tool in m.tools)
        for tools in selectable.values()
        for tool in tools
    }
    return SetFigures(
        total=len(messages),
        per_domain=per_domain,
        per_split=Counter(message.split for message in messages),
        no_tool=sum(1 for message in messages if not message.tools),
        near_miss_or_off_topic=kinds["near miss"] + kinds["off-topic"],
        two_tools=kinds["two tools"],
        tools_per_domain={domain: len(tools) for domain, tools in selectable.items()},
        messages_per_tool=messages_per_tool,
    )


def summary(counted: SetFigures) -> str:
    """The figures as a few plain-text tables."""
    kinds = ["one tool", "two tools", "near miss", "off-topic", "no tool in the domain"]
    lines = [
        f"{counted.total} messages; "
        + ", ".join(f"{split} {counted.per_split[split]}" for split in SPLITS)
    ]
    lines.append(
        f"no tool: {counted.no_tool} ({counted.share(counted.no_tool):.0%}); near miss or "
        f"off-topic: {counted.near_miss_or_off_topic} "
        f"({counted.share(counted.near_miss_or_off_topic):.0%}); two tools: "
        f"{counted.two_tools} ({counted.share(counted.two_tools):.0%})"
    )
    lines.append("")
    lines.append(f"{'domain':<10} {'tools':>5} {'msgs':>5}  " + "  ".join(kinds))
    for domain, counts in sorted(counted.per_domain.items()):
        tools = counted.tools_per_domain.get(domain, 0)
        cells = "  ".join(f"{counts[kind]:>{len(kind)}}" for kind in kinds)
        lines.append(f"{domain:<10} {tools:>5} {sum(counts.values()):>5}  {cells}")
    lines.append("")
    lines.append(f"messages per tool (dev + test), {len(counted.messages_per_tool)} tools:")
    width = max((len(tool) for tool in counted.messages_per_tool), default=0)
    for tool, uses in counted.messages_per_tool.items():
        lines.append(f"  {tool:<{width}}  {uses['dev']} + {uses['test']}")
    return "\n".join(lines)


def main() -> int:
    """Check the set against the plugins, print the problems or the figures."""
    messages = load_labelled()
    app = selection_app()
    problems = check_labelled(messages, app)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(summary(figures(messages, app)))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
