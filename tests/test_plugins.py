"""Plugin discovery: entry points, explicit objects, and every way a plugin can fail."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from structlog.testing import capture_logs

import toolwire
from _build_samples import (
    AnswerTool,
    LookupTool,
    NotATool,
    PlanTool,
    install_distribution,
    installed_only_in,
    make_plugin,
)
from toolwire import PluginError
from toolwire import plugins as plugins_module
from toolwire.plugins import PluginInfo, discover
from toolwire.registry import SourceLocation


def fake_entry_points(monkeypatch: pytest.MonkeyPatch, *points: EntryPoint) -> None:
    def entry_points(group: str) -> list[EntryPoint]:
        assert group == "toolwire"
        return list(points)

    monkeypatch.setattr(plugins_module.metadata, "entry_points", entry_points)


def hook_module(name: str, *hooks: Callable[..., None]) -> types.ModuleType:
    """A plugin module holding ``hooks``, each under its function name (pluggy's match)."""
    module = types.ModuleType(name)
    for hook in hooks:
        setattr(module, hook.__name__, hook)
    return module


def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> None:
    (tmp_path / f"{name}.py").write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_explicit_plugin_contributes_domains_tools_and_files(tmp_path: Path) -> None:
    yaml_file = tmp_path / "shipped.yaml"
    yaml_file.write_text("tools: []\n")
    plugin = make_plugin(
        "alpha", domains=("alpha",), tools=(LookupTool, AnswerTool),
        config_files=(str(yaml_file),), version="1.2",
    )
    found = discover([plugin], load_entry_points=False)
    assert found.plugins == [PluginInfo("alpha", "1.2", ("alpha",), None)]
    assert [d.name for d in found.domains] == ["alpha"]
    assert [(t.tool_class, t.domain, t.plugin) for t in found.tools] == [
        (LookupTool, "alpha", "alpha"),
        (AnswerTool, "alpha", "alpha"),
    ]
    assert [(f.plugin, f.path) for f in found.config_files] == [("alpha", yaml_file)]


def test_register_tools_takes_name_domain_and_priority() -> None:
    @toolwire.hookimpl
    def register_domains(register):  # type: ignore[no-untyped-def]
        register(toolwire.DomainSpec(name="one"))
        register(toolwire.DomainSpec(name="two"))

    @toolwire.hookimpl
    def register_tools(register):  # type: ignore[no-untyped-def]
        register(LookupTool, name="finder", domain="two", priority=5)

    plugin = hook_module("named", register_domains, register_tools)
    (tool,) = discover([plugin], load_entry_points=False).tools
    assert (tool.name, tool.domain, tool.priority) == ("finder", "two", 5)


def test_relative_config_file_is_relative_to_the_plugin_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_module(tmp_path, monkeypatch, "shipping_plugin", (
        "import toolwire\n"
        "@toolwire.hookimpl\n"
        "def register_config_files(register):\n"
        "    register('shipped.yaml')\n"
    ))
    (tmp_path / "shipped.yaml").write_text("tools: []\n")
    import shipping_plugin  # type: ignore[import-not-found]

    found = discover([shipping_plugin], load_entry_points=False)
    assert [f.path for f in found.config_files] == [tmp_path / "shipped.yaml"]


@pytest.mark.usefixtures("info_logs")
def test_entry_points_load_and_a_broken_one_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_module(tmp_path, monkeypatch, "good_plugin", (
        "import toolwire\n"
        "@toolwire.hookimpl\n"
        "def register_domains(register):\n"
        "    register(toolwire.DomainSpec(name='good'))\n"
    ))
    write_module(tmp_path, monkeypatch, "broken_plugin", "raise RuntimeError('boom at import')\n")
    fake_entry_points(
        monkeypatch,
        EntryPoint("broken", "broken_plugin", "toolwire"),
        EntryPoint("missing", "no_such_module_here", "toolwire"),
        EntryPoint("good", "good_plugin", "toolwire"),
    )
    with capture_logs() as logs:
        found = discover()
    by_name = {info.name: info for info in found.plugins}
    assert by_name["good"].error is None and by_name["good"].domains == ("good",)
    assert by_name["broken"].error == "failed to import: RuntimeError: boom at import"
    assert "ModuleNotFoundError" in (by_name["missing"].error or "")
    assert [d.name for d in found.domains] == ["good"]
    events = [(e["event"], e["plugin"]) for e in logs]
    assert ("plugin_failed", "broken") in events
    assert ("plugin_loaded", "good") in events


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ("import sys\nsys.exit('no licence key')\n",
         "failed to import: SystemExit: no licence key"),
        ("import toolwire\n@toolwire.hookimpl\ndef register_domains(register):\n"
         "    raise SystemExit(3)\n", "raised SystemExit: 3"),
    ],
    ids=["at-import", "in-a-hook"],
)  # fmt: skip
def test_a_plugin_calling_sys_exit_is_reported_and_the_others_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, error: str
) -> None:
    """Before, ``sys.exit()`` in a plugin ended every toolwire command (check, ask, serve)."""
    write_module(tmp_path, monkeypatch, "exiting_plugin", source)
    write_module(tmp_path, monkeypatch, "calm_plugin", (
        "import toolwire\n"
        "@toolwire.hookimpl\n"
        "def register_domains(register):\n"
        "    register(toolwire.DomainSpec(name='calm'))\n"
    ))  # fmt: skip
    monkeypatch.delitem(sys.modules, "exiting_plugin", raising=False)
    fake_entry_points(
        monkeypatch,
        EntryPoint("exiting", "exiting_plugin", "toolwire"),
        EntryPoint("calm", "calm_plugin", "toolwire"),
    )

    found = discover()

    by_name = {info.name: info for info in found.plugins}
    assert by_name["exiting"].error == error
    assert by_name["calm"].error is None
    assert [d.name for d in found.domains] == ["calm"]


