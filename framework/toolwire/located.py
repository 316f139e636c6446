"""Configuration entries that remember where they were written, for error messages."""

from __future__ import annotations

from typing import Any

from pydantic import PrivateAttr

from toolwire.registry import SourceLocation
from toolwire.settings import Section
from toolwire.yaml_file import line_of


class Located(Section):
    """An entry that remembers where it was written, for error messages."""

    _source: SourceLocation | None = PrivateAttr(default=None)
    _node: Any = PrivateAttr(default=None)

    @property
    def source(self) -> SourceLocation | None:
        return self._source

    def line_of(self, *loc: str | int) -> int | None:
        """The line of a key inside this entry (the entry's own line when the key is absent)."""
        if self._node is None:
            return self._source.line if self._source else None
        return line_of(self._node, loc)
