"""Read one YAML configuration file safely: a hostile or broken file is a located problem.

Configuration comes from the app and from every installed plugin, so the reader assumes nothing
about a file: it reads only a regular file of at most ``MAX_FILE_BYTES`` (a path that is a
symlink to ``/dev/zero`` or a FIFO is refused, not read forever), decodes it as UTF-8 (a bad
byte is reported at its line), refuses nesting deeper than ``MAX_DEPTH`` before the parser builds
it (a 100k-deep ``[[[…`` would crash or stall the C parser), refuses more than ``MAX_NODES``
values before composing them (building the node tree and the data costs some 15 µs a value, so a
MiB of ``- 1`` lines took seconds to refuse), and refuses aliases beyond
``MAX_ALIASES`` or expanding the document by more than ``MAX_ALIAS_EXPANSION`` nodes (a
"billion laughs" file is a few hundred bytes). A scalar its tag cannot convert (an integer of
more than 4,300 digits, a date such as ``2020-13-45``, ``!!bool maybe``) is refused at its line
too. Every refusal is a ``ConfigError`` at ``path:line:``, never a traceback.

The safe loader is ruamel.yaml's, with its C parser when installed; its node tree keeps line
numbers for the validation messages (``toolwire.config``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.constructor import ConstructorError, SafeConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, NodeEvent
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError

from toolwire.errors import ConfigError, Problem

MAX_FILE_BYTES = 1_048_576
"""A configuration file is a few kilobytes; one MiB leaves room for generated files."""
MAX_NODES = 50_000
"""Values (scalars, mappings, lists and aliases) a file may hold; the largest shipped file has
about 6,000. Counted on the parser's events, which cost a tenth of composing them."""
MAX_DEPTH = 64
"""Nested collections (mappings and lists) a file may open inside each other."""
MAX_ALIASES = 100
"""``*name`` references a file may use (merge keys ``<<: *defaults`` included)."""
MAX_ALIAS_EXPANSION = 10_000
"""Nodes that aliases may add to the document once they are expanded."""


@dataclass(frozen=True)
class YamlDocument:
    """A file's top-level mapping twice: as plain data and as the node tree it was built from.

    The plain data (dicts, lists, scalars resolved like ``yaml.safe_load``) is what gets
    validated; the nodes are kept only for their ``start_mark`` line numbers.
    """

    data: dict[str, Any]
    node: MappingNode | None
    """None for an empty file."""


def read_yaml(path: Path) -> YamlDocument:
    """Read one YAML file within the limits above; raise a located ``ConfigError`` otherwise."""
    where = str(path)
    text = _decode(_read_regular_file(path), where)
    yaml = YAML(typ="safe", pure=False)
    yaml.Constructor = _LocatedConstructor
    try:
        first_alias_line = _check_structure(yaml, text, where)
        node = yaml.compose(text)
        if node is not None and first_alias_line is not None:
            _check_alias_expansion(node, where, first_alias_line)
        # Constructing also rejects duplicate keys and unknown tags, both located by line.
        data = yaml.constructor.construct_document(node) if node is not None else None
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        message = " ".join(part for part in (error.context, error.problem) if part)
        raise ConfigError(Problem(f"invalid YAML: {message}", where, line)) from None
    except ReaderError as error:  # a control character: the reader knows only its offset
        line = text.count("\n", 0, error.position) + 1
        code = error.character if isinstance(error.character, int) else ord(error.character)
        raise ConfigError(
            Problem(f"invalid YAML: character U+{code:04X} is not allowed", where, line)
        ) from None
    except YAMLError as error:
        raise ConfigError(Problem(f"invalid YAML: {error}", where)) from None
    if node is None or data is None:  # no document, or an empty one ("---")
        return YamlDocument({}, None)
    if not isinstance(node, MappingNode) or not isinstance(data, dict):
        raise ConfigError(Problem("the file must contain a mapping at its top level", where, 1))
    return YamlDocument(to_plain(data), node)


class _LocatedConstructor(SafeConstructor):
    """The safe constructor, with a scalar its tag cannot convert as a located error.

    The safe constructor converts a resolved scalar with ``int()``, ``datetime()`` or a lookup,
    and lets their ``ValueError`` or ``KeyError`` out without a mark: ``2020-13-45`` (a
    timestamp), 5,000 digits (Python's limit on converting digits to an int), ``!!bool maybe``.
    """

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, KeyError) as error:
            value = str(node.value)
            shown = f"{value[:40]}…" if len(value) > 40 else value
            kind = str(node.tag).rsplit(":", 1)[-1]
            why = str(error).split(";")[0]  # not Python's advice to raise its digit limit
            raise ConstructorError(
                problem=f"the value {shown!r} cannot be read as {kind} ({why}); quote it if it "
                "is text",
                problem_mark=node.start_mark,
            ) from None


