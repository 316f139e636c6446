"""What the labelled sets of ``bench/selection`` share: a YAML file holding one list of entries,
each validated by a pydantic model that remembers the line it starts at, every malformed entry
reported at once with its ``path:line``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from toolwire.config import format_loc, line_of
from toolwire.errors import ConfigError, Problem
from toolwire.yaml_file import read_yaml

Split = Literal["dev", "test"]
SPLITS: tuple[Split, ...] = ("dev", "test")


class Entry(BaseModel):
    """One entry of a set; ``line`` is where it starts in the file it was read from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    split: Split
    """``dev``: prompts may be tuned on it; ``test``: reported, never tuned on."""

    _line: int | None = PrivateAttr(default=None)

    @property
    def line(self) -> int | None:
        """Where the entry starts in the file it was read from."""
        return self._line


E = TypeVar("E", bound=Entry)


def read_entries(
    path: Path, key: str, model: type[E], shape: str, split: Split | None = None
) -> list[E]:
    """The entries listed under ``key`` in the YAML file ``path``, in file order, only those of
    ``split`` when given. Raises one
    ``ConfigError`` listing every problem: an unknown top-level key, ``key`` that is not a list
    (``shape`` says what an entry holds), every field of every malformed entry."""
    document = read_yaml(path)
    problems: list[Problem] = []
    unknown = sorted(set(document.data) - {key})
    if unknown:
        problems.append(
            Problem(
                f"unknown top-level key(s) {', '.join(unknown)}; only {key!r} is read",
                str(path),
                line_of(document.node, [unknown[0]]),
            )
        )
    listed = document.data.get(key)
    if not isinstance(listed, list):
        problems.append(
            Problem(
                f"{key!r} must be a list of entries ({shape})",
                str(path),
                line_of(document.node, [key]),
            )
        )
        raise ConfigError(problems)
    entries: list[E] = []
    for index, data in enumerate(listed):
        try:
            entry = model.model_validate(data)
        except ValidationError as error:
            for item in error.errors():
                where = [key, index, *item["loc"]]
                problems.append(
                    Problem(
                        f"{format_loc(where)}: {item['msg']}",
                        str(path),
                        line_of(document.node, where),
                    )
                )
            continue
        entry._line = line_of(document.node, [key, index])
        entries.append(entry)
    if problems:
        raise ConfigError(problems)
    return [entry for entry in entries if split is None or entry.split == split]


def repeated(entries: Sequence[E], text_of: Callable[[E], str], what: str) -> list[tuple[E, str]]:
    """Each entry whose id, or whose text (``text_of``, compared without case and surrounding
    space; ``what`` names it), an earlier entry has already, with the problem to report."""
    first_of_id: dict[str, E] = {}
    first_of_text: dict[str, E] = {}
    found: list[tuple[E, str]] = []
    for entry in entries:
        earlier = first_of_id.setdefault(entry.id, entry)
        if earlier is not entry:
            found.append(
                (entry, f"the id is used again (first at line {earlier.line}); ids are unique")
            )
        same = first_of_text.setdefault(text_of(entry).strip().casefold(), entry)
        if same is not entry:
            found.append((entry, f"the same {what} as {same.id}; remove one of them"))
    return found