UNPRINTABLE = (
    "class Unprintable(Exception):\n"
    "    def __str__(self):\n"
    "        raise RuntimeError('no text')\n"
)


@pytest.mark.parametrize(
    ("source", "error"),
    [
        (UNPRINTABLE + "raise Unprintable()\n", "failed to import: Unprintable: "),
        (UNPRINTABLE + "import toolwire\n@toolwire.hookimpl\ndef register_domains(register):\n"
         "    raise Unprintable()\n", "raised Unprintable: "),
    ],
    ids=["at-import", "in-a-hook"],
)  # fmt: skip
def test_a_plugin_raising_an_error_without_text_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, error: str
) -> None:
    """Reporting it called str() of the error, which raised: toolwire plugins (and every
    command) ended in a traceback."""
    write_module(tmp_path, monkeypatch, "unprintable_plugin", source)
    monkeypatch.delitem(sys.modules, "unprintable_plugin", raising=False)
    fake_entry_points(monkeypatch, EntryPoint("unprintable", "unprintable_plugin", "toolwire"))

    (info,) = discover().plugins

    assert info.error == error + "(its message cannot be shown: str() of it raised)"


def test_toolwire_plugins_limits_entry_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_module(tmp_path, monkeypatch, "broken_plugin2", "raise RuntimeError('never imported')\n")
    fake_entry_points(
        monkeypatch,
        EntryPoint("pharma", "toolwire_pharma.plugin", "toolwire"),
        EntryPoint("broken", "broken_plugin2", "toolwire"),
    )
    found = discover(environ={"TOOLWIRE_PLUGINS": "pharma, ghost"})
    assert [(p.name, p.error is None) for p in found.plugins] == [
        ("ghost", False),
        ("pharma", True),
    ]
    assert "named in TOOLWIRE_PLUGINS but no installed plugin" in (found.plugins[0].error or "")
    assert discover(environ={"TOOLWIRE_PLUGINS": ""}).plugins == []


def test_explicit_plugins_load_even_when_the_variable_is_empty() -> None:
    plugin = make_plugin("explicit", domains=("explicit",))
    found = discover([plugin], environ={"TOOLWIRE_PLUGINS": ""})
    assert [p.name for p in found.plugins] == ["explicit"]


