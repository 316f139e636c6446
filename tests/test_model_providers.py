"""Model providers through the ``register_models`` hook (issue 12, the hook only): a plugin adds a
provider by name, ``llm.provider`` selects it, the built-in ``openai`` and ``embedded`` providers
register through the same hook; mistakes are located."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path
from typing import Any

import httpx
import pytest

import toolwire
from _build_samples import AnswerTool, LookupTool, WriteFile, make_plugin
from toolwire import App, ConfigError, ModelError
from toolwire.llm import ChatModel, OpenAIGateway, create_language_model
from toolwire.llm.providers import EMBEDDED, OPENAI
from toolwire.plugins import BUILTIN_PLUGIN_NAME, discover
from toolwire.settings import LLMSettings
from toolwire.testing import ScriptedModel
from toolwire.testing.fake_openai import default_output

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "plugins.md"


def guide_example() -> types.ModuleType:
    """The plugin module of docs/plugins.md's "A model provider" section, as written there."""
    section = GUIDE.read_text(encoding="utf-8").split("## A model provider", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    module = types.ModuleType("toolwire_generate_plugin")
    exec(compile(code[1], str(GUIDE), "exec"), module.__dict__)
    return module


def generate_server(request: httpx.Request) -> httpx.Response:
    """The guide's /generate API: JSON valid against the schema, else a sentence."""
    body = json.loads(request.content)
    assert request.url.path == "/generate" and body["max_tokens"] > 0
    text = default_output(body["schema"]) if body["schema"] else "Answered by the generate server."
    return httpx.Response(200, json={"text": text, "prompt_tokens": 7, "completion_tokens": 3})


def shop() -> object:
    return make_plugin("shop", domains=("shop",), tools=(LookupTool, AnswerTool))


async def test_a_plugin_adds_a_provider_that_llm_provider_selects(
    isolated: Path, write_file: WriteFile
) -> None:
    config = write_file(
        "toolwire.yaml",
        "llm:\n  provider: generate_server\n  base_url: http://generate.test\n"
        "sessions:\n  store: memory\n",
    )
    app = App.load(config, plugins=[shop(), guide_example()], load_entry_points=False)
    assert set(app.model_providers or {}) == {OPENAI, EMBEDDED, "generate_server"}
    assert app.model_providers is not None
    assert app.model_providers["generate_server"].plugin == "toolwire_generate_plugin"

    model = app.llm
    assert isinstance(model, ChatModel) and not isinstance(model, OpenAIGateway)
    transport: Any = model.transport
    assert str(transport.client.base_url) == "http://generate.test"
    await transport.client.aclose()
    transport.client = httpx.AsyncClient(
        base_url="http://generate.test", transport=httpx.MockTransport(generate_server)
    )
    answer = await app.ask("Is kettle in stock?", "shop")
    await app.aclose()

    assert answer.kind == "answer" and answer.text.startswith("Answered by the generate server.")
    assert answer.model_calls and {call.model for call in answer.model_calls} == {
        "generate-server"
    }
    assert answer.model_calls[-1].purpose == "answer"
    assert answer.usage.prompt_tokens == 7 * len(answer.model_calls)


async def test_the_providers_transport_errors_are_model_errors(isolated: Path) -> None:
    transport = guide_example().GenerateServerTransport("http://generate.test")
    await transport.client.aclose()
    transport.client = httpx.AsyncClient(
        base_url="http://generate.test",
        transport=httpx.MockTransport(lambda request: httpx.Response(500, text="sk-secret")),
    )
    model = ChatModel(transport, LLMSettings())
    with pytest.raises(ModelError, match="the generate server failed: HTTPStatusError") as raised:
        await model.answer("q", [])
    assert "sk-secret" not in str(raised.value)
    await model.aclose()


def test_the_built_in_providers_register_through_the_same_hook() -> None:
    found = discover(load_entry_points=False, environ={"TOOLWIRE_PLUGINS": ""})
    assert list(found.models) == [OPENAI, EMBEDDED]
    assert {provider.plugin for provider in found.models.values()} == {BUILTIN_PLUGIN_NAME}
    assert found.plugins == []  # toolwire's own plugin is not an installed plugin
    source = found.models[OPENAI].source
    assert source is not None and source.path.endswith("providers.py")


def test_llm_provider_chooses_between_the_built_in_ones() -> None:
    remote = LLMSettings(base_url="http://127.0.0.1:9/v1", model="m")
    assert isinstance(create_language_model(remote, environ={}), OpenAIGateway)
    embedded = create_language_model(remote.model_copy(update={"provider": EMBEDDED}), {})
    assert isinstance(embedded, OpenAIGateway)
    assert embedded.profile.completion_limits.answer == 384  # the embedded model's limits
    with pytest.raises(ConfigError, match="'openai' model provider has no server and no model"):
        create_language_model(LLMSettings(provider=OPENAI), environ={})


def refused(config: Path) -> list[str]:
    """The problems loading ``config`` (with the shop and the guide's example plugin) raises."""
    with pytest.raises(ConfigError) as raised:
        App.load(config, plugins=[shop(), guide_example()], load_entry_points=False)
    return [str(problem) for problem in raised.value.problems]


def test_an_unknown_provider_is_a_located_config_error_listing_the_registered_ones(
    isolated: Path, write_file: WriteFile
) -> None:
    config = write_file("toolwire.yaml", "llm:\n  timeout_s: 30\n  provider: generat_server\n")
    assert refused(config) == [
        f"{config}:3: llm.provider: unknown model provider 'generat_server'; registered: "
        "embedded, generate_server, openai (a plugin adds one with the register_models hook, "
        "docs/plugins.md)"
    ]
    with pytest.raises(ConfigError, match="unknown model provider 'nope'; registered: embedded"):
        create_language_model(LLMSettings(provider="nope"), environ={})


NO_SERVER_NO_MODEL = (
    "no server and no model: set TOOLWIRE_LLM_MODEL (or llm.model in toolwire.yaml) for OpenAI "
    "itself, or set TOOLWIRE_LLM_BASE_URL to your server"
)


@pytest.mark.parametrize(
    ("yaml", "environ", "problem"),
    [
        (  # the key chose openai: said, with how to keep the embedded model
            "llm:\n  timeout_s: 30\n",
            {"OPENAI_API_KEY": "sk-test"},
            "the model provider is 'openai' because OPENAI_API_KEY is set, and it has "
            f"{NO_SERVER_NO_MODEL}; to keep the embedded model, set llm.provider: embedded in "
            "toolwire.yaml (or unset OPENAI_API_KEY)",
        ),
        (
            "llm:\n  provider: openai\n",
            {},
            f"the 'openai' model provider has {NO_SERVER_NO_MODEL}",
        ),
    ],
    ids=["api-key", "named"],
)
def test_an_openai_provider_without_server_or_model_is_refused_at_load(
    isolated: Path,
    write_file: WriteFile,
    monkeypatch: pytest.MonkeyPatch,
    yaml: str,
    environ: dict[str, str],
    problem: str,
) -> None:
    """``toolwire check`` said ok, and every question then failed saying this."""
    for name in ("TOOLWIRE_LLM_BASE_URL", "TOOLWIRE_LLM_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    config = write_file("toolwire.yaml", yaml)

    assert refused(config) == [f"{config}:1: {problem}"]
    monkeypatch.setenv("TOOLWIRE_LLM_MODEL", "gpt-test")  # a model named: it loads
    App.load(config, plugins=[shop(), guide_example()], load_entry_points=False)


def test_a_model_passed_in_code_is_not_refused_for_the_configured_providers_settings(
    isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A developer with OPENAI_API_KEY exported testing with a scripted model: the configured
    provider is never made, so its settings are not checked."""
    for name in ("TOOLWIRE_LLM_BASE_URL", "TOOLWIRE_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    config = write_file("toolwire.yaml", "llm:\n  local_model: nope\n")

    app = App.load(config, plugins=[shop()], load_entry_points=False, llm=ScriptedModel())

    assert isinstance(app.llm, ScriptedModel)


def factory(settings: LLMSettings, environ: object, profile: object) -> ChatModel:
    raise AssertionError("a provider's factory runs at the first question, not at load")


def test_a_provider_name_taken_by_another_plugin_or_toolwire_fails_the_second_plugin() -> None:
    first = make_plugin("first", models=(("shared", factory),))
    second = make_plugin("second", models=(("shared", factory),))
    thief = make_plugin("thief", models=((OPENAI, factory),))

    found = discover([first, second, thief], load_entry_points=False)

    errors = {info.name: info.error for info in found.plugins}
    assert errors["first"] is None
    assert "the model provider 'shared' is already registered by plugin 'first' at " in (
        errors["second"] or ""
    )
    assert "register yours under another name" in (errors["second"] or "")
    assert "'openai' is already registered by toolwire itself (a built-in provider" in (
        errors["thief"] or ""
    )
    assert found.models["shared"].plugin == "first" and found.models[OPENAI].plugin == "toolwire"


@pytest.mark.parametrize(
    ("name", "provider", "problem"),
    [
        ("Generate Server", factory, "name='Generate Server' is not a lower snake case name"),
        ("generate", "not callable", "the factory of provider 'generate' must be callable"),
    ],
)
def test_a_bad_registration_fails_the_plugin_at_its_register_line(
    name: str, provider: object, problem: str
) -> None:
    @toolwire.hookimpl
    def register_models(register: Any) -> None:
        register(name, provider)  # the line the error points at

    plugin = types.ModuleType("sloppy")
    plugin.register_models = register_models  # type: ignore[attr-defined]
    (info,) = discover([plugin], load_entry_points=False).plugins
    assert info.error is not None and problem in info.error
    assert info.origin is not None and info.origin.path == __file__
    assert info.origin.line == register_models.__code__.co_firstlineno + 2
