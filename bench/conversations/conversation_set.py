"""The labelled multi-turn conversations: their model, loader, check, split rule and figures.

    .venv/bin/python bench/conversations/conversation_set.py            # check, then figures
    .venv/bin/python bench/conversations/conversation_set.py --assign   # split the new ones

One file per domain, ``bench/conversations/<domain>.jsonl``, one conversation a line: the two
bundled domains (pharma, pydocs) and the four synthetic ones of the selection evaluation
(geometry, finance, travel, office; ``bench/selection/toolwire_selection_bench``). Each
conversation has an ``id`` (unique over every file), a ``pattern`` (what its later turns do:
``pronoun``, ``same_for``, ``what_about``, ``correction``, ``children``, ``clarification``,
``subject_change``, ``long`` for three or four turns mixing them; the first 66 pharma ones keep
the names they were written with), its ``split`` and two to four ``turns``. Each turn:

* ``role``: ``first``, ``follow_up`` (it needs an earlier turn: a pronoun, "the same for …",
  "what about children?", a correction, the reply to a clarifying question) or
  ``subject_change`` (it stands on its own and must not drag the old topic in);
* ``tools``: the exact set of the domain's answering tools that must run on it (qualified
  names): the tools the orchestrator may select for a user message, and the domain's RAG tool,
  never a service another tool calls (``pharma.substance_lookup``) or a coordinator's helper
  (``pydocs.neighbor_pages``, ``pydocs.deep_search``);
* ``params``: ``{tool: {field: [label, ...]}}``, values that must be in the parameters the tool
  ran with (``ToolRunRecord.params`` in the answer's trace); a label that is a list is a choice
  of spellings, any one of which will do (``["km", "kilomet"]``);
* ``absent``: ``{tool: {field: [value, ...]}}``, values that must not be there (the old topic);
* ``answer``: ``clarification`` when the turn must end in a clarifying question (default
  ``answer``); ``answer_has``: texts the tools' guaranteed answers must hold, for a reply to a
  clarifying question, whose choice is made in the tool from the reply and not in a parameter.

How a label matches (:func:`matches`): a number matches a number parameter equal to it; text
matches, ignoring case, where a word of the parameter's text begins with it (``"sort"`` in
``"sorted keys"``, ``"Excedrin PM"`` in ``"Excedrin PM Headache"``), and a label of one or two
characters (``"F"``, ``"km"``) only a whole word; a list parameter matches when one of its
items does. ``pydocs.docs_search`` takes no query from the model (``params_from_text``): its
request is its query, so there its ``query`` is its task's text.

The split is fixed before any result is seen, by :func:`assign_splits`: a conversation without
a split gets one, and a split once written never changes. Within each stratum (domain and
pattern), the new conversations in the order of ``sha256(SEED + ":" + id)`` go each to the
split that has fewer of that stratum, then fewer of that domain, then fewer in all, then dev.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
)

SELECTION_DIR = Path(__file__).resolve().parents[1] / "selection"
if str(SELECTION_DIR) not in sys.path:
    sys.path.insert(0, str(SELECTION_DIR))

from labelled import selectable_tools, selection_app  # noqa: E402

from toolwire import App  # noqa: E402
from toolwire.search import AbstractContextSearchTool  # noqa: E402

SET_DIR = Path(__file__).resolve().parent
DOMAINS = ("pharma", "pydocs", "geometry", "finance", "travel", "office")
"""The domains with a file, in the order runs and figures list them."""
SEED = "toolwire-conversations-2026-12-03"
Split = Literal["dev", "test"]
SPLITS: tuple[Split, ...] = ("dev", "test")
Role = Literal["first", "follow_up", "subject_change"]
ROLES: tuple[Role, ...] = ("first", "follow_up", "subject_change")

Value = StrictStr | StrictInt | StrictFloat
Label = Value | list[Value]
"""A value, or a choice of spellings (any one will do)."""


class LabelledTurn(BaseModel):
    """One message of a conversation and what must happen on it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role
    message: str = Field(min_length=1)
    tools: tuple[str, ...]
    params: dict[str, dict[str, list[Label]]] = Field(default_factory=dict)
    absent: dict[str, dict[str, list[Value]]] = Field(default_factory=dict)
    answer: Literal["answer", "clarification"] = "answer"
    answer_has: tuple[str, ...] = ()


