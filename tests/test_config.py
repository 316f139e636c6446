"""YAML → AppConfig: every problem located by file and line, all problems of a file at once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from _build_samples import WriteFile
from toolwire import ConfigError
from toolwire.config import (
    MAX_PROBLEMS_SHOWN,
    AppConfig,
    DomainEntry,
    PluginConfigFile,
    ToolEntry,
    format_loc,
    in_file_order,
    load_app_config,
    load_file,
    parse_app_config,
    parse_file,
)
from toolwire.errors import Problem
from toolwire.registry import DomainSpec, FollowOnProblem, SourceLocation
from toolwire.settings import SelectionSettings

GOOD = """\
default_domain: shop
llm:
  model: tiny
  timeout_s: 5
sessions:
  store: memory
domains:
  - name: shop
    description: A shop
tools:
  - name: lookup
    class: _build_samples:LookupTool
    domain: shop
    settings:
      limit: 2
    inject: {}
"""


def problems_of(raised: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return [str(problem) for problem in raised.value.problems]


def test_a_good_file_becomes_the_app_config(isolated: Path, write_file: WriteFile) -> None:
    path = write_file("app.yaml", GOOD)
    config = load_app_config(path)
    assert config.default_domain == "shop"
    assert config.llm.model == "tiny" and config.llm.timeout_s == 5
    assert config.sessions.store == "memory"
    assert config.path == str(path)
    (tool,) = config.tools
    assert (tool.name, tool.class_, tool.settings) == ("lookup", "_build_samples:LookupTool",
                                                      {"limit": 2})
    assert tool.source is not None and tool.source.line == 11
    assert tool.line_of("settings", "limit") == 15
    assert config.domains[0].source is not None and config.domains[0].source.line == 8


def test_missing_default_file_means_defaults(isolated: Path) -> None:
    assert load_app_config() == AppConfig()
    assert AppConfig().path is None


def test_lookup_order_explicit_then_env_then_default(
    isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_file("config/toolwire.yaml", "default_domain: from_default\n")
    assert load_app_config().default_domain == "from_default"
    monkeypatch.setenv("TOOLWIRE_CONFIG", str(write_file("env.yaml", "default_domain: env\n")))
    assert load_app_config().default_domain == "env"
    explicit = write_file("explicit.yaml", "default_domain: explicit\n")
    assert load_app_config(explicit).default_domain == "explicit"


def test_a_named_file_that_does_not_exist_is_an_error(isolated: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing.yaml: cannot read configuration"):
        load_app_config("missing.yaml")


def test_bad_yaml_syntax_names_its_line(isolated: Path, write_file: WriteFile) -> None:
    path = write_file("bad.yaml", "tools:\n  - name: x\n    class: [unclosed\n")
    with pytest.raises(ConfigError) as raised:
        load_app_config(path)
    (problem,) = raised.value.problems
    assert problem.path == str(path) and problem.line == 4
    assert problem.message.startswith("invalid YAML:")


def test_duplicate_yaml_key_is_a_syntax_problem(isolated: Path, write_file: WriteFile) -> None:
    path = write_file("dup.yaml", "default_domain: a\ndefault_domain: b\n")
    with pytest.raises(ConfigError) as raised:
        load_app_config(path)
    assert raised.value.problems[0].line == 2
    assert "duplicate key" in raised.value.problems[0].message


def test_top_level_must_be_a_mapping(isolated: Path, write_file: WriteFile) -> None:
    with pytest.raises(ConfigError, match="must contain a mapping at its top level"):
        load_app_config(write_file("list.yaml", "- a\n- b\n"))


def test_every_problem_of_a_file_is_reported_with_its_line(
    isolated: Path, write_file: WriteFile
) -> None:
    path = write_file(
        "many.yaml",
        "defualt_domain: shop\n"            # 1 unknown top-level key
        "llm:\n"
        "  timeout_s: -1\n"                 # 3 out of range
        "tools:\n"
        "  - name: a\n"
        "    clas: x:Y\n"                   # 6 unknown key with a suggestion
        "  - name: b\n"
        "    class: x:Y\n"
        "    priority: high\n"              # 9 wrong type
        "domains:\n"
        "  - description: nameless\n",      # 11 missing required key
    )
    with pytest.raises(ConfigError) as raised:
        load_app_config(path)
    assert sorted(problems_of(raised)) == sorted([
        f"{path}:1: unknown key 'defualt_domain'; did you mean 'default_domain'? allowed keys: "
        "domains, tools, llm, orchestrator, sessions, server, default_domain, mcp_servers",
        f"{path}:3: llm.timeout_s: Input should be greater than 0",
        f"{path}:6: unknown key 'clas'; did you mean 'class'? allowed keys: name, class, "
        "domain, priority, enabled, settings, inject, examples, own_event_loop",
        f"{path}:9: tools[1].priority: Input should be a valid integer",
        f"{path}:11: domains[0].name: required key is missing",
    ])


def test_valid_part_survives_next_to_the_problems(isolated: Path, write_file: WriteFile) -> None:
    path = write_file(
        "partial.yaml",
        "llm: {timeout_s: nope}\ntools:\n  - {name: bad, priority: x}\n  - {name: good}\n",
    )
    config, problems = parse_app_config(path)
    assert len(problems) == 2
    assert [tool.name for tool in config.tools] == ["good"]
    assert config.llm.timeout_s == 60


def test_a_section_keeps_its_valid_keys_beside_a_refused_one(
    isolated: Path, write_file: WriteFile
) -> None:
    """The section used to go back to its defaults whole: ``sessions.store: sqllite`` beside a
    refused ``ttl_s`` was then never checked against the registered stores."""
    path = write_file("partial.yaml", (
        "sessions: {store: sqllite, ttl_s: 1d}\n"
        "orchestrator:\n"
        "  selection: {top_k: 0, steps: [retrieve]}\n"
        "  tool_threads: 3\n"
        "server: {port: 80800, api_keys: [{name: a}], host: 0.0.0.0}\n"
    ))  # fmt: skip
    config, problems = parse_app_config(path)
    assert [(problem.line, problem.message.split(":")[0]) for problem in problems] == [
        (1, "sessions.ttl_s"),
        (3, "orchestrator.selection.top_k"),
        (5, "server.port"),
        (5, "server.api_keys[0].token_env"),
    ]
    assert (config.sessions.store, config.sessions.ttl_s) == ("sqllite", 86_400)
    assert config.orchestrator.selection.steps == ["retrieve"]
    assert config.orchestrator.tool_threads == 3
    assert (config.server.host, config.server.port, config.server.api_keys) == ("0.0.0.0", 8000, [])


def test_a_refused_llm_key_takes_the_section_with_it(isolated: Path, write_file: WriteFile) -> None:
    """The load checks the llm keys together: a refused base_url left at its default would have
    the openai provider report a missing server the file does name."""
    path = write_file("llm.yaml", "llm: {provider: openai, base_url: 'localhost:8080'}\n")
    config, problems = parse_app_config(path)
    assert [problem.message.split(":")[0] for problem in problems] == ["llm.base_url"]
    assert (config.llm.provider, config.llm.base_url) == (None, None)


def test_the_problems_of_a_file_come_in_line_order(isolated: Path, write_file: WriteFile) -> None:
    """They came in the order the checks ran: entries first, a section's wrong values before
    its unknown keys."""
    path = write_file("order.yaml", (
        "defualt_domain: shop\n"
        "llm:\n"
        "  prompt_layout: shared\n"
        "  timeout_s: soon\n"
        "tools:\n"
        "  - {name: a, priority: high}\n"
    ))  # fmt: skip
    with pytest.raises(ConfigError) as raised:
        load_app_config(path)
    assert [problem.line for problem in raised.value.problems] == [1, 3, 4, 6]


def test_an_entry_left_out_for_its_problems_is_remembered_by_what_it_names(
    isolated: Path, write_file: WriteFile
) -> None:
    path = write_file("shipped.yaml", (
        "domains:\n"
        "  - {name: shop, descripton: typo}\n"
        "tools:\n"
        "  - {name: stock_lookup, class: 'shop.tools:Stock', domain: shop, priorty: 5}\n"
        "  - {name: 5, priorty: 5}\n"
        "  - {class: 'shop.tools:Unnamed', domain: [shop]}\n"
    ))  # fmt: skip
    config, _ = parse_file(path, PluginConfigFile)
    tools = config.left_out("tools")
    assert [(t.source, t.model_dump(exclude_unset=True)) for t in tools] == [
        (
            SourceLocation(str(path), 4),
            {"name": "stock_lookup", "class_": "shop.tools:Stock", "domain": "shop"},
        ),
        # no name: the build finds it by its class (the name of the class it imports)
        (SourceLocation(str(path), 6), {"class_": "shop.tools:Unnamed"}),
    ]
    assert all(isinstance(tool, ToolEntry) for tool in tools)
    (domain,) = config.left_out("domains")
    assert isinstance(domain, DomainEntry)
    assert (domain.source, domain.model_dump(exclude_unset=True)) == (
        SourceLocation(str(path), 2),
        {"name": "shop"},
    )


def test_tools_must_be_a_list(isolated: Path, write_file: WriteFile) -> None:
    path = write_file("notlist.yaml", "default_domain: x\ntools:\n  name: a\n")
    with pytest.raises(ConfigError) as raised:
        load_app_config(path)
    assert problems_of(raised) == [f"{path}:2: tools: must be a list of entries"]


def test_plugin_files_may_not_configure_run_time(isolated: Path, write_file: WriteFile) -> None:
    path = write_file("shipped.yaml", "llm:\n  model: mine\ntools: []\n")
    with pytest.raises(ConfigError) as raised:
        load_file(path, PluginConfigFile)
    assert problems_of(raised) == [
        f"{path}:1: unknown key 'llm'; allowed keys: domains, tools"
    ]


def test_empty_file_is_the_defaults(isolated: Path, write_file: WriteFile) -> None:
    assert load_app_config(write_file("empty.yaml", "# nothing yet\n")).tools == []


def test_domain_entry_mirrors_domain_spec() -> None:
    assert set(DomainEntry.model_fields) == set(DomainSpec.model_fields) - {"plugin"}


def test_format_loc() -> None:
    assert format_loc(("tools", 0, "settings", "limit")) == "tools[0].settings.limit"
    assert format_loc(()) == ""


def test_follow_on_problems_come_after_the_other_problems_of_their_file() -> None:
    """A "left out" message (line 2) came before the entry's own error (line 5) it follows."""
    problems = [
        FollowOnProblem("rag_tool names a left-out tool", "app.yaml", 2),
        Problem("unknown key 'priorty'", "app.yaml", 5),
        Problem("shipped", "shipped.yaml", 9),
        FollowOnProblem("inject names a left-out tool", "app.yaml", 7),
        Problem("first", "app.yaml", 1),
        FollowOnProblem("shipped follow-on", "shipped.yaml", 1),
        Problem("no line", "app.yaml"),
    ]
    assert [problem.message for problem in in_file_order(problems)] == [
        "first",
        "unknown key 'priorty'",
        "no line",
        "rag_tool names a left-out tool",
        "inject names a left-out tool",
        "shipped",
        "shipped follow-on",
    ]


