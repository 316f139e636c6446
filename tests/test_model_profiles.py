"""Model profiles (issue 31 item 2): what differs between model families is a profile chosen by
the model's name or by ``llm.profile``, registered through ``register_model_profiles``; the
model, its transport and the selection steps follow it; mistakes are located."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

import toolwire
from _build_samples import AnswerTool, LookupTool, WriteFile, make_plugin
from toolwire import App, ConfigError
from toolwire.llm import ChatModel, ModelProfile, OpenAIGateway, Option, create_language_model
from toolwire.llm.builtin_profiles import EMBEDDED_PROFILE, GENERAL_PROFILE
from toolwire.llm.factory import model_profile
from toolwire.plugins import discover
from toolwire.settings import LLMSettings
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply

REMOTE = {"base_url": "http://127.0.0.1:9/v1"}


def shop(*profiles: tuple[str, ModelProfile]) -> object:
    return make_plugin(
        "shop", domains=("shop",), tools=(LookupTool, AnswerTool), model_profiles=profiles
    )


def load(write_file: WriteFile, llm: str, *plugins: object) -> App:
    config = write_file("toolwire.yaml", f"llm:\n{llm}sessions:\n  store: memory\n")
    return App.load(config, plugins=plugins or [shop()], load_entry_points=False)


# -- resolution ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, EMBEDDED_PROFILE),  # the embedded model serves: its profile
        ({"local_model": "qwen2.5-coder-0.5b"}, EMBEDDED_PROFILE),
        ({**REMOTE, "model": "gpt-4o"}, GENERAL_PROFILE),  # nobody's pattern
        ({**REMOTE, "model": "qwen2.5-coder-1.5b-instruct"}, EMBEDDED_PROFILE),  # served elsewhere
        ({**REMOTE, "model": "qwen2.5-coder-32b-instruct"}, GENERAL_PROFILE),  # a larger one
        ({**REMOTE}, GENERAL_PROFILE),  # the server's first model: not known yet
    ],
)
def test_the_profile_is_the_one_whose_pattern_matches_the_model(
    settings: dict[str, Any], expected: ModelProfile
) -> None:
    assert model_profile(LLMSettings(**settings), environ={}) == expected


def test_llm_profile_names_a_profile_or_changes_some_traits_of_one() -> None:
    named = model_profile(LLMSettings(profile="general"), environ={})  # the embedded model
    assert named == GENERAL_PROFILE
    changed = model_profile(
        LLMSettings(profile={"base": "general", "structured_output": "tools"}), environ={}
    )
    assert changed == GENERAL_PROFILE.model_copy(update={"structured_output": "tools"})
    # no base: the model's own profile; completion limits are changed purpose by purpose
    limits = model_profile(
        LLMSettings(profile={"worked_examples": False, "completion_limits": {"answer": 700}}),
        environ={},
    )
    assert limits.worked_examples is False
    assert limits.completion_limits.answer == 700
    assert limits.completion_limits.classification == 128  # the embedded profile's
    assert limits.structured_output == "json_schema"


async def test_the_gateway_follows_its_profile() -> None:
    """The structured output mode, the limits and their field name, the worked examples and the
    functions offered all come from the profile given to the factory."""
    profile = {
        "structured_output": "tools",
        "completion_limit_field": "max_completion_tokens",
        "completion_limits": {"suitability": 7},
        "worked_examples": False,
        "function_calling": False,
    }
    async with FakeOpenAIServer() as server:
        settings = LLMSettings(base_url=server.base_url, model="m", profile=profile)
        model = create_language_model(settings, environ={})
        assert isinstance(model, OpenAIGateway)
        server.script(FakeReply(text='{"answer": "yes"}'), FakeReply(text='{"choice": ["a"]}'))
        question = toolwire.llm.SuitabilityQuestion(tool_name="shop.a", question="A?")
        assert await model.suitability("task", [question]) == {"shop.a": True}
        chosen = await model.choose_functions("task", [Option(name="a", question="A?")])
        await model.aclose()

    yes_no, choice = server.chat_requests
    assert yes_no.body["max_completion_tokens"] == 7 and "max_tokens" not in yes_no.body
    assert yes_no.body["tool_choice"]["function"]["name"] == "YesNo"  # a forced function call
    assert "Worked examples" not in yes_no.messages[0]["content"]
    # no native function calling: the functions are a constrained choice of their names
    assert [each.name for each in chosen] == ["a"] and "tools" in choice.body
    assert choice.body["tool_choice"]["function"]["name"] == "Choice"


# -- in the app ----------------------------------------------------------------------------


def test_the_app_resolves_its_profile_without_starting_the_model(
    isolated: Path, write_file: WriteFile
) -> None:
    app = load(write_file, "  profile: {base: embedded, context_window_tokens: 16384}\n")
    assert app.model_profile.context_window_tokens == 16384
    assert app.model_profile.structured_output == "json_schema"
    assert app._llm is None


@pytest.mark.parametrize(
    ("llm", "line", "says"),
    [
        ("  profile: genral\n", 3,
         "llm.profile: unknown model profile 'genral'; did you mean 'general'? registered: "
         "embedded, general (a plugin adds one with the register_model_profiles hook, "
         "docs/plugins.md)"),
        ("  profile:\n    worked_examples: false\n    base: embeded\n", 5,
         "llm.profile: unknown model profile 'embeded'; did you mean 'embedded'?"),
        ("  profile:\n    base: general\n    structured_outptu: tools\n", 5,
         "llm.profile: unknown trait 'structured_outptu'; did you mean 'structured_output'?"),
        ("  profile:\n    completion_limits: {anwser: 5}\n", 4,
         "llm.profile: unknown completion limit 'completion_limits.anwser'; did you mean "
         "'answer'? the completion limits are classification, suitability, choice, routing, "
         "choice_per_option, choice_function_call, parameters, decomposition, gatekeeper, "
         "relevance, answer, answer_without_context, compression"),
        ("  profile:\n    completion_limits:\n      answer: -3\n", 5,
         "llm.profile.completion_limits.answer: Input should be greater than 0"),
        ("  max_part_tokens: 9000\n", 3,
         "llm.max_part_tokens (9000) must be less than the model profile's "
         "context_window_tokens (8192)"),
    ],
    ids=[
        "unknown-name",
        "unknown-base",
        "unknown-trait",
        "unknown-limit",
        "bad-limit",
        "part-past-window",
    ],
)  # fmt: skip
def test_a_profile_mistake_is_a_config_error_at_its_line(
    isolated: Path, write_file: WriteFile, llm: str, line: int, says: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(write_file, "  timeout_s: 5\n" + llm)
    (problem,) = raised.value.problems
    assert (problem.line, problem.path) == (line, str(isolated / "toolwire.yaml"))
    assert problem.message.startswith(says), problem.message


def test_a_plugins_profile_is_chosen_by_its_pattern_before_toolwires_own(
    isolated: Path, write_file: WriteFile
) -> None:
    """The plugin's pattern names the embedded 1.5B model too: the plugin's profile wins, and
    the selection runs the steps it names."""
    tuned = ModelProfile(models=("qwen2.5-coder-1.5b",), selection_steps=("retrieve", "call"))
    app = load(write_file, "  timeout_s: 5\n", shop(("tuned", tuned)))
    assert app.model_profiles is not None and app.model_profiles["tuned"].plugin == "shop"
    assert app.model_profile == tuned
    assert app.orchestrators["shop"].selector.step_names == ("retrieve", "call")
    # named explicitly, or as a base, it is used for any model
    remote = f"  model: gpt-4o\n  base_url: {REMOTE['base_url']}\n"
    changed = "  profile: {base: tuned, worked_examples: false}\n"
    other = load(write_file, remote + changed, shop(("tuned", tuned)))
    assert other.model_profile == tuned.model_copy(update={"worked_examples": False})


def test_the_selection_steps_setting_wins_over_the_profiles(
    isolated: Path, write_file: WriteFile
) -> None:
    config = write_file(
        "toolwire.yaml",
        "llm:\n  profile: {base: general, selection_steps: [retrieve, call]}\n"
        "orchestrator:\n  selection:\n    steps: [retrieve, choose]\n",
    )
    app = App.load(config, plugins=[shop()], load_entry_points=False)
    assert app.orchestrators["shop"].selector.step_names == ("retrieve", "choose")


def test_a_profile_naming_an_unregistered_step_is_located_at_llm_profile(
    isolated: Path, write_file: WriteFile
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(write_file, "  timeout_s: 5\n  profile: {selection_steps: [retrieve, guess]}\n")
    (problem,) = raised.value.problems
    assert problem.line == 3
    assert "the model profile's selection step 'guess' is not registered" in problem.message


@pytest.mark.parametrize(
    ("name", "profile", "problem"),
    [
        ("Tuned", ModelProfile(), "name='Tuned' is not a lower snake case name"),
        ("tuned", {"models": ["x*"]}, "profile 'tuned' must be a ModelProfile, got {'models'"),
        ("general", ModelProfile(), "the model profile 'general' is already registered by "
         "toolwire itself (a built-in profile"),
    ],
)  # fmt: skip
def test_a_bad_profile_registration_fails_the_plugin_at_its_register_line(
    name: str, profile: object, problem: str
) -> None:
    @toolwire.hookimpl
    def register_model_profiles(register: Any) -> None:
        register(name, profile)  # the line the error points at

    plugin = types.ModuleType("sloppy")
    plugin.register_model_profiles = register_model_profiles  # type: ignore[attr-defined]
    (info,) = discover([plugin], load_entry_points=False).plugins
    assert info.error is not None and problem in info.error
    assert info.origin is not None and info.origin.path == __file__
    assert info.origin.line == register_model_profiles.__code__.co_firstlineno + 2


def test_the_built_in_profiles_register_through_the_same_hook() -> None:
    found = discover(load_entry_points=False, environ={"TOOLWIRE_PLUGINS": ""})
    assert {name: each.value for name, each in found.model_profiles.items()} == {
        "general": GENERAL_PROFILE, "embedded": EMBEDDED_PROFILE
    }  # fmt: skip
    assert {each.plugin for each in found.model_profiles.values()} == {"toolwire"}


def test_a_chat_model_without_a_profile_gets_the_general_one() -> None:
    class Silent:
        async def send(self, request: object) -> object:
            raise AssertionError("no call")

        async def aclose(self) -> None:
            pass

    model = ChatModel(Silent(), LLMSettings())  # type: ignore[arg-type]
    assert model.profile == GENERAL_PROFILE
