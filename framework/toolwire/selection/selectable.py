"""What selection knows of each tool (its text for the index, its option for the model) and of a
domain (:class:`ToolCatalogue`: its selectable tools and their index).

Built once per domain from the built tools (never per question): a tool's short name (its words),
``description()``, ``executable_instruction()`` (the seed's yes/no question), its parameter
model's field names and descriptions, and its ``examples`` (YAML or class).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import structlog

from toolwire.errors import PLUGIN_FAILURES, describe
from toolwire.llm.base import Option, SuitabilityQuestion
from toolwire.llm.structured import json_schema
from toolwire.selection.lexical import Document, LexicalIndex
from toolwire.tools import ChatbotTool, coordinator_only_instruction

log = structlog.get_logger(__name__)

FIELD_WEIGHTS = {
    "name": 3.0,
    "description": 2.0,
    "question": 2.0,
    "parameters": 1.0,
    "examples": 2.0,
}
"""BM25 weight of a match in each part of a tool's text: a word of its name, what it does, its
question or an example says more about the tool than a word of a parameter's description."""


@dataclass(frozen=True)
class SelectableTool:
    """One selectable tool of a domain, with the texts the index and the model see."""

    qualified_name: str
    short_name: str
    description: str
    question: str
    parameters: str
    examples: tuple[str, ...]
    tool: ChatbotTool[Any] = field(compare=False, repr=False)
    """The tool itself: its parameter model, for a step that carries arguments."""
    source: str | None = None
    """The tool's ``external_source``: where its description, question and parameters'
    descriptions come from when that is outside the trusted configuration (an MCP server). The
    model sees them as external content of that source (the index reads them as they are)."""

    @classmethod
    def of(
        cls, qualified_name: str, tool: ChatbotTool[Any], examples: Sequence[str] = ()
    ) -> SelectableTool:
        """A tool's entry. Calls ``executable_instruction()`` and ``description()``: a tool whose
        methods raise or return what is not text (``None``, an empty question) is reported by
        the caller and left out of selection."""
        fields = tool.params_model.model_fields
        parameters = " ".join(
            f"{name.replace('_', ' ')} {field.description or ''}".strip()
            for name, field in fields.items()
        )
        return cls(
            qualified_name=qualified_name,
            short_name=tool.name,
            description=_text(tool.description(), "description()", blank=True),
            question=_text(tool.executable_instruction(), "executable_instruction()", blank=False),
            parameters=parameters,
            examples=tuple(_text(example, "an example", blank=True) for example in examples),
            tool=tool,
            source=tool.external_source,
        )

    def document(self) -> Document:
        return Document(
            self.qualified_name,
            {
                "name": self.short_name.replace("_", " "),
                "description": self.description,
                "question": self.question,
                "parameters": self.parameters,
                "examples": "\n".join(self.examples),
            },
        )

    def option(self) -> Option:
        """How the model sees the tool in a choice: its short name (options share a domain), and
        its parameters' JSON schema for a choice by function call."""
        return Option(
            name=self.short_name,
            question=self.question,
            description=self.description,
            parameters=self.parameters_schema,
            source=self.source,
        )

    @cached_property
    def parameters_schema(self) -> dict[str, Any]:
        """The parameter model's JSON schema by alias (the names a function call uses): made
        once per tool, since the shared schema cache holds fewer models than a large domain."""
        return json_schema(self.tool.params_model)

    @cached_property
    def parameter_names(self) -> frozenset[str]:
        """The names a call's arguments may use: each field's alias, or its name."""
        fields = self.tool.params_model.model_fields
        return frozenset(field.alias or name for name, field in fields.items())

    def suitability_question(self) -> SuitabilityQuestion:
        return SuitabilityQuestion(
            tool_name=self.qualified_name, question=self.question, source=self.source
        )


def _text(value: object, source: str, *, blank: bool) -> str:
    """``value`` if it is text selection can use; a ``TypeError`` saying what came instead (the
    caller leaves the tool out of selection and reports it, as for a method that raised)."""
    if not isinstance(value, str):
        raise TypeError(f"{source} returned {type(value).__name__}, not a str")
    if not blank and not value.strip():
        raise TypeError(f"{source} returned an empty question")
    return value


def tool_index(entries: Sequence[SelectableTool]) -> LexicalIndex:
    """The BM25 index of a domain's selectable tools."""
    return LexicalIndex([entry.document() for entry in entries], FIELD_WEIGHTS)


SIBLINGS = 2
"""How many of a tool's closest siblings :meth:`ToolCatalogue.siblings_of` gives."""


@dataclass(frozen=True)
class ToolCatalogue:
    """One domain's selectable tools and their index; built once, shared by every selection."""

    tools: tuple[SelectableTool, ...]
    index: LexicalIndex
    left_out: Mapping[str, str]
    """Tools whose ``executable_instruction()`` or ``description()`` raised at build: name →
    what it raised. Every selection reports them on the task."""
    _siblings: dict[str, tuple[str, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def build(cls, tools: Sequence[tuple[str, ChatbotTool[Any], Sequence[str]]]) -> ToolCatalogue:
        """From ``(prefixed name, tool, examples)`` in registry order."""
        entries: list[SelectableTool] = []
        left_out: dict[str, str] = {}
        for name, tool, examples in tools:
            try:
                entry = SelectableTool.of(name, tool, examples)
            except PLUGIN_FAILURES as error:  # a plugin's bug must not break the whole domain
                left_out[name] = describe(error)
                log.warning("tool_left_out_of_selection", tool=name, error=left_out[name])
                continue
            # seed 6.4: the always-false question alone keeps a tool off the suitability path
            if entry.question != coordinator_only_instruction(tool.name):
                entries.append(entry)
        return cls(tuple(entries), tool_index(entries), left_out)

    @cached_property
    def by_name(self) -> dict[str, SelectableTool]:
        return {tool.qualified_name: tool for tool in self.tools}

    def siblings_of(self, tool: SelectableTool) -> tuple[str, ...]:
        """The qualified names of the tools most like ``tool`` (the tools whose text best matches
        its own name, description and question), found on first use."""
        name = tool.qualified_name
        if name not in self._siblings:
            text = f"{tool.short_name.replace('_', ' ')} {tool.description} {tool.question}"
            hits = self.index.search(text, limit=SIBLINGS + 1)
            self._siblings[name] = tuple(hit.key for hit in hits if hit.key != name)[:SIBLINGS]
        return self._siblings[name]
