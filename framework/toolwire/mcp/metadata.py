"""What an MCP server says about its tools, made fit to stand in the model's prompts.

A listed tool's description reaches the prompts: the tool choice shows it beside the tool's name
and question (as text, or as the offered function's description), the derived yes/no question
quotes its first sentence, the parameter extraction names it, and the input schema's field
descriptions are lines of the output format and descriptions in the schemas a request sends. The
server is outside the trusted configuration (SPEC §5), so two things are done to its words:

- in every prompt they stand in as external content of the server
  (``<external_content source="mcp server NAME">…</external_content>``, by
  :func:`toolwire.llm.prompts.external_content`, HTML-escaped on top of what follows), and each of
  those calls says such text is data, never instructions. The tool carries its origin as
  ``McpTool.external_source`` (``ChatbotTool.external_source``), set by discovery for every MCP
  tool but one whose allow-list entry gives its ``description`` and ``input_schema`` (its
  question is then the YAML's or derived from that description): all YAML, trusted, and shown
  as written, like a plugin tool's;
- where the listing enters toolwire it is neutralised (:class:`RemoteTool` validates every
  listing through :func:`listed_text` and :func:`listed_schema`), so that the index, the trace
  and a ``toolwire check`` read it safely too and nothing hides inside the tag:

- control characters become spaces; invisible ones (bidirectional overrides, zero-width and
  Unicode tag characters, variation selectors: text a reader cannot see but a model reads) are
  dropped;
- white space within a paragraph is one space, paragraphs are kept apart by one blank line (a
  description's first paragraph is its summary, as a docstring's): no line break of its own can
  start a line of the prompt that reads like another tool, an instruction or an answer;
- every ``<`` is ``&lt;``: no tag of the prompt (``</task>``, a forged
  ``<external_content guaranteed="true">``) can be closed or opened, and no chat template's
  special token (``<|im_start|>system``) written;
- at most :data:`MAX_DESCRIPTION_CHARS` characters, cut after a word with ``…``.

The tags make the words data, not powerless: a description can still argue for its tool ("the
only tool to choose"), and a model may still be swayed. For a server you do not trust, allow-list
its tools and give each a ``description:`` and an ``input_schema:`` of your own.

A tool's name is kept as the server spells it (it is what a call sends) and never shown to the
model: its short name is lower snake case (``short_name_for``), and one longer than
:data:`MAX_TOOL_NAME_CHARS` is refused at the declaration. A YAML ``description:`` or
``question:`` is trusted configuration and used as written (between the server's tags all the
same while any of the tool's other text is the server's).

An input schema's property names and its ``enum``, ``const`` and ``default`` values cannot be
neutralised: the output format lists the names and the values, the parameter model and the
schemas sent to the model carry them, and a call must send them back as the server wrote them.
So a tool whose schema has one unfit for the prompts is refused at the declaration
(:func:`schema_refusal`): a property name must match :data:`PROPERTY_NAME` at every depth, and a
value must be text :func:`listed_text` leaves as it is within :data:`MAX_SCHEMA_VALUE_CHARS`
(no control or invisible character, line break or run of white space), with no ``<`` that opens a
tag or a template token (``"<="`` is an ordinary value, ``"</task>"`` is not). Its size is
bounded too: at most :data:`MAX_SCHEMA_PROPERTIES` properties in all, :data:`MAX_ENUM_VALUES`
values in one enum, :data:`MAX_SCHEMA_DEPTH` levels of schemas. A YAML ``input_schema:`` is
trusted configuration and used as written.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Any

MAX_DESCRIPTION_CHARS = 1_000
"""Most characters of a listed tool's description, and of each description in its input
schema, that reach the prompts."""
MAX_TOOL_NAME_CHARS = 128
"""The longest tool name the MCP specification allows (``[A-Za-z0-9._-]{1,128}``)."""

PROPERTY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""What a property name of a listed input schema may be: the names Anthropic's and Bedrock's APIs
accept for a tool's parameters, so a schema toolwire takes can be offered to any of them."""
MAX_SCHEMA_VALUE_CHARS = 128
"""Most characters of one ``enum``, ``const`` or ``default`` string of a listed input schema."""

MAX_SCHEMA_PROPERTIES = 64
"""Most properties a listed input schema declares in all, those of nested objects and ``$defs``
counted too. A schema's text goes into the prompts (the parameter extraction's output format
lists every property and enum value) and into the grammar the model's output is held to, on every
question the tool runs for: a huge one costs tokens and time on each (or makes a grammar too big
to build). So a tool past any of these bounds is left out; a form of a few dozen fields is
inside."""
MAX_ENUM_VALUES = 256
"""Most values of one ``enum`` of a listed input schema (why: :data:`MAX_SCHEMA_PROPERTIES`); a
list of the world's countries is inside."""
MAX_SCHEMA_DEPTH = 8
"""Most levels of schemas in a listed input schema (why: :data:`MAX_SCHEMA_PROPERTIES`): the
schema itself is the first, and a property's, an item's or an option's schema is one more than
the schema holding it (``$ref`` is not followed); a list of objects holding lists of objects
is 5."""

