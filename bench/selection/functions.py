"""The function-spec selection set (``functions.yaml``): its model, loader, check and figures,
and the app that turns each item into a tiny domain of schema-described tools.

    .venv/bin/python bench/selection/functions.py     # check the set, then print its figures

Each item is a question with its own few candidate functions (name, description, JSON-schema
parameters, as function-calling APIs give them): ``multiple`` items have exactly one right
function among similar ones, ``irrelevance`` items none. :func:`function_set_app` declares every
item's functions the way a user brings schema-described tools, as an allow-listed
``mcp_servers:`` entry whose tools carry their ``input_schema``, so toolwire's own MCP discovery
makes the tools (parameter model, description, derived yes/no question) and starts no server.
Import it with this folder on ``sys.path`` (a script here has it there already).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from entries import SPLITS, Entry, Split, read_entries, repeated
from pydantic import BaseModel, ConfigDict, Field

from toolwire import App
from toolwire.errors import Problem
from toolwire.mcp.declarations import short_name_for
from toolwire.tools import TOOL_NAME_PATTERN

DEFAULT_PATH = Path(__file__).with_name("functions.yaml")
Kind = Literal["multiple", "irrelevance"]
KINDS: tuple[Kind, ...] = ("multiple", "irrelevance")
CANDIDATES: dict[Kind, tuple[int, int]] = {"multiple": (2, 4), "irrelevance": (1, 3)}
"""How many functions an item of each kind offers: at least, at most."""
UNUSED_URL = "http://127.0.0.1:9/mcp"
"""The declared servers' address; never contacted (every tool's schema is in the declaration and
the evaluation never calls a tool)."""


class FunctionSpec(BaseModel):
    """One candidate function, as a function-calling API describes it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    parameters: dict[str, Any]
    """A JSON schema of type object: ``properties`` and ``required``."""


class FunctionItem(Entry):
    """One question, its candidate functions and the one that should take it (or none)."""

    kind: Kind
    question: str = Field(min_length=1)
    functions: tuple[FunctionSpec, ...] = Field(min_length=1)
    expected: str | None
    """The name of the function that does what the question asks; None: no function does."""

    @property
    def domain(self) -> str:
        """The item's tiny domain in :func:`function_set_app`."""
        return self.id.replace("-", "_")

    def tool_name(self, function: str) -> str:
        """The prefixed toolwire name a function of this item gets."""
        return f"{self.domain}.{short_name_for(function)}"

    @property
    def expected_tools(self) -> frozenset[str]:
        """The prefixed names of the tools that should run: one, or none."""
        return frozenset([self.tool_name(self.expected)] if self.expected else [])


def load_functions(
    path: str | os.PathLike[str] | None = None, split: Split | None = None
) -> list[FunctionItem]:
    """The items of the set (``functions.yaml`` next to this module by default), in file order,
    only those of ``split`` when given. Raises one ``ConfigError`` listing every malformed entry."""
    shape = "{id, kind, question, functions, expected, split}"
    return read_entries(Path(path or DEFAULT_PATH), "items", FunctionItem, shape, split)


def check_functions(
    items: Sequence[FunctionItem], path: str | os.PathLike[str] | None = None
) -> list[Problem]:
    """Every inconsistency of the set: a repeated id or question, a function name repeated in an
    item or not usable as a tool name, an expected name that is not among the item's functions,
    a kind that disagrees with its expectation or its number of functions, parameters that are
    not an object schema (or require a property they do not define). Empty when sound."""
    where = str(path if path is not None else DEFAULT_PATH)
    problems: list[Problem] = []

    def report(item: FunctionItem, text: str) -> None:
        problems.append(Problem(f"{item.id}: {text}", where, item.line))

    for item, text in repeated(items, lambda item: item.question, "question"):
        report(item, text)
    for item in items:
        for text in _item_problems(item):
            report(item, text)
    return problems


