"""Extension by hooks, not by edits (issue 12): a session store (``register_session_stores``), a
CLI command (``register_commands``) and a domain's own orchestrator class (``orchestrator:``),
each documented in docs/plugins.md; toolwire's own stores and commands register the same way."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path
from typing import Any

import pytest
import typer
from fastapi.testclient import TestClient
from structlog.testing import capture_logs
from typer.testing import CliRunner

import override_plugin
import toolwire
from _build_samples import (
    AnswerTool,
    LookupTool,
    WriteFile,
    make_plugin,
    the_only_plugin,
)
from toolwire import App, ConfigError
from toolwire.cli import COMMAND_MODULES, build_cli
from toolwire.conversation import waiting
from toolwire.plugins import BUILTIN_PLUGIN_NAME, discover
from toolwire.server import create_app
from toolwire.sessions import SQLiteSessionStore, create_session_store
from toolwire.settings import SessionSettings
from toolwire.testing import ScriptedModel

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "plugins.md"
runner = CliRunner()


def guide_example(section: str, module_name: str) -> types.ModuleType:
    """The first python block of a docs/plugins.md section, as written there."""
    text = GUIDE.read_text(encoding="utf-8").split(f"## {section}", 1)[1]
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code is not None
    module = types.ModuleType(module_name)
    exec(compile(code[1], str(GUIDE), "exec"), module.__dict__)
    return module


def shop() -> object:
    return make_plugin("shop", domains=("shop",), tools=(LookupTool, AnswerTool))


def plugin_with(hook: str, *calls: tuple[Any, ...], name: str = "sloppy") -> types.ModuleType:
    """A plugin whose ``hook`` makes the given ``register(...)`` calls."""

    @toolwire.hookimpl
    def implementation(register: Any) -> None:
        for args in calls:
            register(*args)  # the line a failure points at

    plugin = types.ModuleType(name)
    setattr(plugin, hook, implementation)
    return plugin


# -- register_session_stores -----------------------------------------------------------------


def test_the_built_in_stores_register_through_the_same_hook() -> None:
    found = discover(load_entry_points=False, environ={"TOOLWIRE_PLUGINS": ""})
    assert list(found.session_stores) == ["memory", "sqlite", "redis"]
    assert {store.plugin for store in found.session_stores.values()} == {BUILTIN_PLUGIN_NAME}
    source = found.session_stores["sqlite"].source
    assert source is not None and source.path.endswith("sessions/factory.py")
    assert found.plugins == []


async def test_a_plugin_adds_a_store_that_sessions_store_selects(
    isolated: Path, write_file: WriteFile
) -> None:
    audit = isolated / "audit.jsonl"
    config = write_file(
        "toolwire.yaml",
        f"sessions:\n  store: audited_sqlite\n  path: s.db\n  options: {{audit_log: {audit}}}\n",
    )
    model = (
        ScriptedModel()
        .on_suitability({"shop.answer_tool": True})
        .on_extract(LookupTool.params_model, {"text": "kettle"})
        .on_answer("in stock")
    )
    app = App.load(
        config,
        plugins=[shop(), guide_example("A session store", "toolwire_audit")],
        llm=model,
        load_entry_points=False,
    )

    store = app.session_store
    assert type(store).__name__ == "AuditedStore" and isinstance(store.inner, SQLiteSessionStore)
    stored = await store.create("shop", waiting(toolwire.TaskInfo(task_prompt="q")))
    await store.save(stored)
    await store.delete(stored.session_id)
    await app.aclose()

    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(line["op"], line["version"]) for line in lines] == [
        ("create", 1),
        ("save", 2),
        ("delete", None),
    ]
    assert stored.session_id not in audit.read_text()  # only a reference to it is logged


def test_a_stores_factory_checks_its_options_when_first_used(
    isolated: Path, write_file: WriteFile
) -> None:
    config = write_file("toolwire.yaml", "sessions:\n  store: audited_sqlite\n")
    app = App.load(
        config,
        plugins=[shop(), guide_example("A session store", "toolwire_audit")],
        llm=ScriptedModel(),
        load_entry_points=False,
    )
    with pytest.raises(ConfigError, match=r"sessions\.options\.audit_log: set the audit log"):
        app.session_store  # noqa: B018


def test_an_unknown_store_is_a_located_config_error_listing_the_registered_ones(
    isolated: Path, write_file: WriteFile
) -> None:
    config = write_file("toolwire.yaml", "sessions:\n  ttl_s: 60\n  store: sqlit\n")
    with pytest.raises(ConfigError) as raised:
        App.load(config, plugins=[shop()], load_entry_points=False)
    assert [str(problem) for problem in raised.value.problems] == [
        f"{config}:3: sessions.store: unknown session store 'sqlit'; registered: memory, redis, "
        "sqlite (a plugin adds one with the register_session_stores hook, docs/plugins.md)"
    ]
    with pytest.raises(ConfigError, match="unknown session store 'nope'; registered: memory"):
        create_session_store(SessionSettings(store="nope"))


def test_a_store_name_taken_or_badly_registered_fails_the_plugin_at_its_register_line() -> None:
    def factory(settings: SessionSettings) -> Any:
        raise AssertionError("not called at load")

    taken = plugin_with("register_session_stores", ("sqlite", factory), name="taken")
    not_callable = plugin_with("register_session_stores", ("mine", "a path"), name="careless")
    found = discover([taken, not_callable], load_entry_points=False)

    errors = {info.name: info for info in found.plugins}
    assert (
        "the session store 'sqlite' is already registered by toolwire itself (a built-in "
        "store at " in (errors["taken"].error or "")
    )
    assert "the factory of store 'mine' must be callable" in (errors["careless"].error or "")
    origin = errors["careless"].origin
    assert origin is not None and origin.path == __file__
    assert found.session_stores["sqlite"].plugin == BUILTIN_PLUGIN_NAME


def _raises(*args: object) -> Any:
    raise RuntimeError("store at 10.0.0.7 refused")


@pytest.mark.parametrize(
    ("hook", "section", "factory", "says"),
    [
        ("register_session_stores", "sessions", lambda settings: None,
         "the session store factory 'broken' returned NoneType, not a SessionStore"),
        ("register_session_stores", "sessions", _raises,
         "the session store factory 'broken' raised RuntimeError: store at 10.0.0.7 refused"),
        ("register_models", "llm", lambda settings, environ, profile: "a model",
         "the model factory 'broken' returned str, not a LanguageModel"),
        ("register_models", "llm", _raises,
         "the model factory 'broken' raised RuntimeError: store at 10.0.0.7 refused"),
    ],
    ids=["store-returns-none", "store-raises", "model-returns-str", "model-raises"],
)  # fmt: skip
def test_a_factory_that_raises_or_builds_the_wrong_thing_is_a_plugin_error_at_its_line(
    isolated: Path, write_file: WriteFile, hook: str, section: str, factory: Any, says: str
) -> None:
    """The factory's error, or the None it returned, was a traceback from the first question
    (``'NoneType' object has no attribute 'load'``)."""
    key = "store" if section == "sessions" else "provider"
    config = write_file("toolwire.yaml", f"{section}:\n  {key}: broken\n")
    plugin = plugin_with(hook, ("broken", factory), name="flaky")
    app = App.load(config, plugins=[shop(), plugin], load_entry_points=False)

    with pytest.raises(toolwire.PluginError) as raised:
        app.session_store if section == "sessions" else app.llm  # noqa: B018

    assert str(raised.value).endswith(f"plugin 'flaky': {says}")
    assert raised.value.problem.path == __file__


# -- register_commands ---------------------------------------------------------------------


def test_the_built_in_commands_register_through_the_same_hook() -> None:
    found = discover(
        builtins=COMMAND_MODULES, hooks=("register_commands",), load_entry_points=False
    )
    assert list(found.commands) == [
        "plugins",
        "tools",
        "check",
        "graph",
        "ask",
        "chat",
        "serve",
        "mcp",
        "model",
    ]
    assert {command.plugin for command in found.commands.values()} == {BUILTIN_PLUGIN_NAME}


def test_a_plugin_adds_a_command(
    isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "")
    config = write_file(
        "toolwire.yaml",
        "domains:\n  - {name: shop, description: Kitchen}\n"
        "tools:\n  - {class: '_build_samples:LookupTool', domain: shop}\n"
        "  - {class: '_build_samples:AnswerTool', domain: shop}\n",
    )
    cli = build_cli([guide_example("A CLI command", "toolwire_inventory")])

    result = runner.invoke(cli, ["--config", str(config), "domains"])
    own_option = runner.invoke(cli, ["domains", "--config", str(config)])

    assert result.exit_code == 0, result.output
    assert result.stdout == "shop: Kitchen (2 tools)\n"
    assert (own_option.exit_code, own_option.stdout) == (0, result.stdout)


def test_a_plugin_adds_a_group_of_commands() -> None:
    group = typer.Typer(name="inventory")

    @group.command()
    def count() -> None:
        typer.echo("3 kettles")

    cli = build_cli(
        [plugin_with("register_commands", (group,), name="inv")], load_entry_points=False
    )
    result = runner.invoke(cli, ["inventory", "count"])
    assert (result.exit_code, result.stdout) == (0, "3 kettles\n")


def test_a_taken_or_bad_command_name_fails_the_plugin_and_keeps_the_others() -> None:
    def ask() -> None:
        typer.echo("the plugin's ask")

    def stock() -> None:
        typer.echo("stock")

    thief = plugin_with("register_commands", (stock,), (ask,), name="thief")
    found = discover(
        [thief], builtins=COMMAND_MODULES, hooks=("register_commands",), load_entry_points=False
    )
    (info,) = found.plugins
    assert "the command 'ask' is already registered by toolwire itself (a built-in command" in (
        info.error or ""
    )
    assert "stock" not in found.commands  # the failing plugin contributes nothing
    assert found.commands["ask"].plugin == BUILTIN_PLUGIN_NAME

    unnamed = plugin_with("register_commands", (typer.Typer(),), name="unnamed")
    shouty = plugin_with("register_commands", (lambda: None,), name="shouty")
    errors = {
        info.name: info.error
        for info in discover(
            [unnamed, shouty], hooks=("register_commands",), load_entry_points=False
        ).plugins
    }
    assert "a typer.Typer group needs a name" in (errors["unnamed"] or "")
    assert "name='<lambda>' is not a command name" in (errors["shouty"] or "")


def test_toolwire_check_reports_an_installed_plugins_taken_command_name(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = isolated / "site"
    the_only_plugin(
        monkeypatch,
        site,
        "thief",
        "thief_commands",
        (
            "import toolwire\n\n"
            "def ask():\n    print('not the real ask')\n\n"
            "@toolwire.hookimpl\n"
            "def register_commands(register):\n"
            "    register(ask)\n"
        ),
    )

    cli = build_cli()
    checked = runner.invoke(cli, ["check"])

    assert checked.exit_code == 1
    [line] = checked.stderr.splitlines()
    assert line.startswith(f"{site / 'thief_commands.py'}:8: plugin 'thief' failed to load: ")
    assert "the command 'ask' is already registered by toolwire itself" in line
    assert "not the real ask" not in runner.invoke(cli, ["ask", "--help"]).stdout


def test_an_installed_plugin_with_a_misspelt_hook_is_reported_not_a_traceback(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = isolated / "site"
    the_only_plugin(
        monkeypatch,
        site,
        "typo",
        "typo_hooks",
        (
            "import toolwire\n\n"
            "@toolwire.hookimpl\n"
            "def register_config_file(register):\n"
            "    register('typo.yaml')\n"
        ),
    )

    with capture_logs() as logs:
        cli = build_cli()  # builds: the command line does not fail at import

    assert "check" in runner.invoke(cli, ["--help"]).stdout
    left_out = [entry for entry in logs if entry["event"] == "plugin_commands_left_out"]
    assert len(left_out) == 1 and "register_config_file" in left_out[0]["problem"]
    expected = (
        f"{site / 'typo_hooks.py'}:3: plugin 'typo': implements unknown hook "
        "'register_config_file'; did you mean 'register_config_files'?"
    )
    for command in (["check"], ["plugins"], ["tools"]):
        result = runner.invoke(cli, command)
        assert result.exit_code == 1, command
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert result.stderr.startswith(expected), command


# -- a domain's own orchestrator -------------------------------------------------------------


@pytest.fixture
def library(isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``override_plugin`` installed, its domain naming ``ArchiveOrchestrator`` in YAML."""
    the_only_plugin(monkeypatch, isolated / "site", "library", "override_plugin")
    return write_file(
        "toolwire.yaml",
        "llm: {provider: scripted}\nsessions: {store: memory}\n"
        "domains:\n  - name: library\n"
        "    orchestrator: override_plugin:ArchiveOrchestrator\n",
    )