def test_the_repository_config_is_valid() -> None:
    config = load_app_config(Path(__file__).parents[1] / "config" / "toolwire.yaml")
    assert config.default_domain == "pharma"
    assert config.sessions.store == "sqlite"
    # it spells out the tool selection's defaults, and never pins an older one
    assert config.orchestrator.selection == SelectionSettings()


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n# and another\n", "---\n"])
def test_an_empty_or_comment_only_file_is_the_defaults(
    text: str, isolated: Path, write_file: WriteFile
) -> None:
    config, problems = parse_app_config(write_file("empty.yaml", text))
    assert problems == []
    assert config.tools == [] and config.domains == [] and config.default_domain is None


@pytest.mark.parametrize(
    ("text", "located"),
    [
        ("default_domain: shop\ntools:\n  - !foo {name: x}\n",
         "3: invalid YAML: could not determine a constructor for the tag '!foo'"),
        ("orchestrator:\n  max_depth: 33\n",  # beyond toolwire.task.MAX_TASK_DEPTH
         "2: orchestrator.max_depth: Input should be less than or equal to 32"),
    ],
    ids=["unknown-tag", "max-depth-beyond-the-task-depth"],
)  # fmt: skip
def test_a_problem_is_located(
    isolated: Path, write_file: WriteFile, text: str, located: str
) -> None:
    path = write_file("app.yaml", text)
    with pytest.raises(ConfigError) as raised:
        load_app_config(path)
    assert problems_of(raised) == [f"{path}:{located}"]