def _item_problems(item: FunctionItem) -> list[str]:
    problems: list[str] = []
    names = [function.name for function in item.functions]
    repeated = sorted(name for name, count in Counter(names).items() if count > 1)
    if repeated:
        problems.append(f"function name(s) {', '.join(repeated)} given twice; names are unique")
    short_names = Counter(short_name_for(name) for name in set(names))
    for name in names:
        short = short_name_for(name)
        if not TOOL_NAME_PATTERN.match(short) or short_names[short] > 1:
            problems.append(
                f"function {name!r} becomes the tool name {short!r}, which is not lower snake "
                "case or is another function's too; rename it"
            )
    if item.expected is not None and item.expected not in names:
        problems.append(
            f"expected {item.expected!r} is not among the item's functions ({', '.join(names)})"
        )
    if (item.kind == "multiple") != (item.expected is not None):
        problems.append(
            "a 'multiple' item names its one right function in 'expected'"
            if item.kind == "multiple"
            else "an 'irrelevance' item has 'expected: null'"
        )
    least, most = CANDIDATES[item.kind]
    if not least <= len(names) <= most:
        problems.append(
            f"an item of kind {item.kind!r} offers {least} to {most} functions, this one "
            f"{len(names)}"
        )
    for function in item.functions:
        problems += [f"function {function.name!r}: {text}" for text in _schema_problems(function)]
    return problems


def _schema_problems(function: FunctionSpec) -> list[str]:
    schema = function.parameters
    if schema.get("type") != "object":
        return ["parameters must be a JSON schema with 'type: object'"]
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return ["parameters.properties must map each parameter to its schema"]
    problems = [
        f"parameter {name!r} has no 'type'"
        for name, property_schema in properties.items()
        if not isinstance(property_schema, dict) or "type" not in property_schema
    ]
    required = schema.get("required", [])
    missing = [name for name in required if name not in properties]
    if missing:
        problems.append(f"required parameter(s) {', '.join(missing)} not among its properties")
    return problems


QuestionFor = Callable[[FunctionSpec], str | None]
"""A function's yes/no question for the declaration, or None: toolwire derives it."""


def function_set_config(
    items: Sequence[FunctionItem], question_for: QuestionFor | None = None
) -> dict[str, Any]:
    """The app configuration that declares every item as a domain with one allow-listed MCP
    server holding its functions (description and ``input_schema`` given, so none is started).
    ``question_for`` sets a function's ``question:`` (otherwise toolwire derives it)."""
    domains = [
        {"name": item.domain, "description": f"The functions of item {item.id}."} for item in items
    ]
    servers = []
    for item in items:
        tools = []
        for function in item.functions:
            tool: dict[str, Any] = {
                "name": function.name,
                "description": function.description,
                "input_schema": function.parameters,
            }
            question = question_for(function) if question_for else None
            if question is not None:
                tool["question"] = question
            tools.append(tool)
        servers.append(
            {"name": item.domain, "domain": item.domain, "url": UNUSED_URL, "tools": tools}
        )
    return {"domains": domains, "mcp_servers": servers}


def function_set_app(
    items: Sequence[FunctionItem], question_for: QuestionFor | None = None, **kwargs: Any
) -> App:
    """The app of :func:`function_set_config` (``kwargs``, such as ``llm``, go to ``App.load``);
    entry points are ignored, building it starts nothing."""
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "toolwire.yaml"
        config.write_text(yaml.safe_dump(function_set_config(items, question_for)), "utf-8")
        return App.load(config, plugins=(), load_entry_points=False, **kwargs)


def summary(items: Sequence[FunctionItem]) -> str:
    """The set's composition: items by kind and split, functions per item."""
    lines = [f"{len(items)} items"]
    for kind in KINDS:
        of_kind = [item for item in items if item.kind == kind]
        per_split = Counter(item.split for item in of_kind)
        functions = Counter(len(item.functions) for item in of_kind)
        lines.append(
            f"  {kind:<12} {len(of_kind):>3}: "
            + ", ".join(f"{split} {per_split[split]}" for split in SPLITS)
            + "; functions per item "
            + ", ".join(f"{n}: {functions[n]}" for n in sorted(functions))
        )
    return "\n".join(lines)


def main() -> int:
    """Check the set, print the problems or the figures."""
    items = load_functions()
    problems = check_functions(items)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(summary(items))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