async def test_app_builds_the_orchestrator_the_domain_names(library: Path) -> None:
    app = App.load(library)
    assert type(app.orchestrators["library"]) is override_plugin.ArchiveOrchestrator

    answer = await app.ask("Where is the 1911 catalogue?")
    await app.aclose()

    assert answer.text == override_plugin.FOUND  # the overridden fallback ran, verbatim
    assert [(run.tool_name, run.reason) for run in answer.trace.tools] == [
        ("library.shelf", "rag"),
        ("library.archive", "deep_fallback"),
    ]


def test_the_server_uses_it(library: Path) -> None:
    app = App.load(library)
    with TestClient(create_app(app)) as client:
        response = client.post("/v1/ask", json={"message": "Where is the 1911 catalogue?"})
    assert response.status_code == 200, response.text
    assert response.json()["text"] == override_plugin.FOUND


def test_the_cli_uses_it(library: Path) -> None:
    result = runner.invoke(build_cli(), ["--config", str(library), "ask", "Where is it?"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == override_plugin.FOUND


def test_without_it_the_domain_has_no_deep_search(library: Path, write_file: WriteFile) -> None:
    plain = write_file("plain.yaml", "llm: {provider: scripted}\nsessions: {store: memory}\n")
    result = runner.invoke(build_cli(), ["--config", str(plain), "ask", "Where is it?"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "Composed."


@pytest.mark.parametrize(
    ("reference", "problem"),
    [
        ("override_plugin.ArchiveOrchestrator", "must be written 'package.module:ClassName'"),
        ("no_such_module:Orchestrator", "cannot import module 'no_such_module'"),
        ("override_plugin:Missing", "module 'override_plugin' has no 'Missing'"),
        ("override_plugin:NotAnOrchestrator", "is not a subclass of toolwire.DomainOrchestrator"),
    ],
)
def test_a_bad_orchestrator_reference_is_located(
    library: Path, write_file: WriteFile, reference: str, problem: str
) -> None:
    config = write_file(
        "bad.yaml",
        "sessions: {store: memory}\ndomains:\n  - name: library\n"
        f"    orchestrator: {reference}\n",
    )
    with pytest.raises(ConfigError) as raised:
        App.load(config)
    (found,) = raised.value.problems
    assert str(found).startswith(f"{config}:4: domain 'library': orchestrator ")
    assert problem in str(found)


def test_a_failed_plugin_is_logged_once_per_process_and_listed_every_time(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI discovers the plugins for their commands, then the command loads the app: the
    failure is one ``plugin_failed`` event, and ``toolwire plugins`` still lists it."""
    site = isolated / "site"
    the_only_plugin(
        monkeypatch, site, "shaky", "shaky_plugin",
        "raise ImportError('shaky needs the shop_db driver')\n",
    )  # fmt: skip

    with capture_logs() as logs:
        cli = build_cli()
        listed = runner.invoke(cli, ["plugins", "--json"])
        checked = runner.invoke(cli, ["check"])

    failed = [event for event in logs if event["event"] == "plugin_failed"]
    assert [event["plugin"] for event in failed] == ["shaky"]
    assert failed[0]["log_level"] == "error"  # the app runs without it: shown at any level
    error = "failed to import: ImportError: shaky needs the shop_db driver"
    assert json.loads(listed.stdout) == [
        {"name": "shaky", "version": "1.0", "domains": [], "error": error}
    ]
    assert checked.exit_code == 1
    assert f"plugin 'shaky' failed to load: {error}" in checked.stderr
