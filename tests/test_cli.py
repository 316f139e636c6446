"""The build-time commands: plugins, tools, check, graph (in-process and as the console script)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from _build_samples import WriteFile, install_distribution, installed_only_in
from toolwire import plugins as plugins_module
from toolwire.cli import app, build_cli, build_commands

runner = CliRunner()


@pytest.fixture
def pharma_only(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Only the bundled pharma plugin loads, whatever else is installed."""
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "pharma")
    return isolated


def test_plugins_json(pharma_only: Path) -> None:
    result = runner.invoke(app, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"name": "pharma", "version": "0.1.0", "domains": ["pharma"], "error": None}
    ]


def test_plugins_json_lists_domains_declared_in_shipped_yaml(
    isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_file("yaml_only_plugin.py", (
        "import toolwire\n"
        "@toolwire.hookimpl\n"
        "def register_config_files(register):\n"
        "    register('yaml_only.yaml')\n"
    ))
    write_file("yaml_only.yaml", "domains:\n  - {name: garden}\n  - {name: orchard}\n")
    monkeypatch.syspath_prepend(str(isolated))
    monkeypatch.setattr(plugins_module.metadata, "entry_points",
                        lambda group: [EntryPoint("yaml_only", "yaml_only_plugin", "toolwire")])

    result = runner.invoke(app, ["plugins", "--json"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"name": "yaml_only", "version": None, "domains": ["garden", "orchard"], "error": None}
    ]


def test_check_fails_on_two_distributions_with_one_plugin_name(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_distribution(isolated / "site", "alpha-shop", "1.0", "shop", "alpha_shop_cli")
    install_distribution(isolated / "site", "beta-shop", "2.0", "shop", "beta_shop_cli")
    installed_only_in(monkeypatch, isolated / "site")
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "shop")

    result = runner.invoke(app, ["check"])

    assert result.exit_code == 1
    assert result.stderr.startswith(
        "plugin 'shop' failed to load: 2 installed distributions provide the plugin 'shop': "
        "alpha-shop 1.0 (alpha_shop_cli) and beta-shop 2.0 (beta_shop_cli)"
    )


def test_plugins_table_shows_failures(pharma_only: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "pharma,ghost")
    result = runner.invoke(app, ["plugins"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "pharma" in result.stdout and "ghost" in result.stdout
    assert "no installed plugin" in result.stdout
    # the names a misspelt one could have meant (the table's cell may wrap)
    assert "installed:" in result.stdout and "pydocs" in result.stdout


def test_tools_json(pharma_only: Path) -> None:
    result = runner.invoke(app, ["tools", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"name": "substance_lookup", "qualified_name": "pharma.substance_lookup",
         "domain": "pharma", "priority": 50, "plugin": "pharma", "kinds": [], "injects": [],
         "mcp": None},
        {"name": "interaction_analysis", "qualified_name": "pharma.interaction_analysis",
         "domain": "pharma", "priority": 10, "plugin": "pharma",
         "kinds": ["activated", "coordinator", "context_consumer", "clarifiable"],
         "injects": ["pharma.substance_lookup"], "mcp": None},
        {"name": "dosage_info", "qualified_name": "pharma.dosage_info",
         "domain": "pharma", "priority": 20, "plugin": "pharma", "kinds": ["activated"],
         "injects": ["pharma.substance_lookup"], "mcp": None},
    ]


def test_tools_filtered_by_domain(pharma_only: Path) -> None:
    result = runner.invoke(app, ["tools", "--domain", "pharma"])
    assert result.exit_code == 0
    assert "pharma.interaction_analysis" in result.stdout
    unknown = runner.invoke(app, ["tools", "--domain", "astro", "--json"])
    assert unknown.exit_code == 1
    assert "unknown domain 'astro'; installed domains: pharma" in unknown.stderr


def test_tools_of_an_unknown_domain_names_the_plugin_that_failed_to_load(
    isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_file("shop_plugin.py", "raise ImportError('no module named shop_db')\n")
    monkeypatch.syspath_prepend(str(isolated))
    points = [EntryPoint("pharma", "toolwire_pharma.plugin", "toolwire"),
              EntryPoint("shop", "shop_plugin", "toolwire")]
    monkeypatch.setattr(plugins_module.metadata, "entry_points", lambda group: points)

    result = runner.invoke(app, ["tools", "--domain", "shop"])

    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "unknown domain 'shop' (plugin 'shop' failed to load: failed to import: ImportError: no "
        "module named shop_db; see toolwire plugins); installed domains: pharma"
    )


@pytest.mark.requires_extra("mcp")
def test_mcp_serve_of_an_unknown_domain_names_the_installed_ones(pharma_only: Path) -> None:
    result = runner.invoke(app, ["mcp", "serve", "--domain", "pharm"])

    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == "unknown domain 'pharm'; installed domains: pharma"


def test_tools_piped_prints_whole_values_on_one_line_each(pharma_only: Path) -> None:
    result = runner.invoke(app, ["tools"], env={"COLUMNS": "80"})  # stdout is no terminal
    assert result.exit_code == 0
    rows = {line.split()[1]: line for line in result.stdout.splitlines() if "pharma." in line}
    assert sorted(rows) == [
        "pharma.dosage_info",
        "pharma.interaction_analysis",
        "pharma.substance_lookup",
    ]
    analysis = rows["pharma.interaction_analysis"]
    assert "activated, coordinator, context_consumer, clarifiable" in analysis
    assert "pharma.substance_lookup" in analysis  # its injection, whole
    assert "…" not in result.stdout


def test_check_ok(pharma_only: Path, write_file: WriteFile) -> None:
    path = write_file("ok.yaml", "default_domain: pharma\n")
    result = runner.invoke(app, ["check", "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: 1 plugins, 1 domains, 3 tools")


def test_check_prints_every_problem_with_its_line(pharma_only: Path, write_file: WriteFile) -> None:
    write_file("broken.yaml", "default_domain: pharma\ntools:\n  - name: x\n    clas: a:B\n")
    result = runner.invoke(app, ["check", "--config", "broken.yaml"])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "broken.yaml:4: unknown key 'clas'; did you mean 'class'? allowed keys: name, class, "
        "domain, priority, enabled, settings, inject, examples, own_event_loop",
    ]


def test_check_reports_a_misspelt_injection_beside_a_configuration_error(
    pharma_only: Path, write_file: WriteFile
) -> None:
    """Both phases at once: the file's own mistake (line 3) did not hide the wiring's (line 7)."""
    write_file("both.yaml", (
        "default_domain: pharma\n"
        "llm:\n"
        "  timeot_s: 5\n"
        "tools:\n"
        "  - name: interaction_analysis\n"
        "    domain: pharma\n"
        "    inject: {substance_lookup: pharma.substanse_lookup}\n"
    ))
    result = runner.invoke(app, ["check", "--config", "both.yaml"])

    assert result.exit_code == 1
    first, second = result.stderr.splitlines()
    assert first.startswith("both.yaml:3: unknown key 'timeot_s'; did you mean 'timeout_s'?")
    assert second.startswith(
        "both.yaml:5: pharma.interaction_analysis: inject substance_lookup: "
        "'pharma.substanse_lookup': unknown tool 'pharma.substanse_lookup'"
    )
    assert "did you mean pharma.substance_lookup" in second


def test_check_without_the_redis_extra_refuses_a_redis_store(
    pharma_only: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # as if the extra were not installed
    write_file("shared.yaml", "default_domain: pharma\nsessions:\n  store: redis\n")

    result = runner.invoke(app, ["check", "--config", "shared.yaml"])

    assert result.exit_code == 1
    assert result.stderr == (
        "shared.yaml:3: sessions.store 'redis' needs the redis extra (redis is missing): "
        "pip install 'toolwire[redis]'\n"
    )


@pytest.mark.parametrize("provider", ["", "  provider: embedded\n"], ids=["default", "named"])
def test_check_refuses_an_embedded_model_it_does_not_know_at_its_line(
    pharma_only: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    """``check`` passed it; ``toolwire ask`` then refused it, without its line."""
    for name in ("TOOLWIRE_LLM_BASE_URL", "OPENAI_API_KEY"):  # so the embedded model serves
        monkeypatch.delenv(name, raising=False)
    write_file("local.yaml", f"default_domain: pharma\nllm:\n{provider}  local_model: nope\n")

    result = runner.invoke(app, ["check", "--config", "local.yaml"])

    assert result.exit_code == 1
    line = 3 + provider.count("\n")
    assert result.stderr == (
        f"local.yaml:{line}: llm.local_model: unknown embedded model 'nope'; known: "
        "qwen2.5-coder-0.5b, qwen2.5-coder-1.5b\n"
    )


def test_check_leaves_the_embedded_model_alone_when_a_server_answers(
    pharma_only: Path, write_file: WriteFile
) -> None:
    write_file(
        "remote.yaml",
        "default_domain: pharma\nllm:\n  base_url: http://127.0.0.1:9/v1\n  local_model: nope\n",
    )
    result = runner.invoke(app, ["check", "--config", "remote.yaml"])
    assert result.exit_code == 0, result.output


def terminal_of(width: int) -> Callable[[], Console]:
    """``table_console`` for a terminal ``width`` columns wide."""
    return lambda: Console(width=width, force_terminal=True, color_system=None, highlight=False)


def test_tools_in_a_narrow_terminal_prints_each_tool_whole(
    pharma_only: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build_commands, "table_console", terminal_of(60))

    result = runner.invoke(app, ["tools"])

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 60
    assert "…" not in result.stdout
    words = " ".join(result.stdout.split())
    assert (
        "pharma.interaction_analysis plugin pharma priority 10 kinds activated, coordinator, "
        "context_consumer, clarifiable injects pharma.substance_lookup enabled yes"
    ) in words
    assert "pharma.substance_lookup plugin pharma priority 50 enabled yes" in words


def test_tools_in_a_wide_terminal_is_one_table(
    pharma_only: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build_commands, "table_console", terminal_of(120))

    result = runner.invoke(app, ["tools"])

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(line for line in lines if "tool" in line)
    assert [cell.strip() for cell in header.split("┃")[1:-1]] == [
        "tool", "plugin", "priority", "kinds", "injects", "enabled"
    ]
    analysis = next(line for line in lines if "pharma.interaction_analysis" in line)
    assert "pharma.substance_lookup" in analysis  # its injection, whole, on its row
    assert "…" not in result.stdout


def test_global_config_option_applies_to_commands(pharma_only: Path, write_file: WriteFile) -> None:
    write_file("bad.yaml", "default_domain: nowhere\n")
    result = runner.invoke(app, ["--config", "bad.yaml", "tools"])
    assert result.exit_code == 1
    assert "bad.yaml:1: default_domain 'nowhere' is not a declared domain" in result.stderr
    assert runner.invoke(app, ["--config", "bad.yaml", "check"]).exit_code == 1


def test_check_fails_on_a_broken_plugin(pharma_only: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "pharma,ghost")
    result = runner.invoke(app, ["check"])
    assert result.exit_code == 1
    assert "plugin 'ghost' failed to load" in result.stderr


def test_graph_text_and_mermaid(pharma_only: Path) -> None:
    text = runner.invoke(app, ["graph"])
    assert text.exit_code == 0
    assert text.stdout.splitlines() == [
        "pharma.substance_lookup",
        "pharma.interaction_analysis -> pharma.substance_lookup",
        "pharma.dosage_info -> pharma.substance_lookup",
    ]
    mermaid = runner.invoke(app, ["graph", "--mermaid"])
    assert mermaid.stdout.splitlines() == [
        "flowchart LR",
        '    pharma-substance_lookup["pharma.substance_lookup"]',
        '    pharma-interaction_analysis["pharma.interaction_analysis"]',
        '    pharma-dosage_info["pharma.dosage_info"]',
        "    pharma-interaction_analysis --> pharma-substance_lookup",
        "    pharma-dosage_info --> pharma-substance_lookup",
    ]


def test_the_installed_console_script(pharma_only: Path, write_file: WriteFile) -> None:
    script = shutil.which("toolwire", path=str(Path(__file__).parents[1] / ".venv" / "bin"))
    assert script is not None, "run scripts/setup.sh: the toolwire console script is missing"
    env = {**os.environ, "TOOLWIRE_PLUGINS": "pharma,pydocs"}  # the bundled ones, whatever else

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([script, *args], capture_output=True, text=True, env=env,
                              cwd=pharma_only, timeout=60, check=False)

    plugins = run("plugins", "--json")
    assert plugins.returncode == 0, plugins.stderr
    listed = {p["name"]: (p["domains"], p["error"]) for p in json.loads(plugins.stdout)}
    assert listed == {"pharma": (["pharma"], None), "pydocs": (["pydocs"], None)}
    tools = run("tools", "--json")
    qualified = {t["qualified_name"] for t in json.loads(tools.stdout)}
    assert {"pharma.substance_lookup", "pharma.interaction_analysis"} <= qualified
    assert "pydocs.docs_search" in qualified
    write_file("broken.yaml", "default_domain: pharma\nllm:\n  timeout_s: soon\n")
    check = run("check", "--config", "broken.yaml")
    assert check.returncode == 1
    assert check.stderr.startswith("broken.yaml:3: llm.timeout_s: Input should be a valid number")
    assert check.stdout == ""



# -- every failure path of the build, through `toolwire check` --------------------------------

SHOP = "default_domain: shop\ndomains: [{name: shop}, {name: desk}, {name: hall}]\n"
LOOKUP = "  - {name: lookup, class: '_build_samples:LookupTool', domain: %s}\n"
PLUGIN_SOURCES: dict[str, str] = {
    "p_broken": "import toolwire\nimport no_such_dependency_xyz\n",
    "p_raising": (
        "import toolwire\n"
        "@toolwire.hookimpl\n"
        "def register_tools(register):\n"
        "    raise ValueError('database unreachable')\n"
    ),
    "p_typo": "import toolwire\n@toolwire.hookimpl\ndef register_tool(register):\n    pass\n",
    "p_dup": (
        "import toolwire\n"
        "from _build_samples import PlanTool\n"
        "class TwinTool(PlanTool): ...\n"
        "@toolwire.hookimpl\n"
        "def register_tools(register):\n"
        "    register(TwinTool, name='lookup', domain='shop')\n"
    ),
    "p_dup2": "",  # the same source as p_dup, filled in below
    "p_prio": (
        "import toolwire\n"
        "from _build_samples import PlanTool\n"
        "@toolwire.hookimpl\n"
        "def register_tools(register):\n"
        "    register(PlanTool, domain='shop', priority='5')\n"
    ),
    "p_yard": (
        "import toolwire\n"
        "@toolwire.hookimpl\n"
        "def register_domains(register):\n"
        "    register(toolwire.DomainSpec(name='yard'))\n"
    ),
    "p_yard2": "",  # the same source as p_yard, filled in below
    "p_cycle": (
        "from __future__ import annotations\n"
        "import toolwire\n"
        "from _build_samples import Query\n"
        "class ATool(toolwire.ChatbotTool[Query]):\n"
        "    def __init__(self, b: BTool) -> None: ...\n"
        "    def executable_instruction(self) -> str: return 'no'\n"
        "class BTool(toolwire.ChatbotTool[Query]):\n"
        "    def __init__(self, a: ATool) -> None: ...\n"
        "    def executable_instruction(self) -> str: return 'no'\n"
        "@toolwire.hookimpl\n"
        "def register_tools(register):\n"
        "    register(ATool, domain='shop')\n"
        "    register(BTool, domain='shop')\n"
    ),
    "p_ctor": (
        "import toolwire\n"
        "from _build_samples import Query\n"
        "class KeyTool(toolwire.ChatbotTool[Query]):\n"
        "    def __init__(self) -> None:\n"
        "        raise RuntimeError('no API key')\n"
        "    def executable_instruction(self) -> str: return 'no'\n"
        "@toolwire.hookimpl\n"
        "def register_tools(register):\n"
        "    register(KeyTool, domain='shop')\n"
    ),
}
PLUGIN_SOURCES["p_dup2"] = PLUGIN_SOURCES["p_dup"]
PLUGIN_SOURCES["p_yard2"] = PLUGIN_SOURCES["p_yard"]
FAILURES: dict[str, tuple[str, tuple[str, ...], list[tuple[str, int, str]]]] = {
    # case: (YAML after SHOP, plugins to install, expected (file, line, fragment) per line)
    "bad YAML syntax": (
        "tools:\n  - {name: x, class: [unclosed\n", (), [("app.yaml", 5, "invalid YAML:")]
    ),
    "unknown key": ("colour: red\n", (), [("app.yaml", 3, "unknown key 'colour'; allowed keys:")]),
    "unknown YAML tag": (
        "tools: !foo []\n", (), [("app.yaml", 3, "invalid YAML: could not determine a constructor")]
    ),
    "module missing": (
        "tools:\n  - {name: x, class: 'no_such_mod_xyz:X'}\n", (),
        [("app.yaml", 4, "cannot import module 'no_such_mod_xyz'")],
    ),
    "attribute missing": (
        "tools:\n  - {name: x, class: '_build_samples:LookupTol'}\n", (),
        [("app.yaml", 4, "has no 'LookupTol'; tool classes it defines: AnswerTool, LookupTool, "
                         "PlanTool")],
    ),
    "wrong type": (
        "tools:\n  - {name: a, class: '_build_samples:PlanTool', priority: high}\n", (),
        [("app.yaml", 4, "tools[0].priority: Input should be a valid integer")],
    ),
    "duplicate in one file": (
        "tools:\n" + LOOKUP % "shop" + LOOKUP % "shop", (),
        [("app.yaml", 5, "duplicate tool 'shop.lookup' in this file (first declared at line 4)")],
    ),
    "override of a misspelt tool": (
        "tools:\n" + LOOKUP % "shop" + "  - {name: lookp, domain: shop, priority: 5}\n", (),
        [("app.yaml", 5, "no tool 'shop.lookp' was declared earlier to change; did you mean "
                         "'shop.lookup'? add 'class: package.module:ClassName' to declare it")],
    ),
    "unknown domain": (
        "tools:\n  - {name: x, class: '_build_samples:PlanTool', domain: moon}\n", (),
        [("app.yaml", 4, "names unknown domain 'moon'; declared domains: desk, hall, shop")],
    ),
    "ambiguous short name in inject": (
        "tools:\n" + LOOKUP % "shop" + LOOKUP % "desk"
        + "  - {name: ask, class: '_build_samples:AnswerTool', domain: hall,"
          " inject: {lookup: lookup}}\n",
        (),
        [("app.yaml", 6, "hall.ask: inject lookup: 'lookup': tool name 'lookup' is ambiguous: it "
                         "matches desk.lookup, shop.lookup and none in domain 'hall'")],
    ),
    "broken plugin": (
        "", ("p_broken",),
        [("p_broken.py", 2, "plugin 'p_broken' failed to load: failed to import: "
                            "ModuleNotFoundError")],
    ),
    "plugin raising in a hook": (
        "", ("p_raising",),
        [("p_raising.py", 4, "plugin 'p_raising' failed to load: raised ValueError: database "
                             "unreachable")],
    ),
    "misspelt hookimpl": (
        "", ("p_typo",),
        [("p_typo.py", 2, "unknown hook 'register_tool'; did you mean 'register_tools'?")],
    ),
    "duplicate across plugins": (
        "", ("p_dup", "p_dup2"),
        [("p_dup2.py", 3, "duplicate tool 'shop.lookup': declared by plugin 'p_dup' at "
                          "{tmp}/p_dup.py:3 and again by plugin 'p_dup2' at {tmp}/p_dup2.py:3; "
                          "rename one")],
    ),
    "priority as text through a hook": (
        "", ("p_prio",),
        [("p_prio.py", 5, "plugin 'p_prio' failed to load: raised ToolDeclarationError: "
                          "register_tools: priority='5' is a str; pass a whole number")],
    ),
    "duplicate domain through hooks": (
        "", ("p_yard", "p_yard2"),
        [("p_yard2.py", 4, "duplicate domain 'yard': registered by plugin 'p_yard' at "
                           "{tmp}/p_yard.py:4 and again by plugin 'p_yard2'")],
    ),
    "cycle": (
        "", ("p_cycle",), [("p_cycle.py", 4, "dependency cycle: shop.a -> shop.b -> shop.a")]
    ),
    "constructor raising": (
        "", ("p_ctor",),
        [("p_ctor.py", 3, "building tool 'shop.key' (p_ctor.KeyTool) failed: RuntimeError: no "
                          "API key")],
    ),
}


@pytest.mark.parametrize("case", FAILURES)
def test_check_reports_every_failure_path_as_located_lines(
    case: str, isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, plugins, expected = FAILURES[case]
    for name in plugins:
        write_file(f"{name}.py", PLUGIN_SOURCES[name])
    monkeypatch.syspath_prepend(str(isolated))
    monkeypatch.setattr(plugins_module.metadata, "entry_points",
                        lambda group: [EntryPoint(name, name, "toolwire") for name in plugins])
    write_file("app.yaml", SHOP + text)
    result = runner.invoke(app, ["check", "--config", "app.yaml"])
    assert result.exit_code == 1, result.output
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = [line.removeprefix(f"{isolated}/") for line in result.stderr.splitlines()]
    assert len(lines) == len(expected), lines
    for (file, line, fragment), got in zip(expected, lines, strict=True):
        assert re.match(rf"{re.escape(file)}:{line}: \S", got), got
        assert fragment.format(tmp=isolated) in got, got


@pytest.mark.parametrize("text", ["", "# nothing configured yet\n", "---\n"])
def test_check_accepts_an_empty_or_comment_only_file(
    text: str, isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "")
    write_file("app.yaml", text)
    result = runner.invoke(app, ["check", "--config", "app.yaml"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "ok: 0 plugins, 0 domains, 0 tools (app.yaml)\n"


# -- a port out of range, a failed plugin at import, MCP problems beside --json ---------------


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["serve", "--port", "70000"], "Input should be less than or equal to 65535"),
        (["mcp", "serve", "--http", "--port", "-1"], "Input should be greater than or equal to 0"),
    ],
)
def test_a_port_out_of_range_is_a_usage_error(
    command: list[str], message: str, pharma_only: Path
) -> None:
    result = runner.invoke(app, command)

    assert result.exit_code == 2
    assert isinstance(result.exception, SystemExit)  # no OverflowError
    lines = [line.strip("│ ") for line in result.stderr.splitlines()]
    assert f"Invalid value for '--port': {message}" in lines


def test_the_command_line_s_host_and_port_are_validated_like_the_file_s() -> None:
    from pydantic import ValidationError

    from toolwire.cli.state import listening_on
    from toolwire.settings import ServerSettings

    assert listening_on(ServerSettings(), "0.0.0.0", 0).port == 0
    with pytest.raises(ValidationError):
        listening_on(ServerSettings(), None, 70000)


@pytest.mark.requires_extra("server")
def test_binding_a_port_out_of_range_is_a_one_line_config_error() -> None:
    from toolwire.errors import ConfigError
    from toolwire.server.run import bind_socket

    with pytest.raises(ConfigError) as raised:
        bind_socket("127.0.0.1", 70000)
    assert str(raised.value) == (
        "cannot listen on 127.0.0.1:70000: port 70000 is not between 0 and 65535; choose "
        "another with --port (server.port)"
    )


@pytest.mark.requires_extra("mcp")
def test_tools_json_prints_the_mcp_problems_on_stderr(
    isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "")
    failing = [sys.executable, "-c", "import sys; sys.stderr.write('no notes.db'); sys.exit(3)"]
    path = write_file("app.yaml", (
        "default_domain: office\n"
        "domains: [{name: office}]\n"
        "mcp_servers:\n"
        "  - name: notes\n"
        f"    command: {json.dumps(failing)}\n"
    ))

    result = runner.invoke(app, ["--config", str(path), "tools", "--json"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []
    problem = f"{path}:4: mcp server 'notes': cannot list its tools ("
    [line] = [line for line in result.stderr.splitlines() if line.startswith(problem)]
    assert line.endswith("; its stderr ended with: no notes.db")


@pytest.mark.parametrize(
    "command", [["ask", "hi"], ["chat"], ["tools"], ["graph"], ["check"]], ids=" ".join
)
def test_every_command_that_builds_the_app_takes_its_own_config_option(
    command: list[str], pharma_only: Path, write_file: WriteFile, block_model_requests: None
) -> None:
    """``toolwire tools --config P``, not only ``toolwire --config P tools``."""
    write_file("bad.yaml", "default_domain: nowhere\n")

    result = runner.invoke(app, [*command, "--config", "bad.yaml"], input="")

    assert result.exit_code == 1, result.output
    assert "bad.yaml:1: default_domain 'nowhere' is not a declared domain" in result.stderr


@pytest.mark.parametrize("option", ["--config", "-c"])
def test_the_global_config_option_before_the_command_name_has_its_short_form(
    option: str, pharma_only: Path, write_file: WriteFile
) -> None:
    """``toolwire -c P tools``, as the README says (only ``--config`` was taken there)."""
    write_file("bad.yaml", "default_domain: nowhere\n")
    write_file("ok.yaml", "default_domain: pharma\n")

    refused = runner.invoke(app, [option, "bad.yaml", "tools"])
    listed = runner.invoke(app, [option, "ok.yaml", "tools", "--json"])

    assert refused.exit_code == 1, refused.output
    assert "bad.yaml:1: default_domain 'nowhere' is not a declared domain" in refused.stderr
    assert listed.exit_code == 0, listed.output
    assert "pharma.substance_lookup" in listed.stdout


def test_a_failed_plugin_is_one_plain_line_and_fails_the_listing_of_tools(
    pharma_only: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line finds its commands (so loads the plugins) before a command runs: the
    failure is not a log line printed then, ahead of ``check``'s problem lines, and ``tools``
    without the plugin's tools is a failure, not an incomplete table with exit code 0."""
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "pharma,pharmacy_typo")
    cli = build_cli()
    while_finding_commands = capsys.readouterr().err

    checked = runner.invoke(cli, ["check"])
    listed = runner.invoke(cli, ["tools"], env={"COLUMNS": "200"})

    assert while_finding_commands == ""
    problem = "plugin 'pharmacy_typo' failed to load: named in TOOLWIRE_PLUGINS but no installed"
    for result in (checked, listed):
        assert result.exit_code == 1
        [line] = result.stderr.splitlines()
        assert line.startswith(problem)
    assert "pharma.substance_lookup" in listed.stdout  # the plugins that loaded are listed
