"""YAML configuration → pydantic models, with every problem located by file and line.

Two kinds of file share one vocabulary: the app's own ``config/toolwire.yaml`` (``AppConfig``:
run-time sections, ``default_domain``, ``domains``, ``tools``) and the YAML a plugin ships inside
its package (``PluginConfigFile``: only ``domains`` and ``tools``). A file is read by
``toolwire.yaml_file`` (ruamel.yaml's safe loader within size, depth and alias limits), whose
node tree keeps line numbers, and validated as a whole: every problem of the file is collected
into one ``ConfigError``, never a traceback. How declarations from several files are
merged is described in ``toolwire.build``.
"""

from __future__ import annotations

import copy
import os
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from toolwire.errors import ConfigError, Problem, did_you_mean
from toolwire.located import Located
from toolwire.mcp.declarations import McpServerEntry
from toolwire.registry import FollowOnProblem, SourceLocation, format_loc
from toolwire.settings import (
    LLMSettings,
    OrchestratorSettings,
    ServerSettings,
    SessionSettings,
)
from toolwire.yaml_file import YamlDocument, line_of, node_at, read_yaml

CONFIG_ENV = "TOOLWIRE_CONFIG"
DEFAULT_CONFIG_PATH = Path("config") / "toolwire.yaml"


class ToolEntry(Located):
    """One tool declared in YAML. Omitted keys keep the value of an earlier declaration.

    Strict: pydantic would read ``priority: "5"`` as 5, ``priority: true`` as 1 and
    ``enabled: "no"`` as False; a value of the wrong type is a problem at its line instead, as
    ``register(..., priority=...)`` refuses one in a plugin's hook."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    name: str | None = None
    """Short name; defaults to the class's ``name``."""
    class_: str | None = Field(default=None, alias="class")
    """``package.module:ClassName``; required unless this entry overrides an earlier one."""
    domain: str | None = None
    """Defaults to ``default_domain`` (app file) or the plugin's only domain."""
    priority: int | None = None
    enabled: bool | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    """Validated against the class's ``settings_model``; merged key by key over earlier files."""
    inject: dict[str, str] = Field(default_factory=dict)
    """Constructor parameter → tool name (short or prefixed); overrides autowiring by type."""
    examples: list[str] | None = None
    """Sample user messages the tool answers; tool selection finds the tool by them too.
    Replaces the class's ``examples``."""
    own_event_loop: bool | None = None
    """Run the tool's ``async`` methods on an event loop of their own, in a tool thread
    (``ChatbotTool.own_event_loop``); defaults to the class's."""


class DomainEntry(Located):
    """One domain declared in YAML; fields mirror ``toolwire.registry.DomainSpec``."""

    name: str
    description: str | None = None
    instructions: str | None = None
    prompt_types: list[str] | None = None
    rag_tool: str | None = None
    deep_fallback: dict[str, str] | None = None
    excluded_tools: list[str] | None = None
    orchestrator: str | None = None


class PluginConfigFile(Located):
    """A YAML file a plugin ships: domains and tools only (run-time settings belong to the app)."""

    domains: list[DomainEntry] = Field(default_factory=list)
    tools: list[ToolEntry] = Field(default_factory=list)
    _left_out: dict[str, list[Located]] = PrivateAttr(default_factory=dict)

    def left_out(self, key: str) -> list[Located]:
        """The entries of the list ``key`` (``tools``, ``domains``) that were left out for their
        problems (reported with the file's), each as its entry model made of the keys it wrote
        with the right type (``name``, ``class``, ``domain``) and located at its line, unchecked
        otherwise: what a reference to it needs, to say it was left out."""
        return self._left_out.get(key, [])


F = TypeVar("F", bound=PluginConfigFile)


