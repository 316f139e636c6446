"""toolwire.testing: the scripted model, the request guard, the fixtures, the conformance mixin."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

import toolwire.llm as llm_package
from orchestration_kit import plugin_of
from toolwire import (
    ContextConsumerTool,
    ModelError,
    OrchestratorActivatedTool,
    PromptAndContext,
    ToolExecutionResult,
)
from toolwire.llm import (
    ModelRequestsBlockedError,
    Purpose,
    SuitabilityQuestion,
    collect_calls,
    ensure_model_requests_allowed,
)
from toolwire.registry import DomainSpec
from toolwire.testing import (
    ScriptedModel,
    ToolConformance,
    UnscriptedCallError,
    block_model_requests,
)
from toolwire.testing.pytest_plugin import AppFactory
from toolwire.testing.wiring import registry_of


class Topic(BaseModel):
    topic: str


def _questions(*names: str) -> list[SuitabilityQuestion]:
    return [SuitabilityQuestion(tool_name=name, question=f"{name}?") for name in names]


async def test_an_unscripted_call_fails_loudly_naming_purpose_and_inputs() -> None:
    model = ScriptedModel()

    with pytest.raises(UnscriptedCallError) as raised:
        await model.extract(Topic, "tell me about owls", instruction="find the topic")

    message = str(raised.value)
    assert "unscripted 'decomposition' call" in message
    assert "schema='Topic'" in message and "text='tell me about owls'" in message
    assert "model.on_extract(Schema, ...)" in message
    assert not isinstance(raised.value, Exception)  # `except Exception` cannot swallow it


async def test_suitability_answers_by_short_or_prefixed_name_and_by_function() -> None:
    model = ScriptedModel().on_suitability({"alpha": True, "demo.beta": True}, times=1)
    model.on_suitability(lambda prompt, names: [n for n in names if prompt in n])

    first = await model.suitability("x", _questions("demo.alpha", "demo.beta", "demo.gamma"))
    second = await model.suitability("gamma", _questions("demo.alpha", "demo.gamma"))

    assert first == {"demo.alpha": True, "demo.beta": True, "demo.gamma": False}
    assert second == {"demo.alpha": False, "demo.gamma": True}
    assert [call.inputs["tool_names"] for call in model.calls_for(Purpose.SUITABILITY)] == [
        ["demo.alpha", "demo.beta", "demo.gamma"],
        ["demo.alpha", "demo.gamma"],
    ]


async def test_extract_rules_by_schema_purpose_times_and_errors() -> None:
    model = ScriptedModel()
    model.on_extract(Topic, ModelError("parameters", "down"), times=1)
    model.on_extract(Topic, {"topic": "owls"})
    model.on_extract(
        Topic, lambda text, instruction: Topic(topic=text.upper()), purpose=Purpose.PARAMETERS
    )

    with pytest.raises(ModelError):
        await model.extract(Topic, "a")
    assert await model.extract(Topic, "b") == Topic(topic="owls")
    assert await model.extract(Topic, "c", purpose=Purpose.PARAMETERS) == Topic(topic="C")


async def test_gatekeeper_answer_and_classification_scripts() -> None:
    from toolwire.orchestrator.activation import classification_schema

    model = ScriptedModel().on_gatekeeper(False).on_answer("composed")
    model.on_classify(lambda text, allowed: allowed[-1], ["w"])
    context = [PromptAndContext(prompt="p", context="c", tool_name="t", task_no="1")]

    verdict = await model.judge_context("q", context)
    classified = await model.extract(
        classification_schema(("a", "b")), "q", purpose=Purpose.CLASSIFICATION
    )

    assert verdict.sufficient is False
    assert await model.answer("q", context) == "composed"
    assert classified.model_dump() == {"prompt_type": "b", "important_words": ["w"]}
    assert model.purposes == [Purpose.GATEKEEPER, Purpose.CLASSIFICATION, Purpose.ANSWER]


async def test_every_scripted_call_is_recorded_for_usage() -> None:
    model = ScriptedModel().on_answer("a")

    with collect_calls() as calls:
        await model.answer("q", [])
        with pytest.raises(UnscriptedCallError):
            await model.judge_context("q", [])

    assert [(call.purpose, call.ok) for call in calls] == [("answer", True), ("gatekeeper", False)]


def test_block_model_requests_switches_the_flag_and_restores_it() -> None:
    assert llm_package.ALLOW_MODEL_REQUESTS is True
    with block_model_requests():
        assert llm_package.ALLOW_MODEL_REQUESTS is False
        with pytest.raises(ModelRequestsBlockedError, match="real model request for 'answer'"):
            ensure_model_requests_allowed("answer")
    assert llm_package.ALLOW_MODEL_REQUESTS is True
    ensure_model_requests_allowed("answer")


def test_the_block_model_requests_fixture_blocks(block_model_requests: None) -> None:
    with pytest.raises(ModelRequestsBlockedError):
        ensure_model_requests_allowed("suitability")


# -- a plugin registered for one test only -------------------------------------------------


class Owls(OrchestratorActivatedTool[Topic]):
    name = "owls"

    def executable_instruction(self) -> str:
        return "Is the question about owls?"

    def execute_with_result(self, params: Topic, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(f"Owls hunt at night ({params.topic}).")


async def test_the_app_answers_through_the_orchestrator_with_a_test_plugin(
    toolwire_app_factory: AppFactory, scripted_model: ScriptedModel
) -> None:
    scripted_model.on_suitability(["owls"]).on_extract(Topic, {"topic": "hunting"}).on_answer()
    app = toolwire_app_factory(
        plugins=[plugin_of(DomainSpec(name="birds"), Owls)],
        config="default_domain: birds\nsessions:\n  store: memory\n",
        llm=scripted_model,
    )

    answer = await app.ask("when do owls hunt?")

    assert answer.kind == "answer"
    assert answer.domain == "birds"
    assert answer.text == "Owls hunt at night (hunting)."
    assert [(run.tool_name, run.reason) for run in answer.trace.tools] == [
        ("birds.owls", "suitability")
    ]
    assert answer.usage.llm_calls == 3


def test_a_test_plugin_does_not_leak_into_the_next_app(toolwire_app_factory: AppFactory) -> None:
    app = toolwire_app_factory(config="sessions:\n  store: memory\n")
    assert "birds" not in app.domains


class TestOwlsConform(ToolConformance):
    tool_class = Owls


class MisspeltOwls(OrchestratorActivatedTool[Topic]):
    def executable_instruction(self) -> str:
        return "Is the question about owls?"

    def execute_with_results(self, params: Topic, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context("Owls hunt at night.")


def failing_checks(tool_class: type) -> dict[str, str]:
    """The ToolConformance checks ``tool_class`` fails, each with its error."""

    class Check(ToolConformance):
        pass

    Check.tool_class = tool_class
    failed: dict[str, str] = {}
    for name in sorted(n for n in dir(Check) if n.startswith("test_")):
        try:
            getattr(Check(), name)()
        except Exception as error:
            failed[name] = str(error)
    return failed


def test_conformance_names_an_execute_method_the_tool_misspelt_in_one_check() -> None:
    """test_tool_class_is_valid said it too (registration checked it), so one problem failed
    two checks."""
    failed = failing_checks(MisspeltOwls)
    assert list(failed) == ["test_activated_tool_defines_execute_with_result"]
    assert failed["test_activated_tool_defines_execute_with_result"].startswith(
        "MisspeltOwls: it does not define execute_with_result(params, text) "
        "(did you mean 'execute_with_results'?)"
    )


class MisspeltReader(ContextConsumerTool[Topic], OrchestratorActivatedTool[Topic]):
    def executable_instruction(self) -> str:
        return "Is the question about owls?"

    def execute_with_prior_contxt(self, params, text, prior_context):  # type: ignore[no-untyped-def]
        return ToolExecutionResult.context("")


def test_conformance_names_a_misspelt_abstract_method_in_one_check() -> None:
    failed = failing_checks(MisspeltReader)
    assert list(failed) == ["test_tool_class_is_valid"]
    assert failed["test_tool_class_is_valid"].endswith(
        "it leaves abstract methods unimplemented: execute_with_prior_context "
        "(did you mean 'execute_with_prior_contxt'?)"
    )


class DelegatingOwls(OrchestratorActivatedTool[Topic]):
    """A test double whose execute method is set when it is built."""

    def __init__(self) -> None:
        self.execute_with_result = lambda params, text: ToolExecutionResult.context("Hoot.")

    def executable_instruction(self) -> str:
        return "Is the question about owls?"


class QuestionOnlyOwls(OrchestratorActivatedTool[Topic]):
    """A double for suitability tests only: it never runs."""

    def executable_instruction(self) -> str:
        return "Is the question about owls?"


def test_registry_of_takes_doubles_that_define_no_execute_method_in_their_class() -> None:
    """registry_of checks each class as registration does: it used to refuse them."""
    registry, _ = registry_of("birds", DelegatingOwls(), QuestionOnlyOwls())
    assert [r.qualified_name for r in registry] == [
        "birds.delegating_owls",
        "birds.question_only_owls",
    ]
    assert failing_checks(DelegatingOwls) == {}


def test_ask_embedded_model_fails_with_the_commands_error(tmp_path: Path) -> None:
    from toolwire.testing import ask_embedded_model

    with pytest.raises(AssertionError, match="unknown domain"):
        ask_embedded_model("hello?", domain="nowhere", plugins="pharma", cwd=tmp_path)


# -- the app factory is isolated from the working directory and the environment -------------


@pytest.mark.parametrize("named_by_environment", [False, True])
def test_the_app_factory_reads_no_config_from_the_cwd_or_environment(
    toolwire_app_factory: AppFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    named_by_environment: bool,
) -> None:
    from toolwire.sessions.memory import MemorySessionStore

    bogus = tmp_path / "config" / "toolwire.yaml"
    bogus.parent.mkdir()
    bogus.write_text("default_domain: nowhere\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    if named_by_environment:
        monkeypatch.setenv("TOOLWIRE_CONFIG", str(bogus))
    else:
        monkeypatch.delenv("TOOLWIRE_CONFIG", raising=False)

    app = toolwire_app_factory()

    assert app.config.default_domain is None
    assert isinstance(app.session_store, MemorySessionStore)
    assert not (tmp_path / ".toolwire").exists()


async def test_the_app_factory_keeps_conversations_in_memory_unless_a_store_is_named(
    toolwire_app_factory: AppFactory,
    scripted_model: ScriptedModel,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolwire.sessions.memory import MemorySessionStore
    from toolwire.sessions.sqlite import SQLiteSessionStore

    monkeypatch.chdir(tmp_path)
    scripted_model.on_suitability("owls").on_extract(Topic, {"topic": "night"}).on_answer()
    birds = plugin_of(DomainSpec(name="birds"), Owls)
    app = toolwire_app_factory(
        plugins=[birds], config="default_domain: birds\n", llm=scripted_model
    )

    assert (await app.ask("when do owls hunt?")).kind == "answer"
    assert isinstance(app.session_store, MemorySessionStore)
    assert not (tmp_path / ".toolwire").exists()

    stored = tmp_path / "kept" / "sessions.sqlite3"
    named = toolwire_app_factory(config=f"sessions:\n  store: sqlite\n  path: {stored}\n")
    assert isinstance(named.session_store, SQLiteSessionStore)


# -- name lists: a bare string is one name, a generator serves every call --------------------


async def test_a_bare_string_is_one_tool_name_not_its_letters() -> None:
    from toolwire.llm import Option

    model = ScriptedModel().on_suitability("lookup", times=1)
    model.on_suitability(lambda prompt, names: "l")
    model.on_choose("lookup")
    questions = _questions("demo.lookup", "demo.l")

    assert await model.suitability("x", questions) == {"demo.lookup": True, "demo.l": False}
    assert await model.suitability("x", questions) == {"demo.lookup": False, "demo.l": True}
    options = [Option(name=name, question=f"{name}?") for name in ("lookup", "l", "o")]
    assert await model.choose("x", options) == ["lookup"]


async def test_a_generator_of_names_answers_every_call_of_its_rule() -> None:
    from toolwire.llm import Option

    model = ScriptedModel().on_suitability(name for name in ["alpha"])
    chooser = ScriptedModel().on_choose(name for name in ["alpha"])
    questions = _questions("demo.alpha", "demo.beta")
    options = [Option(name=name, question=f"{name}?") for name in ("alpha", "beta")]

    for _ in range(2):
        assert await model.suitability("x", questions) == {"demo.alpha": True, "demo.beta": False}
        assert await chooser.choose("x", options) == ["alpha"]