class LabelledConversation(BaseModel):
    """Two to four turns sent in one domain."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    pattern: str = Field(min_length=1)
    split: Split | None = None
    """None only until :func:`assign_splits` gives it one (the check reports it)."""
    turns: tuple[LabelledTurn, ...] = Field(min_length=2, max_length=4)


class SetError(Exception):
    """A file of the set does not parse: every malformed line, as ``path:line: problem``."""


def path_of(domain: str) -> Path:
    return SET_DIR / f"{domain}.jsonl"


def load_domain(domain: str) -> list[LabelledConversation]:
    """The conversations of one domain's file, in file order."""
    path = path_of(domain)
    conversations: list[LabelledConversation] = []
    problems: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            conversations.append(LabelledConversation.model_validate_json(line))
        except ValidationError as error:
            for item in error.errors():
                where = ".".join(str(part) for part in item["loc"])
                problems.append(f"{path}:{number}: {where}: {item['msg']}")
    if problems:
        raise SetError("\n".join(problems))
    return conversations


def load_set(
    domains: Iterable[str] = DOMAINS, split: Split | None = None
) -> dict[str, list[LabelledConversation]]:
    """Domain → its conversations (only those of ``split`` when given)."""
    return {
        domain: [c for c in load_domain(domain) if split is None or c.split == split]
        for domain in domains
    }


def write_domain(domain: str, conversations: Sequence[LabelledConversation]) -> None:
    """The file in its one written form (defaults left out, keys in the models' order)."""
    lines = [
        json.dumps(c.model_dump(mode="json", exclude_defaults=True), ensure_ascii=False)
        for c in conversations
    ]
    path_of(domain).write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- the split --------------------------------------------------------------------------------


def _order(conversation: LabelledConversation) -> str:
    return hashlib.sha256(f"{SEED}:{conversation.id}".encode()).hexdigest()


def assign_splits(
    conversations: Mapping[str, Sequence[LabelledConversation]],
) -> dict[str, list[LabelledConversation]]:
    """Every conversation with a split: those that have one keep it; the others get one by the
    seeded rule of the module's doc (it reads ids, domains and patterns, never a result)."""
    in_stratum: Counter[tuple[str, str, str]] = Counter()
    in_domain: Counter[tuple[str, str]] = Counter()
    in_all: Counter[str] = Counter()
    for domain, listed in conversations.items():
        for c in listed:
            if c.split is not None:
                in_stratum[domain, c.pattern, c.split] += 1
                in_domain[domain, c.split] += 1
                in_all[c.split] += 1
    given: dict[str, Split] = {}
    for domain in sorted(conversations):
        listed = conversations[domain]
        for pattern in sorted({c.pattern for c in listed}):
            new = sorted(
                (c for c in listed if c.pattern == pattern and c.split is None), key=_order
            )
            for c in new:
                split = min(
                    SPLITS,
                    key=lambda s: (
                        in_stratum[domain, pattern, s],
                        in_domain[domain, s],
                        in_all[s],
                        s != "dev",
                    ),
                )
                given[c.id] = split
                in_stratum[domain, pattern, split] += 1
                in_domain[domain, split] += 1
                in_all[split] += 1
    return {
        domain: [
            c.model_copy(update={"split": given[c.id]}) if c.id in given else c for c in listed
        ]
        for domain, listed in conversations.items()
    }


# -- the tools a turn is labelled with ----------------------------------------------------------


def labelling_app(**kwargs: Any) -> App:
    """The app the set is labelled against (the selection evaluation's: the bundled plugins and
    the synthetic domains, no entry points); building it starts no model. ``kwargs`` (``llm``,
    ``session_store``) go to ``App.load``."""
    return selection_app(**kwargs)


def answering_tools(app: App, domain: str) -> list[str]:
    """The tools a turn of ``domain`` is labelled with: those the orchestrator may select for a
    user message, and the domain's RAG tool."""
    tools = list(selectable_tools(app).get(domain, []))
    rag = app.domains[domain].rag_tool
    if rag:
        tools.append(app.registry.resolve(rag, domain).qualified_name)
    return tools


def text_query_tools(app: App, domain: str) -> set[str]:
    """The search tools whose empty ``query`` means "the request is the query"."""
    return {
        name
        for name in answering_tools(app, domain)
        if isinstance(app.tools.get(name), AbstractContextSearchTool)
    }


def check_set(conversations: Mapping[str, Sequence[LabelledConversation]], app: App) -> list[str]:
    """Every label the app contradicts, and every conversation without a split: a repeated id,
    an unknown domain, a first turn that is not ``first`` (or a later one that is), a tool that
    is not an answering tool of the domain or is listed twice, a parameter label for a tool the
    turn does not list, a field the tool's parameter model lacks, a value the field cannot
    hold. Empty when the set is sound."""
    problems: list[str] = []
    seen: dict[str, str] = {}
    for domain, listed in conversations.items():
        if domain not in app.domains:
            problems.append(f"{path_of(domain)}: unknown domain {domain!r}")
            continue
        answering = answering_tools(app, domain)
        for c in listed:
            where = f"{path_of(domain).name} {c.id}"
            if c.id in seen:
                problems.append(f"{where}: the id is used again (first in {seen[c.id]})")
            seen.setdefault(c.id, path_of(domain).name)
            if c.split is None:
                problems.append(f"{where}: no split (run conversation_set.py --assign)")
            for number, turn in enumerate(c.turns, start=1):
                at = f"{where} turn {number}"
                if (turn.role == "first") != (number == 1):
                    problems.append(f"{at}: role {turn.role!r} (only turn 1 is 'first')")
                problems += [f"{at}: {p}" for p in _turn_problems(turn, answering, app)]
    return problems