def test_a_file_with_thousands_of_problems_lists_the_first_and_counts_the_rest(
    isolated: Path, write_file: WriteFile
) -> None:
    """Locating each of 50,000 wrong keys scanned the whole mapping: a minute for a 600 kB
    file, and a report nobody reads."""
    extra = 20
    lines = [f"key_{n}: {n}" for n in range(MAX_PROBLEMS_SHOWN + extra)]
    path = write_file("generated.yaml", "\n".join(lines) + "\n")

    with pytest.raises(ConfigError) as raised:
        load_app_config(path)

    shown = problems_of(raised)
    assert len(shown) == MAX_PROBLEMS_SHOWN + 1
    assert shown[0].startswith(f"{path}:1: unknown key 'key_0'")
    assert shown[-2].startswith(f"{path}:{MAX_PROBLEMS_SHOWN}: unknown key")
    assert shown[-1] == f"{path}: … and {extra} more problem(s) in this file; fix these first"


@pytest.mark.parametrize(
    ("key", "value", "replacement"),
    [
        ("structured_output", "tools", "e.g. {base: general, structured_output: tools}"),
        ("suitability_examples", "false", "{base: embedded, worked_examples: false}"),
        ("max_completion_tokens", "{answer: 2048}", "completion_limits: {answer: 2048}"),
        ("completion_limit_field", "max_completion_tokens",
         "{base: general, completion_limit_field: max_completion_tokens}"),
        ("context_window_tokens", "32768", "{base: general, context_window_tokens: 32768}"),
        ("prompt_layout", "per_purpose", "remove it: every call has the shared-prefix layout"),
        ("compression_threshold", "0.5",
         "it is fixed (toolwire.llm.compression.COMPRESSION_THRESHOLD)"),
    ],
)  # fmt: skip
def test_a_removed_llm_key_names_its_replacement_at_its_line(
    isolated: Path, write_file: WriteFile, key: str, value: str, replacement: str
) -> None:
    """The model traits moved to the model profile; a file that still sets one says where."""
    path = write_file("app.yaml", f"llm:\n  timeout_s: 5\n  {key}: {value}\n")
    with pytest.raises(ConfigError) as raised:
        load_app_config(path)
    (problem,) = problems_of(raised)
    assert problem.startswith(f"{path}:3: the key {key!r} was removed; ")
    assert replacement in problem


