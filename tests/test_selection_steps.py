"""Selection steps as extension points: a plugin's step listed in YAML runs like a built-in one,
a step that raises loses nothing else, a step nobody registered is a located ConfigError, and the
keys the step pipeline replaced say what to write instead."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

import toolwire
from _build_samples import WriteFile
from orchestration_kit import NoParams
from test_extension_hooks import guide_example
from toolwire import App, ConfigError, OrchestratorActivatedTool, PluginError, ToolExecutionResult
from toolwire.llm import Purpose
from toolwire.mcp.connections import McpConnections
from toolwire.selection.state import Candidate, SelectionState
from toolwire.selection.steps import builtin_steps
from toolwire.selection.trace import StepRecord
from toolwire.settings import SelectionSettings
from toolwire.testing import ScriptedModel


class BookRoom(OrchestratorActivatedTool[NoParams]):
    """Books a meeting room."""

    def executable_instruction(self) -> str:
        return "Does the message ask to book a meeting room?"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context("room booked")


class BookDesk(BookRoom):
    """Books a desk."""

    def executable_instruction(self) -> str:
        return "Does the message ask to book a desk?"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context("desk booked")


def office(*steps: object) -> types.ModuleType:
    """The office plugin: its domain, two booking tools, and the given step plugins' hooks."""
    module = types.ModuleType("toolwire_office")

    @toolwire.hookimpl
    def register_domains(register: Any) -> None:
        register(toolwire.DomainSpec(name="office", description="Rooms and desks"))

    @toolwire.hookimpl
    def register_tools(register: Any) -> None:
        register(BookRoom, name="book_room")
        register(BookDesk, name="book_desk")

    module.register_domains = register_domains  # type: ignore[attr-defined]
    module.register_tools = register_tools  # type: ignore[attr-defined]
    return module


def load(config: Path, model: ScriptedModel, *plugins: object) -> App:
    return App.load(config, plugins=[office(), *plugins], llm=model, load_entry_points=False)


async def test_a_plugins_step_listed_in_yaml_runs_after_the_built_in_ones(
    isolated: Path, write_file: WriteFile
) -> None:
    config = write_file(
        "toolwire.yaml",
        "orchestrator:\n  selection:\n    steps: [retrieve, choose, confirm, office.one_booking]\n",
    )
    model = (
        ScriptedModel()
        .on_choose(["book_room", "book_desk"])
        .on_suitability(["office.book_room", "office.book_desk"])
    )
    model.on_answer("booked")
    app = load(config, model, guide_example("A selection step", "toolwire_office_steps"))

    answer = await app.ask("Book a room and a desk for Monday")

    selection = answer.trace.selection
    assert selection is not None
    assert [step.step for step in selection.steps][-1] == "office.one_booking"
    assert selection.activated == ["office.book_room"]
    assert selection.why("office.book_desk") == (
        "named by the choice; confirmed on its question; dropped: one booking per message"
    )
    assert [tool.tool_name for tool in answer.trace.tools] == ["office.book_room"]
    await app.aclose()


class Raising:
    name = "office.raising"

    async def run(self, state: SelectionState, record: StepRecord) -> None:
        state.select([])
        raise RuntimeError("rule service down")


def raising_step() -> types.ModuleType:
    module = types.ModuleType("toolwire_raising")

    @toolwire.hookimpl
    def register_selection_steps(register: Any) -> None:
        register("office.raising", lambda settings: Raising())

    module.register_selection_steps = register_selection_steps  # type: ignore[attr-defined]
    return module


async def test_a_step_that_raises_is_a_recorded_failure_and_the_next_steps_run(
    isolated: Path, write_file: WriteFile
) -> None:
    config = write_file(
        "toolwire.yaml",
        "orchestrator:\n  selection:\n    steps: [retrieve, office.raising, choose, confirm]\n",
    )
    model = ScriptedModel().on_choose(["book_room"]).on_suitability(["office.book_room"])
    model.on_answer("booked")
    app = load(config, model, raising_step())

    answer = await app.ask("Book a room")

    assert answer.failures == [
        "task 1: office.raising: the step raised RuntimeError: rule service down; the "
        "selection goes on without it"
    ]
    assert answer.trace.selection is not None
    assert answer.trace.selection.activated == []  # what it did before raising stands
    assert model.calls_for(Purpose.CHOICE) == []  # it had selected (nothing): no choice made
    await app.aclose()