def _read_regular_file(path: Path) -> bytes:
    """The bytes of a regular file of at most ``MAX_FILE_BYTES``.

    Opened without blocking (a FIFO would otherwise wait for a writer) and checked on the open
    descriptor, so the file that is read is the file that was checked.
    """
    where = str(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise ConfigError(Problem(f"cannot read configuration: {error.strerror}", where)) from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(
                Problem(
                    f"cannot read configuration: not a regular file ({_file_kind(info.st_mode)}); "
                    "point the configuration at a YAML file",
                    where,
                )
            )
        if info.st_size > MAX_FILE_BYTES:
            raise ConfigError(_too_large(where, info.st_size))
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(descriptor, 65_536):
            size += len(chunk)
            if size > MAX_FILE_BYTES:  # it grew while being read
                raise ConfigError(_too_large(where, size))
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as error:
        raise ConfigError(Problem(f"cannot read configuration: {error.strerror}", where)) from None
    finally:
        os.close(descriptor)


def _file_kind(mode: int) -> str:
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISSOCK: "a socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), "not a file")


def _too_large(where: str, size: int) -> Problem:
    return Problem(
        f"the file is {size} bytes; configuration files may be at most {MAX_FILE_BYTES} bytes",
        where,
    )


def _decode(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line_start = raw.rfind(b"\n", 0, error.start) + 1
        line = raw.count(b"\n", 0, error.start) + 1
        column = error.start - line_start + 1
        raise ConfigError(
            Problem(
                f"the file is not UTF-8: byte 0x{raw[error.start]:02x} at column {column}; "
                "save it as UTF-8",
                where,
                line,
            )
        ) from None


def _check_structure(yaml: YAML, text: str, where: str) -> int | None:
    """Refuse too many values, deep nesting and too many aliases from the parser's events.

    The events are read one at a time, before anything is composed, so the check stops at the
    first value over a limit after reading only that much of the file. Returns the line of the
    first alias, if any.
    """
    nodes = 0
    depth = 0
    aliases = 0
    first_alias_line: int | None = None
    for event in yaml.parse(text):
        refusal: str | None = None
        if isinstance(event, NodeEvent):
            nodes += 1
            if nodes > MAX_NODES:
                refusal = (
                    f"more than {MAX_NODES} values (scalars, mappings, lists); a configuration "
                    "file holds far fewer: split it or shorten its lists"
                )
        if isinstance(event, CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                refusal = (
                    f"nesting deeper than {MAX_DEPTH} levels of mappings and lists; "
                    "flatten the structure"
                )
        elif isinstance(event, CollectionEndEvent):
            depth -= 1
        elif isinstance(event, AliasEvent):
            aliases += 1
            first_alias_line = first_alias_line or _line(event)
            if aliases > MAX_ALIASES:
                refusal = (
                    f"more than {MAX_ALIASES} aliases (*name); write the values out or split "
                    "the file"
                )
        if refusal is not None:
            raise ConfigError(Problem(refusal, where, _line(event)))
    return first_alias_line


def _check_alias_expansion(root: Node, where: str, first_alias_line: int) -> None:
    """Refuse a document whose aliases would multiply it (nested aliases, "billion laughs").

    The composed tree shares an aliased node wherever it is referenced; its expanded size is
    counted once per node (memoised), so the count itself costs one visit per distinct node. An
    alias inside the collection it names (``&x [*x]``) would expand for ever: refused too.
    """
    expanded: dict[int, int] = {}
    counting: set[int] = set()

    def size(node: Node) -> int:
        known = expanded.get(id(node))
        if known is not None:
            return known
        if id(node) in counting:
            raise ConfigError(
                Problem(
                    "the anchor (&name) on this line is used inside its own value (*name); a "
                    "configuration cannot be recursive: write the values out",
                    where,
                    node.start_mark.line + 1,
                )
            )
        counting.add(id(node))
        total = 1
        if isinstance(node, SequenceNode):
            total += sum(size(item) for item in node.value)
        elif isinstance(node, MappingNode):
            total += sum(size(key) + size(value) for key, value in node.value)
        expanded[id(node)] = total
        return total

    total = size(root)
    added = total - len(expanded)
    if added > MAX_ALIAS_EXPANSION:
        raise ConfigError(
            Problem(
                f"aliases (*name, the first on this line) expand this file by {added} nodes, "
                f"more than the {MAX_ALIAS_EXPANSION} allowed; write the values out instead of "
                "nesting aliases",
                where,
                first_alias_line,
            )
        )


def _line(event: Any) -> int | None:
    mark = getattr(event, "start_mark", None)
    return mark.line + 1 if mark is not None else None


def to_plain(node: Any) -> Any:
    """Constructed YAML with every mapping key as a string (``1: x`` → ``{"1": "x"}``)."""
    if isinstance(node, Mapping):
        return {str(key): to_plain(value) for key, value in node.items()}
    if isinstance(node, list):
        return [to_plain(item) for item in node]
    return node


def _child(node: Node, key: str | int) -> tuple[Node, Node] | None:
    """The (located part, value) for ``key`` in a mapping or sequence node, if present.

    In a mapping the located part is the key's node (its line is where the key is written);
    the last occurrence wins, as in the constructed data.
    """
    if isinstance(node, MappingNode):
        for key_node, value_node in reversed(node.value):
            if isinstance(key_node, ScalarNode) and key_node.value == str(key):
                return key_node, value_node
    elif isinstance(node, SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
        item: Node = node.value[key]
        return item, item
    return None


def node_at(node: Node | None, loc: Sequence[str | int]) -> Node | None:
    """The node at ``loc`` (None when some part of it does not exist)."""
    for key in loc:
        found = _child(node, key) if node is not None else None
        if found is None:
            return None
        node = found[1]
    return node


def line_of(node: Node | None, loc: Sequence[str | int]) -> int | None:
    """The 1-based line of the deepest part of ``loc`` that exists in the node tree."""
    if not isinstance(node, MappingNode | SequenceNode):
        return None
    line: int = node.start_mark.line + 1
    for key in loc:
        found = _child(node, key)
        if found is None:
            break
        line = found[0].start_mark.line + 1
        node = found[1]
    return line