def test_plugin_raising_in_a_hook_is_reported_and_the_others_count() -> None:
    @toolwire.hookimpl
    def register_domains(register):  # type: ignore[no-untyped-def]
        register(toolwire.DomainSpec(name="half"))

    @toolwire.hookimpl
    def register_tools(register):  # type: ignore[no-untyped-def]
        raise ValueError("database unreachable")

    failing = hook_module("failing", register_domains, register_tools)
    healthy = make_plugin("healthy", domains=("healthy",), tools=(LookupTool,))
    found = discover([failing, healthy], load_entry_points=False)
    raise_line = register_tools.__code__.co_firstlineno + 2
    assert found.plugins[0] == PluginInfo(
        "failing", None, (), "raised ValueError: database unreachable",
        SourceLocation(__file__, raise_line),
    )
    assert str(found.plugins[0].problem()) == (
        f"{__file__}:{raise_line}: plugin 'failing' failed to load: "
        "raised ValueError: database unreachable"
    )
    assert found.failed == [found.plugins[0]]
    # nothing of the failing plugin survives, not even what it registered before raising
    assert [d.name for d in found.domains] == ["healthy"]
    assert [t.plugin for t in found.tools] == ["healthy"]


def test_registering_something_that_is_not_a_tool_fails_the_plugin() -> None:
    plugin = make_plugin("sloppy", domains=("sloppy",), tools=(NotATool,))  # type: ignore[arg-type]
    (info,) = discover([plugin], load_entry_points=False).plugins
    assert info.error is not None
    assert "ToolDeclarationError" in info.error and "not a ChatbotTool subclass" in info.error


def test_tool_without_domain_needs_a_single_plugin_domain() -> None:
    plugin = make_plugin("two_domains", domains=("one", "two"), tools=(LookupTool,))
    (info,) = discover([plugin], load_entry_points=False).plugins
    assert "registered without a domain and the plugin declares 2 domains" in (info.error or "")


def test_coordinators_join_another_plugins_domain() -> None:
    owner = make_plugin("owner", domains=("shop",))
    guest = make_plugin("guest", coordinators=((PlanTool, "shop"),))
    found = discover([owner, guest], load_entry_points=False)
    (tool,) = found.tools
    assert (tool.plugin, tool.domain, tool.tool_class) == ("guest", "shop", PlanTool)


def test_a_non_coordinator_registered_as_coordinator_fails_the_plugin() -> None:
    plugin = make_plugin("wrong", coordinators=((LookupTool, "shop"),))
    (info,) = discover([plugin], load_entry_points=False).plugins
    assert "does not implement toolwire.AgentCoordinator" in (info.error or "")


def test_missing_config_file_fails_the_plugin(tmp_path: Path) -> None:
    plugin = make_plugin("lost", config_files=(str(tmp_path / "nowhere.yaml"),))
    (info,) = discover([plugin], load_entry_points=False).plugins
    assert "FileNotFoundError" in (info.error or "")


def test_register_domains_insists_on_a_domain_spec() -> None:
    @toolwire.hookimpl
    def register_domains(register):  # type: ignore[no-untyped-def]
        register("pharma")

    plugin = hook_module("stringy", register_domains)
    (info,) = discover([plugin], load_entry_points=False).plugins
    assert "expects a toolwire DomainSpec" in (info.error or "")


def test_unknown_hook_implementation_fails_at_start_with_a_suggestion() -> None:
    @toolwire.hookimpl
    def register_tool(register):  # type: ignore[no-untyped-def]
        """Misspelt: the hook is register_tools."""

    plugin = hook_module("typo", register_tool)
    with pytest.raises(PluginError) as raised:
        discover([plugin], load_entry_points=False)
    assert raised.value.plugin == "typo"
    assert "unknown hook 'register_tool'; did you mean 'register_tools'?" in str(raised.value)
    code = register_tool.__code__
    assert (raised.value.problem.path, raised.value.problem.line) == (
        code.co_filename, code.co_firstlineno
    )
    assert str(raised.value).startswith(f"{code.co_filename}:{code.co_firstlineno}: plugin 'typo'")


def test_hook_implementation_with_a_wrong_argument_fails_at_start() -> None:
    @toolwire.hookimpl
    def register_tools(registrar):  # type: ignore[no-untyped-def]
        """The argument must be called ``register``."""

    plugin = hook_module("wrong_args", register_tools)
    with pytest.raises(PluginError, match=r"wrong_args.*registrar"):
        discover([plugin], load_entry_points=False)


