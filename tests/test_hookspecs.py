"""Meta-tests that keep promises: hooks documented and tested, the public API listed."""

from __future__ import annotations

import inspect
from pathlib import Path

import toolwire
from _build_samples import LookupTool, PlanTool, make_plugin
from toolwire import hookspecs
from toolwire.llm.profiles import ModelProfile
from toolwire.plugins import HOOK_ORDER, discover

TESTS = Path(__file__).parent


def hook_names() -> list[str]:
    return [
        name
        for name, function in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(function, "toolwire_spec")
    ]


def test_the_hooks_are_the_documented_nine() -> None:
    assert sorted(hook_names()) == sorted(
        [
            "register_domains",
            "register_tools",
            "register_config_files",
            "register_coordinators",
            "register_models",
            "register_model_profiles",
            "register_selection_steps",
            "register_session_stores",
            "register_commands",
        ]
    )


def test_every_hook_has_a_one_line_docstring() -> None:
    for name in hook_names():
        doc = getattr(hookspecs, name).__doc__
        assert doc and doc.strip() and "\n" not in doc.strip(), name


def test_every_hook_takes_a_register_callback() -> None:
    for name in hook_names():
        assert list(inspect.signature(getattr(hookspecs, name)).parameters) == ["register"]


def test_every_hook_is_called_by_discovery(tmp_path: Path) -> None:
    """Behaviour, not a grep of the test sources: a plugin implementing every hook contributes
    through each of them."""
    assert sorted(HOOK_ORDER) == sorted(hook_names())
    shipped = tmp_path / "shipped.yaml"
    shipped.write_text("tools: []\n", encoding="utf-8")
    def factory(settings: object, environ: object, profile: object) -> object:
        raise AssertionError("not called by discovery")

    def step(settings: object) -> object:
        raise AssertionError("not called by discovery")

    profile = ModelProfile(models=("every-*",))

    def store(settings: object) -> object:
        raise AssertionError("not called by discovery")

    def every_command() -> None:
        raise AssertionError("not called by discovery")

    plugin = make_plugin(
        "every", domains=("every",), tools=(LookupTool,), coordinators=((PlanTool, "every"),),
        config_files=(str(shipped),), models=(("every_model", factory),),
        model_profiles=(("every_profile", profile),), selection_steps=(("every.step", step),),
        session_stores=(("every_store", store),), commands=(every_command,),
    )
    assert [name for name in hook_names() if hasattr(plugin, name)] == hook_names()
    found = discover([plugin], load_entry_points=False)
    assert found.failed == []
    assert [domain.name for domain in found.domains] == ["every"]
    assert [tool.tool_class for tool in found.tools] == [LookupTool, PlanTool]
    assert [file.path for file in found.config_files] == [shipped]
    assert found.models["every_model"].value is factory
    assert found.models["every_model"].plugin == "every"
    assert found.model_profiles["every_profile"].value is profile
    assert found.selection_steps["every.step"].value is step
    assert found.session_stores["every_store"].value is store
    assert found.commands["every-command"].value is every_command


def test_every_hook_is_documented_for_plugin_authors() -> None:
    guide = (TESTS.parent / "docs" / "plugins.md").read_text(encoding="utf-8")
    for name in hook_names():
        assert name in guide, name


def test_hookimpl_is_exported() -> None:
    assert toolwire.hookimpl is hookspecs.hookimpl


def test_all_is_sorted_and_equals_the_public_names() -> None:
    public = {
        name
        for name, value in vars(toolwire).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert toolwire.__all__ == sorted(toolwire.__all__)
    assert set(toolwire.__all__) == public


def test_the_plugin_guide_explains_coordinator_only_tools_and_parameter_instructions() -> None:
    guide = (TESTS.parent / "docs" / "plugins.md").read_text(encoding="utf-8")
    for name in ("coordinator_only", "coordinator_only_instruction", "parameter_instruction()"):
        assert name in guide, name