def _turn_problems(turn: LabelledTurn, answering: list[str], app: App) -> list[str]:
    problems: list[str] = []
    if len(set(turn.tools)) != len(turn.tools):
        problems.append("a tool is listed twice")
    for tool in turn.tools:
        if tool not in answering:
            problems.append(f"{tool!r} is not an answering tool of the domain ({answering})")
    for key, labels in (("params", turn.params), ("absent", turn.absent)):
        for tool, fields in labels.items():
            if tool not in turn.tools:
                problems.append(f"{key} name {tool!r}, which the turn's tools do not list")
                continue
            model = app.tools[tool].params_model
            for field, values in fields.items():
                info = model.model_fields.get(field)
                if info is None:
                    problems.append(
                        f"{key}: {tool} has no parameter {field!r} ({list(model.model_fields)})"
                    )
                    continue
                adapter: TypeAdapter[Any] = TypeAdapter(info.annotation or Any)
                listed = str(info.annotation).startswith("list[")
                for label in values:
                    for value in label if isinstance(label, list) else [label]:
                        try:
                            adapter.validate_python([value] if listed else value)
                        except ValidationError:
                            problems.append(
                                f"{key}: {tool}.{field} cannot hold {value!r} ({info.annotation})"
                            )
    return problems


# -- matching ---------------------------------------------------------------------------------


def _leaves(value: object) -> list[object]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _text_matches(label: str, text: str) -> bool:
    wanted = label.casefold().strip()
    end = r"(?![^\W_])" if len(wanted) <= 2 else ""
    return re.search(rf"(?<![^\W_]){re.escape(wanted)}{end}", text.casefold()) is not None


def matches(label: Label, found: object) -> bool:
    """Whether a parameter's value ``found`` holds ``label`` (see the module's doc)."""
    if isinstance(label, list):
        return any(matches(choice, found) for choice in label)
    for leaf in _leaves(found):
        if leaf is None:
            continue
        wanted, have = _number(label), _number(leaf)
        if wanted is not None and have is not None:
            if math.isclose(wanted, have, rel_tol=1e-9, abs_tol=1e-9):
                return True
        elif wanted is not None:
            if re.search(rf"(?<![\d.]){re.escape(f'{wanted:g}')}(?![\d])", str(leaf)):
                return True
        elif _text_matches(str(label), str(leaf)):
            return True
    return False


# -- figures ----------------------------------------------------------------------------------


def figures(conversations: Mapping[str, Sequence[LabelledConversation]]) -> str:
    """The set's composition: per domain conversations, turns by count, turns by role and
    conversations by split."""
    rows = [
        "domain     conversations  2/3/4 turns  turns  first  follow_up  subject_change  dev  test"
    ]
    total_roles: Counter[str] = Counter()
    total_lengths: Counter[int] = Counter()
    total_splits: Counter[str] = Counter()
    for domain, listed in conversations.items():
        roles: Counter[str] = Counter(turn.role for c in listed for turn in c.turns)
        lengths = Counter(len(c.turns) for c in listed)
        splits: Counter[str] = Counter(c.split or "none" for c in listed)
        total_roles.update(roles)
        total_lengths.update(lengths)
        total_splits.update(splits)
        rows.append(_row(domain, len(listed), lengths, roles, splits))
    count = sum(len(listed) for listed in conversations.values())
    rows.append(_row("all", count, total_lengths, total_roles, total_splits))
    return "\n".join(rows)


def _row(
    name: str, count: int, lengths: Counter[int], roles: Counter[str], splits: Counter[str]
) -> str:
    shape = "/".join(str(lengths[n]) for n in (2, 3, 4))
    return (
        f"{name:10} {count:13}  {shape:>11}  {roles.total():5}  {roles['first']:5}  "
        f"{roles['follow_up']:9}  {roles['subject_change']:14}  {splits['dev']:3}  "
        f"{splits['test']:4}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--assign", action="store_true", help="give every conversation without a split one"
    )
    args = parser.parse_args()
    conversations = load_set()
    if args.assign:
        assigned = assign_splits(conversations)
        for domain, listed in assigned.items():
            if listed != conversations[domain]:
                write_domain(domain, listed)
                print(f"wrote {path_of(domain)}")
        conversations = assigned
    problems = check_set(conversations, labelling_app())
    for problem in problems:
        print(problem)
    print(figures(conversations))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