def test_an_unknown_step_is_a_config_error_at_its_line_with_the_closest_name(
    isolated: Path, write_file: WriteFile
) -> None:
    config = write_file(
        "toolwire.yaml",
        "orchestrator:\n  selection:\n    steps:\n      - retrieve\n      - chose\n",
    )
    with pytest.raises(ConfigError) as raised:
        load(config, ScriptedModel())
    [problem] = raised.value.problems
    assert str(problem).startswith(
        f"{config}:5: orchestrator.selection.steps: unknown selection step 'chose'; did you "
        "mean 'choose'? registered: arguments, call, choose, confirm, decisive_words, "
        "english.leading_action, english.several_requests, retrieve"
    )


@pytest.mark.parametrize("key", ["confirm", "mode", "decisive_ratio", "several_requests"])
def test_a_removed_selection_key_says_what_replaced_it(
    isolated: Path, write_file: WriteFile, key: str
) -> None:
    config = write_file("toolwire.yaml", f"orchestrator:\n  selection:\n    {key}: x\n")
    with pytest.raises(ConfigError) as raised:
        load(config, ScriptedModel())
    assert f"{config}:3:" in str(raised.value)
    assert (
        f"the key {key!r} was removed; list the selection steps in "
        "orchestrator.selection.steps instead" in str(raised.value)
    )


def test_a_removed_routing_key_names_its_constant(isolated: Path, write_file: WriteFile) -> None:
    config = write_file("toolwire.yaml", "orchestrator:\n  routing:\n    decisive_ratio: 3\n")
    with pytest.raises(ConfigError, match="'decisive_ratio' was removed; it is fixed"):
        load(config, ScriptedModel())


def test_a_step_name_must_be_dotted_lower_snake_case(isolated: Path) -> None:
    module = types.ModuleType("toolwire_bad_step")

    @toolwire.hookimpl
    def register_selection_steps(register: Any) -> None:
        register("Office Rule", lambda settings: Raising())

    module.register_selection_steps = register_selection_steps  # type: ignore[attr-defined]
    app = App.load(plugins=[office(), module], llm=ScriptedModel(), load_entry_points=False)
    [failed] = [info for info in app.plugins if info.error]
    assert "name='Office Rule' is not a dotted lower snake case name" in str(failed.error)


def test_the_model_profile_names_the_default_steps(isolated: Path, write_file: WriteFile) -> None:
    """The embedded model's profile runs retrieve, choose, confirm; a remote model's (general)
    adds decisive_words; orchestrator.selection.steps overrides either."""
    remote = write_file(
        "remote.yaml", "llm:\n  base_url: http://127.0.0.1:9/v1\n  model: some-large-model\n"
    )
    chosen = write_file(
        "chosen.yaml",
        "llm:\n  base_url: http://127.0.0.1:9/v1\n  model: some-large-model\n"
        "orchestrator:\n  selection:\n    steps: [retrieve, call, confirm]\n",
    )
    embedded = load(write_file("embedded.yaml", "llm: {}\n"), ScriptedModel())
    general = load(remote, ScriptedModel())
    overridden = load(chosen, ScriptedModel())

    steps = [app.orchestrators["office"].selector.step_names for app in (embedded, general)]
    assert steps == [
        ("retrieve", "choose", "confirm"),
        ("retrieve", "decisive_words", "choose", "confirm"),
    ]
    assert overridden.orchestrators["office"].selector.step_names == ("retrieve", "call", "confirm")