def test_two_plugins_with_one_name_report_the_second() -> None:
    first = make_plugin("same", domains=("first",))
    second = make_plugin("same", domains=("second",))
    found = discover([first, second], load_entry_points=False)
    assert [(p.name, p.error) for p in found.plugins] == [
        ("same", "another plugin has the same name"),
        ("same", None),
    ]
    assert [d.name for d in found.domains] == ["first"]


# -- registrations are checked as strictly as YAML (issue 11 item 6) ---------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("priority='5'", "register_tools: priority='5' is a str; pass a whole number"),
        ("priority=True", "register_tools: priority=True is a bool; pass a whole number"),
        ("priority=2.5", "register_tools: priority=2.5 is a float; pass a whole number"),
        ("name='Finder Tool'", "register_tools: name='Finder Tool' is not a lower snake case"),
        ("domain=5", "register_tools: domain=5 is not a lower snake case name"),
    ],
)
def test_a_registration_of_the_wrong_type_fails_the_plugin_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arguments: str, message: str
) -> None:
    write_module(tmp_path, monkeypatch, "sloppy_priority", (
        "import toolwire\n"
        "from _build_samples import PlanTool\n"
        "@toolwire.hookimpl\n"
        "def register_domains(register):\n"
        "    register(toolwire.DomainSpec(name='shop'))\n"
        "@toolwire.hookimpl\n"
        "def register_tools(register):\n"
        f"    register(PlanTool, {arguments})\n"
    ))
    monkeypatch.delitem(sys.modules, "sloppy_priority", raising=False)  # the previous case's
    plugin = importlib.import_module("sloppy_priority")

    found = discover([plugin], load_entry_points=False)

    (info,) = found.plugins
    assert info.error is not None and message in info.error
    assert info.origin == SourceLocation(str(tmp_path / "sloppy_priority.py"), 8)
    assert found.tools == [] and found.domains == []


def test_a_coordinator_registration_is_checked_the_same_way() -> None:
    @toolwire.hookimpl
    def register_coordinators(register):  # type: ignore[no-untyped-def]
        register(PlanTool, domain="shop", priority="first")

    (info,) = discover([hook_module("c", register_coordinators)], load_entry_points=False).plugins
    assert "register_coordinators: priority='first' is a str" in (info.error or "")


def test_a_tool_class_whose_priority_is_not_a_number_fails_at_registration() -> None:
    class Late(PlanTool):
        priority = "5"  # type: ignore[assignment]

    plugin = make_plugin("late", domains=("shop",), tools=(Late,))
    (info,) = discover([plugin], load_entry_points=False).plugins
    assert "its priority '5' is a str, not a whole number" in (info.error or "")


def test_a_hook_domain_needs_a_lower_snake_case_name() -> None:
    plugin = make_plugin("caps", domains=("Shop-Floor",))
    (info,) = discover([plugin], load_entry_points=False).plugins
    assert "register_domains: DomainSpec.name='Shop-Floor' is not a lower snake case" in (
        info.error or ""
    )


# -- two distributions, one plugin name (issue 11 item 8) --------------------------------------


def test_two_distributions_with_one_entry_point_name_are_a_collision_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_distribution(tmp_path, "alpha-shop", "1.0", "shop", "alpha_shop_plugin")
    install_distribution(tmp_path, "beta-shop", "2.0", "shop", "beta_shop_plugin")
    install_distribution(tmp_path, "gamma-desk", "3.0", "desk", "gamma_desk_plugin")
    installed_only_in(monkeypatch, tmp_path)

    found = discover(environ={"TOOLWIRE_PLUGINS": "shop,desk"})

    by_name = {info.name: info for info in found.plugins}
    assert by_name["shop"].error == (
        "2 installed distributions provide the plugin 'shop': alpha-shop 1.0 (alpha_shop_plugin) "
        "and beta-shop 2.0 (beta_shop_plugin); none of them was loaded. Uninstall all but one, "
        "or rename its entry point (the [project.entry-points.toolwire] table of its "
        "pyproject.toml)"
    )
    assert by_name["desk"].error is None and by_name["desk"].version == "3.0"
    assert [domain.name for domain in found.domains] == ["gamma_desk_plugin"]