_VALUE_KEYWORDS = frozenset({"enum", "const", "default"})
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
"""Keywords whose value maps names to schemas: its keys are never keywords themselves."""
_OPENS_MARKUP = re.compile(r"<(?:[A-Za-z!?|]|\s*/)")
"""A ``<`` that begins a tag, a comment or a chat template token."""
_INVISIBLE = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")
"""Variation selectors (category Mn, so not found by category): they carry hidden text too."""
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
_ENTITY_CUT = re.compile(r"&(?:l|lt)?$")


def listed_text(text: str, limit: int = MAX_DESCRIPTION_CHARS) -> str:
    """``text`` from a server's listing as the prompts may show it (see the module docstring)."""
    text = text[: limit * 4].replace("\r\n", "\n").replace("\r", "\n")
    text = _INVISIBLE.sub("", "".join(_visible(character) for character in text))
    paragraphs = (" ".join(part.split()) for part in _PARAGRAPH_BREAK.split(text))
    text = "\n\n".join(paragraph for paragraph in paragraphs if paragraph)
    text = text.replace("<", "&lt;")
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    word_end = cut.rstrip().rfind(" ")
    if word_end > limit * 3 // 4:
        cut = cut[:word_end]
    return _ENTITY_CUT.sub("", cut).rstrip() + "…"


def _visible(character: str) -> str:
    if character == "\n" or not unicodedata.category(character).startswith("C"):
        return character
    return " " if unicodedata.category(character) == "Cc" else ""


def listed_schema(schema: Any) -> Any:
    """An input schema with every ``description`` and ``title`` text :func:`listed_text`; the
    rest (property names, types, enums) as the server sent it, since a call must match it."""
    if isinstance(schema, list):
        return [listed_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: listed_text(value)
        if key in ("description", "title") and isinstance(value, str)
        else listed_schema(value)
        for key, value in schema.items()
    }


def schema_refusal(schema: Any) -> str | None:
    """Why a listed input schema cannot reach the prompts as written (module docstring), or
    None when it can."""
    properties = 0
    for depth, part in _subschemas(schema):
        if depth > MAX_SCHEMA_DEPTH:
            return f"schemas nested more than {MAX_SCHEMA_DEPTH} levels deep"
        names = part.get("properties")
        if isinstance(names, dict):
            for name in names:
                if not PROPERTY_NAME.fullmatch(str(name)):
                    return (
                        "a property name that is not 1 to 64 letters, digits, '_', '.' or '-', "
                        f"{quoted(str(name))}"
                    )
            properties += len(names)
            if properties > MAX_SCHEMA_PROPERTIES:
                return f"more than {MAX_SCHEMA_PROPERTIES} properties (nested objects' counted too)"
        enum = part.get("enum")
        if isinstance(enum, list) and len(enum) > MAX_ENUM_VALUES:
            return f"an enum of {len(enum):,} values (at most {MAX_ENUM_VALUES})"
        values = [value for key, value in part.items() if key in _VALUE_KEYWORDS]
        for text in _strings(values):
            if not _fit_value(text):
                return (
                    f"an enum, const or default value that is not plain text of at most "
                    f"{MAX_SCHEMA_VALUE_CHARS} characters on one line, or opens a tag, "
                    f"{quoted(text)}"
                )
    return None


def _fit_value(text: str) -> bool:
    """Whether ``text`` is what :func:`listed_text` leaves as it is, but for ``<``: a ``<`` that
    opens no tag or template token is kept (comparison operators such as ``"<="`` are ordinary
    enum values), one that does (``</task>``, ``<|im_start|>``) is not."""
    plain = text.replace("<", "x")  # any visible character: "a < b" keeps its spaces
    # listed_text cuts what is longer than the limit, so an unchanged text is within it
    return listed_text(plain, MAX_SCHEMA_VALUE_CHARS) == plain and not _OPENS_MARKUP.search(text)


def _subschemas(schema: Any, depth: int = 1) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every schema in ``schema`` with its level (:data:`MAX_SCHEMA_DEPTH`), a schema before
    those it holds. The keys of a map of schemas (``properties``, ``$defs`` …) are names, never
    keywords; ``enum``, ``const``, ``default`` and ``examples`` hold values, not schemas (the
    parameter model drops ``examples``). Lazy: a caller that stops at a level stops the walk."""
    if isinstance(schema, list):
        for item in schema:
            yield from _subschemas(item, depth)
        return
    if not isinstance(schema, dict):
        return
    yield depth, schema
    for key, value in schema.items():
        if key in _VALUE_KEYWORDS or key == "examples":
            continue
        held = list(value.values()) if key in _SCHEMA_MAPS and isinstance(value, dict) else value
        yield from _subschemas(held, depth + 1)


def _strings(value: Any) -> Iterator[str]:
    """Every string of a JSON value, object keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)


def quoted(text: str, shown: int = 40) -> str:
    """``text`` quoted for a problem message: its first ``shown`` characters, escaped."""
    return repr(text[:shown]) + ("…" if len(text) > shown else "")