class AppConfig(PluginConfigFile):
    """The application's configuration (``config/toolwire.yaml``)."""

    llm: LLMSettings = Field(default_factory=LLMSettings)
    orchestrator: OrchestratorSettings = Field(default_factory=OrchestratorSettings)
    sessions: SessionSettings = Field(default_factory=SessionSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    default_domain: str | None = None
    """The domain a question goes to when the caller names none."""
    mcp_servers: list[McpServerEntry] = Field(default_factory=list)
    """External MCP servers whose tools join a domain (``toolwire.mcp.declarations``)."""

    @property
    def path(self) -> str | None:
        """The file this configuration was read from (None: built-in defaults)."""
        return self.source.path if self.source else None


def config_path_for(explicit: str | os.PathLike[str] | None) -> tuple[Path | None, bool]:
    """Which file to read and whether it must exist: explicit → $TOOLWIRE_CONFIG → default."""
    if explicit is not None:
        return Path(explicit), True
    from_env = os.environ.get(CONFIG_ENV)
    if from_env:
        return Path(from_env), True
    return DEFAULT_CONFIG_PATH, False


def load_app_config(explicit: str | os.PathLike[str] | None = None) -> AppConfig:
    """Read the app's configuration, raising one ``ConfigError`` with all its problems."""
    config, problems = parse_app_config(explicit)
    if problems:
        raise ConfigError(problems)
    return config


def parse_app_config(
    explicit: str | os.PathLike[str] | None = None,
) -> tuple[AppConfig, list[Problem]]:
    """The app's configuration and its problems; a missing default file is the defaults.

    The valid part is returned next to the problems so the build can go on and report the
    problems of the rest (an unimportable class, an unknown domain) in the same run.
    """
    path, required = config_path_for(explicit)
    if path is None or (not required and not path.exists()):
        return AppConfig(), []
    return parse_file(path, AppConfig)


MAX_PROBLEMS_SHOWN = 100
"""Validation problems listed for one file; the rest are counted. A generated file with
thousands of wrong keys is read in a moment (locating each took a scan of its mapping: a 600 kB
file took a minute) and its report stays readable."""


def load_file(path: Path, model: type[F]) -> F:
    """Read and validate one YAML file; raise one ``ConfigError`` listing all its problems."""
    validated, problems = parse_file(path, model)
    if problems:
        raise ConfigError(problems)
    return validated


def parse_file(path: Path, model: type[F]) -> tuple[F, list[Problem]]:
    """Read one YAML file: its valid part and every problem. Unreadable YAML raises."""
    return validate_node(read_yaml(path), model, str(path))


def validate_node(document: YamlDocument, model: type[F], path: str) -> tuple[F, list[Problem]]:
    """Validate a file entry by entry, so one bad entry hides no other problem.

    Returns the valid part (invalid entries left out, remembered by what they name: see
    ``PluginConfigFile.left_out``; invalid keys at their defaults: see ``_valid_part``) and
    every problem, each located at ``path:line``, in line order.
    """
    plain = dict(document.data)
    node = document.node
    problems: list[Problem] = []
    unreported = 0

    def report(error: ValidationError, prefix: tuple[str | int, ...] = ()) -> None:
        nonlocal unreported
        for item in error.errors():
            if len(problems) >= MAX_PROBLEMS_SHOWN:
                unreported += 1
                continue
            loc = (*prefix, *item["loc"])
            problems.append(Problem(_describe(model, item, loc), path, line_of(node, loc)))

    entries: dict[str, list[Located]] = {}
    left_out: dict[str, list[Located]] = {}
    for key, entry_model in _entry_lists(model):
        raw = plain.pop(key, None) or []
        entries[key] = []
        if not isinstance(raw, list):
            problems.append(
                Problem(f"{key}: must be a list of entries", path, line_of(node, [key]))
            )
            continue
        for index, item in enumerate(raw):
            where = SourceLocation(path, line_of(node, [key, index]))
            try:
                entry = entry_model.model_validate(item)
            except ValidationError as error:
                report(error, (key, index))
                left_out.setdefault(key, []).extend(_left_out_entry(entry_model, item, where))
                continue
            entry._source = where
            entry._node = node_at(node, [key, index])
            entries[key].append(entry)
    try:
        validated = model.model_validate(plain)
    except ValidationError as error:
        report(error)
        validated = _valid_part(model, plain, error)
    validated.tools = [e for e in entries["tools"] if isinstance(e, ToolEntry)]
    validated.domains = [e for e in entries["domains"] if isinstance(e, DomainEntry)]
    if isinstance(validated, AppConfig):
        servers = entries["mcp_servers"]
        validated.mcp_servers = [e for e in servers if isinstance(e, McpServerEntry)]
    validated._source = SourceLocation(path, 1)
    validated._node = node
    validated._left_out = left_out
    problems = in_file_order(problems)
    if unreported:
        problems.append(
            Problem(f"… and {unreported} more problem(s) in this file; fix these first", path)
        )
    return validated, problems


LEFT_OUT_KEYS = ("name", "class", "domain")
"""The keys a refused entry is remembered by (see ``PluginConfigFile.left_out``)."""


def _left_out_entry(model: type[Located], item: object, where: SourceLocation) -> list[Located]:
    """A refused entry as ``model``, made of its ``LEFT_OUT_KEYS`` that are strings (an entry
    with no ``name`` is found by its ``class``: the build imports it for its name and class)."""
    if not isinstance(item, dict):
        return []
    aliases = {info.alias or name: name for name, info in model.model_fields.items()}
    written = {
        aliases[key]: item[key]
        for key in LEFT_OUT_KEYS
        if key in aliases and isinstance(item.get(key), str)
    }
    required = [name for name, info in model.model_fields.items() if info.is_required()]
    if not written or any(name not in written for name in required):
        return []
    entry = model.model_construct(**written)
    entry._source = where
    return [entry]


WHOLE_SECTIONS = frozenset({"llm"})
"""Sections that a refused key takes with it, back to their defaults: the load checks their keys
together (the ``openai`` provider needs a server or a model, a profile's window bounds
``max_part_tokens``), and a refused ``base_url`` left at its default would have it report a
missing server the file does name."""


def _valid_part(model: type[F], data: dict[str, Any], error: ValidationError) -> F:
    """``data`` validated without the keys ``error`` refused, each then at its default.

    Only a refused key goes, not its whole section (but for the ``WHOLE_SECTIONS``): the checks
    made after validation (a registered ``sessions.store``) still read the section's other keys,
    so ``sessions: {store: sqllite, ttl_s: 1d}`` has both its problems reported in one run. A key
    under a list takes the whole list (its other items would shift), and a problem of a section
    as a whole (a missing key in it, a check of several keys) the section.
    """
    data = copy.deepcopy(data)
    while True:
        refused = {_refused_key(data, item["loc"]) for item in error.errors()} - {()}
        if not refused:  # a problem of the file as a whole: nothing to leave out
            raise error
        for key in sorted(refused, key=len):  # a section before a key in it
            _remove(data, key)
        try:
            return model.model_validate(data)
        except ValidationError as again:  # a check of several keys, one of them now gone
            error = again


def _refused_key(data: dict[str, Any], loc: Sequence[str | int]) -> tuple[str | int, ...]:
    """The deepest key along an error's ``loc`` that the data writes, through mappings only (the
    section itself, for one of the ``WHOLE_SECTIONS``)."""
    key: list[str | int] = []
    node: Any = data
    for part in loc:
        if not isinstance(node, dict) or part not in node or WHOLE_SECTIONS.intersection(key):
            break
        key.append(part)
        node = node[part]
    return tuple(key)


def _remove(data: dict[str, Any], key: tuple[str | int, ...]) -> None:
    """Remove ``key`` from the nested mappings of ``data`` (nothing, when a section above it
    was removed already)."""
    node: Any = data
    for part in key[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(key[-1], None)


def in_file_order(problems: Sequence[Problem]) -> list[Problem]:
    """``problems`` by file, in the order each file first appears, and by line within a file
    (unlocated ones last): the order a reader goes through a file in, whichever check found
    each problem. A file's follow-on problems (``FollowOnProblem``: a reference to an entry
    left out for its own problems) come after its other ones, so an effect never precedes its
    cause (a ``rag_tool`` at line 2 naming an entry whose key at line 5 is wrong)."""
    files: dict[str | None, int] = {}
    for problem in problems:
        files.setdefault(problem.path, len(files))
    return sorted(
        problems,
        key=lambda problem: (
            files[problem.path],
            isinstance(problem, FollowOnProblem),
            problem.line is None,
            problem.line or 0,
        ),
    )


def _entry_lists(model: type[BaseModel]) -> list[tuple[str, type[Located]]]:
    """The lists of located entries a file of this kind may hold, validated entry by entry."""
    lists: list[tuple[str, type[Located]]] = [("tools", ToolEntry), ("domains", DomainEntry)]
    if issubclass(model, AppConfig):
        lists.append(("mcp_servers", McpServerEntry))
    return lists


def _describe(model: type[BaseModel], item: Any, loc: tuple[str | int, ...]) -> str:
    where = format_loc(loc)
    if item["type"] == "extra_forbidden":
        return unknown_key_message(model, loc)
    if item["type"] == "missing":
        return f"{where}: required key is missing"
    return f"{where}: {item['msg']}" if where else str(item["msg"])


def unknown_key_message(model: type[BaseModel], loc: Sequence[str | int]) -> str:
    """What pydantic's ``extra_forbidden`` error at ``loc`` (in data validated by ``model``)
    tells a user: the key, the closest allowed one, and every allowed key there."""
    section = _model_at(model, loc[:-1])
    removed: dict[str, str] = getattr(section, "removed_keys", {})
    if str(loc[-1]) in removed:
        return f"the key {loc[-1]!r} was removed; {removed[str(loc[-1])]}"
    allowed = _field_names(section)
    hint = did_you_mean(str(loc[-1]), allowed)
    return f"unknown key {loc[-1]!r}; {hint}allowed keys: {', '.join(allowed) or 'none'}"


def _field_names(model: type[BaseModel] | None) -> list[str]:
    if model is None:
        return []
    return [info.alias or name for name, info in model.model_fields.items()]


def _model_at(model: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    current: type[BaseModel] | None = model
    for key in loc:
        if current is None:
            return None
        if isinstance(key, int):
            continue
        field = next(
            (info for name, info in current.model_fields.items() if key in (name, info.alias)),
            None,
        )
        current = _model_in(field.annotation) if field is not None else None
    return current


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is not None:
        for argument in typing.get_args(annotation):
            found = _model_in(argument)
            if found is not None:
                return found
    return None
