"""BFCL v4's non-live ``multiple`` and ``irrelevance`` questions as function-set items, and a
simplified AST check of a call's arguments against the benchmark's possible answers.

    .venv/bin/python bench/selection/bfcl.py          # fetch the data, print the split's figures

The data is the ``bfcl-eval`` wheel on PyPI (:data:`VERSION`, hash-checked), downloaded once into
``~/.cache/toolwire/bfcl`` with pip and read from the wheel itself; nothing of it is copied into
the repository. ``bfcl_split.yaml`` fixes which questions are dev and which test. The first
:data:`HELD_OUT` questions of each category are held out: they are skipped by line, never parsed.
Each question becomes a :class:`functions.FunctionItem` (its functions with their schemas
converted from BFCL's dialect to JSON schema), so ``functions.function_set_app`` turns the items
into tiny domains of schema-described tools as it does for ``functions.yaml``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from entries import Split
from functions import FunctionItem, FunctionSpec, Kind

VERSION = "2026.3.23"
WHEEL = f"bfcl_eval-{VERSION}-py3-none-any.whl"
SHA256 = "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a"
HELD_OUT = 50
"""The first questions of each category, held out: neither run nor read."""
SPLIT_PATH = Path(__file__).with_name("bfcl_split.yaml")
CATEGORIES: dict[Kind, str] = {"multiple": "multiple", "irrelevance": "irrelevance"}
"""Our kind → BFCL's category name (``BFCL_v4_<category>.json``)."""


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolwire" / "bfcl"


def wheel_path() -> Path:
    """The hash-checked wheel, downloaded with pip on first use (PyPI only, no dependencies)."""
    path = cache_folder() / WHEEL
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--dest",
                str(path.parent),
                f"bfcl-eval=={VERSION}",
            ],
            check=True,
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SHA256:
        raise RuntimeError(f"{path}: sha256 {digest}, expected {SHA256}; delete it and run again")
    return path


def _lines(archive: zipfile.ZipFile, member: str) -> Iterator[tuple[int, str]]:
    with archive.open(member) as handle:
        for number, raw in enumerate(handle):
            if number >= HELD_OUT and raw.strip():  # the held-out lines are skipped unread
                yield number, raw.decode("utf-8")


def split_numbers(kind: Kind, split: Split) -> list[int]:
    """The question numbers of a category in one half (``bfcl_split.yaml``)."""
    numbers = yaml.safe_load(SPLIT_PATH.read_text("utf-8"))[CATEGORIES[kind]][split]
    return [int(number) for number in numbers]


@dataclass(frozen=True)
class BfclItem:
    """A question as a function-set item, with the possible answers of its one right call."""

    item: FunctionItem
    possible: Mapping[str, list[Any]] | None
    """Parameter → the values BFCL accepts (``""`` among them: it may be left out); None for an
    irrelevance question."""


def load_bfcl(split: Split, kinds: Sequence[Kind] = ("multiple", "irrelevance")) -> list[BfclItem]:
    """The questions of ``split``, multiple first, each category in question order."""
    items: list[BfclItem] = []
    with zipfile.ZipFile(wheel_path()) as archive:
        for kind in kinds:
            wanted = set(split_numbers(kind, split))
            category = CATEGORIES[kind]
            answers: dict[int, dict[str, Any]] = {}
            if kind == "multiple":
                member = f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json"
                for number, line in _lines(archive, member):
                    if number in wanted:
                        answers[number] = _checked(json.loads(line), category, number)
            for number, line in _lines(archive, f"bfcl_eval/data/BFCL_v4_{category}.json"):
                if number in wanted:
                    entry = _checked(json.loads(line), category, number)
                    items.append(_item(entry, kind, split, answers.get(number)))
    return items


def _checked(entry: dict[str, Any], category: str, number: int) -> dict[str, Any]:
    if entry.get("id") != f"{category}_{number}":
        raise RuntimeError(f"line {number} of {category} holds {entry.get('id')!r}")
    return entry


def _item(
    entry: dict[str, Any], kind: Kind, split: Split, answer: dict[str, Any] | None
) -> BfclItem:
    [turn] = entry["question"]
    question = " ".join(message["content"] for message in turn if message["role"] == "user")
    functions = tuple(
        FunctionSpec(
            name=function["name"],
            description=function.get("description") or function["name"],
            parameters=json_schema_of(function.get("parameters") or {"type": "dict"}),
        )
        for function in entry["function"]
    )
    expected: str | None = None
    possible: dict[str, list[Any]] | None = None
    if answer is not None:
        [call] = answer["ground_truth"]
        [(expected, possible)] = call.items()
    item = FunctionItem(
        id=entry["id"].replace("_", "-"),
        kind=kind,
        question=question,
        functions=functions,
        expected=expected,
        split=split,
    )
    return BfclItem(item, possible)


_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def json_schema_of(schema: Mapping[str, Any]) -> dict[str, Any]:
    """BFCL's parameter dialect as JSON schema: ``dict``/``float``/``tuple``/``any`` as
    ``object``/``number``/``array``/no type; its ``optional`` flags and its defaults (often of
    the wrong type, ``"false"`` for a boolean) dropped, since the descriptions state them."""
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("optional", "default"):
            continue
        if key == "type":
            kind = _TYPES.get(value, value)
            if kind is not None:
                converted["type"] = kind
        elif key == "properties":
            converted["properties"] = {name: json_schema_of(sub) for name, sub in value.items()}
        elif key == "items" and isinstance(value, Mapping):
            converted["items"] = json_schema_of(value)
        else:
            converted[key] = value
    if converted.get("type") == "object":
        converted.setdefault("properties", {})
    return converted


# -- the arguments check -------------------------------------------------------------------------

_NOT_COMPARED = re.compile(r"[ ,./\-_*^]")


def _standard(text: str) -> str:
    """A string as BFCL compares it: lower case, without spaces and ``,./-_*^``."""
    return _NOT_COMPARED.sub("", text.lower()).replace("'", '"')


def _same(value: Any, possible: Any) -> bool:
    if isinstance(possible, str) and isinstance(value, str):
        return _standard(value) == _standard(possible)
    if isinstance(possible, bool) or isinstance(value, bool):
        return value is possible
    if isinstance(possible, (int, float)) and isinstance(value, (int, float)):
        return float(value) == float(possible)
    if isinstance(possible, list) and isinstance(value, list):
        return len(value) == len(possible) and all(map(_same, value, possible))
    if isinstance(possible, dict) and isinstance(value, dict):
        return arguments_right(value, {k: v for k, v in possible.items()})
    return bool(value == possible)


def arguments_right(arguments: Mapping[str, Any], possible: Mapping[str, list[Any]]) -> bool:
    """Whether a call's arguments are among BFCL's possible answers (a simplified form of its AST
    checker): no argument the answer does not list, every listed one given unless ``""`` is among
    its possible values, each value equal to one of them (strings compared without case, spaces
    and ``,./-_*^``; an integer equal to a float; lists element by element)."""
    if set(arguments) - set(possible):
        return False
    for name, values in possible.items():
        values = values if isinstance(values, list) else [values]
        if name not in arguments:
            if "" not in values:
                return False
            continue
        if not any(_same(arguments[name], value) for value in values if value != ""):
            return False
    return True


def main() -> int:
    for split in ("dev", "test"):
        items = load_bfcl(split)
        kinds = Counter(entry.item.kind for entry in items)
        functions = Counter(len(entry.item.functions) for entry in items)
        print(
            f"{split}: {len(items)} questions ({dict(kinds)}); functions per question "
            + ", ".join(f"{n}: {functions[n]}" for n in sorted(functions))
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