@pytest.mark.parametrize("steps", ["[choose, confirm]", "[]"])
def test_a_step_list_that_puts_no_candidates_is_a_config_error(
    isolated: Path, write_file: WriteFile, steps: str
) -> None:
    """Only ``retrieve`` puts candidates: without it every step finds none and the selection
    quietly selects nothing; an empty list is no exception (it is not the profile's steps)."""
    config = write_file("toolwire.yaml", f"orchestrator:\n  selection:\n    steps: {steps}\n")
    with pytest.raises(ConfigError) as raised:
        load(config, ScriptedModel())
    [problem] = raised.value.problems
    assert (problem.path, problem.line) == (str(config), 3)
    assert problem.message == (
        f"orchestrator.selection.steps: no step of {steps} puts candidates "
        "in the selection, so no tool would ever be selected; start the list with retrieve (or "
        "leave the setting out: the model profile's steps)"
    )


def test_a_profiles_step_list_that_puts_no_candidates_is_a_config_error(
    isolated: Path, write_file: WriteFile
) -> None:
    config = write_file("toolwire.yaml", "llm:\n  profile: {selection_steps: [choose]}\n")
    with pytest.raises(ConfigError) as raised:
        load(config, ScriptedModel())
    [problem] = raised.value.problems
    assert (problem.path, problem.line) == (str(config), 2)
    assert problem.message == (
        "llm.profile: no step of the model profile's selection_steps [choose] puts candidates "
        "in the selection, so no tool would ever be selected; start that list with retrieve, "
        "or name the steps in orchestrator.selection.steps"
    )


def test_a_step_factory_that_raises_is_a_plugin_error_at_its_register_line(
    isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It escaped ``App.load`` as the factory's own exception, the MCP servers left running."""
    module = types.ModuleType("toolwire_broken_rules")

    def unreadable(settings: SelectionSettings) -> Raising:
        raise RuntimeError("rules file unreadable")

    @toolwire.hookimpl
    def register_selection_steps(register: Any) -> None:
        register("office.rules", unreadable)

    module.register_selection_steps = register_selection_steps  # type: ignore[attr-defined]
    config = write_file(
        "toolwire.yaml", "orchestrator:\n  selection:\n    steps: [retrieve, office.rules]\n"
    )
    closed: list[McpConnections] = []
    monkeypatch.setattr(McpConnections, "close", lambda self: closed.append(self))

    with pytest.raises(PluginError) as raised:
        load(config, ScriptedModel(), module)

    assert str(raised.value) == (
        f"{__file__}:{register_selection_steps.__code__.co_firstlineno + 2}: plugin "
        "'toolwire_broken_rules': the selection step factory 'office.rules' raised "
        "RuntimeError: rules file unreadable"
    )
    assert len(closed) == 1


class AllTools:
    """A plugin's own retrieval: every tool of the domain is a candidate."""

    name = "office.all_tools"
    provides_candidates = True

    async def run(self, state: SelectionState, record: StepRecord) -> None:
        state.candidates = [Candidate(tool, 0.0) for tool in state.catalogue.tools]


async def test_a_plugins_step_that_provides_candidates_may_replace_retrieve(
    isolated: Path, write_file: WriteFile
) -> None:
    module = types.ModuleType("toolwire_all_tools")

    @toolwire.hookimpl
    def register_selection_steps(register: Any) -> None:
        register("office.all_tools", lambda settings: AllTools())

    module.register_selection_steps = register_selection_steps  # type: ignore[attr-defined]
    config = write_file(
        "toolwire.yaml", "orchestrator:\n  selection:\n    steps: [office.all_tools, choose]\n"
    )
    model = ScriptedModel().on_choose(["book_desk"]).on_answer("booked")
    app = load(config, model, module)

    answer = await app.ask("Book a desk")

    assert answer.trace.selection is not None
    assert answer.trace.selection.activated == ["office.book_desk"]
    await app.aclose()


def test_an_unknown_step_of_an_orchestrator_without_an_app_is_named_once() -> None:
    with pytest.raises(ConfigError) as raised:
        builtin_steps(SelectionSettings(steps=["chose"]))
    [problem] = raised.value.problems
    assert problem.message == (
        "orchestrator.selection.steps: unknown selection step 'chose'; did you mean 'choose'? "
        "registered: arguments, call, choose, confirm, decisive_words, english.leading_action, "
        "english.several_requests, retrieve (a plugin adds one with the "
        "register_selection_steps hook, docs/plugins.md)"
    )