def test_one_distribution_seen_twice_is_one_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    point = EntryPoint("twice", "twice_plugin_module", "toolwire")
    module = make_plugin("twice", domains=("twice",))
    monkeypatch.setitem(sys.modules, "twice_plugin_module", module)
    fake_entry_points(monkeypatch, point, point)

    found = discover(environ={"TOOLWIRE_PLUGINS": "twice"})

    assert [(info.name, info.error) for info in found.plugins] == [("twice", None)]


def test_a_plugin_passed_and_installed_loads_once_under_its_first_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = make_plugin("passed_plugin_module", domains=("passed",))
    monkeypatch.setitem(sys.modules, "passed_plugin_module", module)
    fake_entry_points(monkeypatch, EntryPoint("passed", "passed_plugin_module", "toolwire"))

    with capture_logs() as logs:
        found = discover([module], environ={})

    assert [(info.name, info.error) for info in found.plugins] == [("passed_plugin_module", None)]
    assert [domain.name for domain in found.domains] == ["passed"]
    assert {
        "event": "plugin_already_loaded",
        "plugin": "passed",
        "loaded_as": "passed_plugin_module",
        "log_level": "info",
    } in logs


def test_one_module_under_two_entry_point_names_loads_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = make_plugin("two_names", domains=("two_names",))
    monkeypatch.setitem(sys.modules, "two_names_module", module)
    fake_entry_points(
        monkeypatch,
        EntryPoint("first_name", "two_names_module", "toolwire"),
        EntryPoint("second_name", "two_names_module", "toolwire"),
    )

    found = discover(environ={})

    assert [(info.name, info.error) for info in found.plugins] == [("first_name", None)]
    assert [domain.name for domain in found.domains] == ["two_names"]


# -- the domains a plugin contributes, by any route (issue 11 item 9) --------------------------


def test_a_plugin_lists_the_domains_its_shipped_yaml_declares(tmp_path: Path) -> None:
    shipped = tmp_path / "shipped.yaml"
    shipped.write_text("domains:\n  - {name: garden}\n  - {name: alpha}\ntools: []\n")
    plugin = make_plugin("alpha", domains=("alpha",), config_files=(str(shipped),))

    found = discover([plugin], load_entry_points=False)

    assert found.plugins[0].domains == ("alpha", "garden")
    assert [file.config.domains[0].name for file in found.config_files] == ["garden"]


def test_a_shipped_yaml_that_cannot_be_read_waits_for_the_build_to_report_it(
    tmp_path: Path,
) -> None:
    shipped = tmp_path / "shipped.yaml"
    shipped.write_text("domains: [unclosed\n")
    plugin = make_plugin("alpha", domains=("alpha",), config_files=(str(shipped),))

    found = discover([plugin], load_entry_points=False)

    assert found.plugins[0].error is None and found.plugins[0].domains == ("alpha",)
    (file,) = found.config_files
    assert [problem.line for problem in file.problems] == [2]


@pytest.mark.parametrize("at_import", [False, True], ids=["in_a_hook", "at_import"])
def test_an_error_raised_in_a_library_is_located_at_the_plugins_own_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at_import: bool
) -> None:
    """pydantic refuses the DomainSpec: the origin is the plugin's call, not pydantic's code."""
    package = tmp_path / "strict_domains"
    package.mkdir()
    (package / "__init__.py").write_text("")
    call = "toolwire.DomainSpec(name='bad', prompt_types='oops')"
    (package / "plugin.py").write_text(
        "import toolwire\n"
        + (f"{call}\n" if at_import else "")
        + "@toolwire.hookimpl\n"
        "def register_domains(register):\n"
        f"    register({call})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("strict_domains", "strict_domains.plugin"):
        monkeypatch.delitem(sys.modules, name, raising=False)  # the other case's
    fake_entry_points(monkeypatch, EntryPoint("strict", "strict_domains.plugin", "toolwire"))

    (info,) = discover().plugins

    assert info.error is not None and "ValidationError" in info.error
    assert info.origin == SourceLocation(str(package / "plugin.py"), 2 if at_import else 4)