def test_a_tool_entry_takes_no_value_of_another_type(isolated: Path, write_file: WriteFile) -> None:
    """pydantic read ``priority: true`` as 1 and ``enabled: "yes"`` as True, silently."""
    path = write_file(
        "app.yaml",
        "tools:\n"
        "  - class: x:Y\n"
        "    priority: true\n"
        "  - class: x:Y\n"
        "    priority: '5'\n"
        "    enabled: 'yes'\n"
        "    own_event_loop: 0\n"
        "  - class: x:Y\n"
        "    enabled: 0\n",
    )
    with pytest.raises(ConfigError) as raised:
        load_app_config(path)
    assert problems_of(raised) == [
        f"{path}:3: tools[0].priority: Input should be a valid integer",
        f"{path}:5: tools[1].priority: Input should be a valid integer",
        f"{path}:6: tools[1].enabled: Input should be a valid boolean",
        f"{path}:7: tools[1].own_event_loop: Input should be a valid boolean",
        f"{path}:9: tools[2].enabled: Input should be a valid boolean",
    ]


SETTING_IN_DOCS = re.compile(r"`((?:llm|orchestrator|sessions|server)(?:\.[a-z_]+)+)")
"""A setting's dotted path as the docs quote it: `orchestrator.selection.steps`."""


def _removed(path: str) -> bool:
    *sections, key = path.split(".")
    section: type[BaseModel] = AppConfig
    for name in sections:
        field = section.model_fields.get(name)
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return False  # not a section: a method or a file named like one
        section = annotation
    return key in getattr(section, "removed_keys", {})


def test_the_docs_name_no_removed_setting() -> None:
    """A removed key fails the configuration that sets it: a page that still describes one
    sends its reader to write a file that does not load."""
    root = Path(__file__).parents[1]
    named = [
        f"{page.name}:{number}: {match.group(1)}"
        for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
        for match in SETTING_IN_DOCS.finditer(line)
        if _removed(match.group(1))
    ]
    assert named == []
