"""Tool selection (SPEC §3 step 5): the tool index, and every branch of retrieve → choose →
confirm with the scripted model, plus the ``batched`` and ``per_tool`` modes."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from orchestration_kit import EchoTool, domain, selection_of
from toolwire import OrchestratorActivatedTool, ToolExecutionResult
from toolwire.errors import ModelError
from toolwire.llm import Purpose
from toolwire.selection.selectable import SelectableTool, tool_index
from toolwire.settings import OrchestratorSettings, SelectionSettings
from toolwire.testing import ScriptedModel, conversation_for


class Area(BaseModel):
    base: float = Field(description="length of the triangle's base")
    height: float = Field(description="height over that base")


class TriangleArea(OrchestratorActivatedTool[Area]):
    """Computes the area of a triangle from its base and height."""

    examples = ("How big is a triangle 3 cm wide and 4 cm tall?",)

    def executable_instruction(self) -> str:
        return "Does the message ask for the area of a triangle?"

    def execute_with_result(self, params: Area, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(f"area {params.base * params.height / 2}")


class Raising(EchoTool):
    def executable_instruction(self) -> str:
        raise RuntimeError("question service down")


def entry(tool: Any) -> SelectableTool:
    tool.domain = tool.domain or "demo"
    return SelectableTool.of(tool.qualified_name, tool, tool.examples)


def selecting(model: ScriptedModel, *tools: Any, top_k: int = 8, **selection: Any) -> Any:
    settings = OrchestratorSettings(selection=SelectionSettings(top_k=top_k, **selection))
    return conversation_for(domain(), *tools, model=model, settings=settings)


# -- the tool index ---------------------------------------------------------------------------


def test_a_tool_is_indexed_by_name_description_question_parameters_and_examples() -> None:
    index = tool_index([entry(TriangleArea()), entry(EchoTool("weather"))])

    for query in ("triangle", "computes", "height", "cm wide", "areas of triangles"):
        assert [hit.key for hit in index.search(query, limit=5)] == ["demo.triangle_area"], query
    assert [hit.key for hit in index.search("weather", limit=5)] == ["demo.weather"]
    assert index.search("poem about autumn", limit=5) == []


def test_the_name_counts_more_than_the_parameters() -> None:
    class Named(EchoTool):
        """Looks things up."""

    class Described(EchoTool):
        """Looks up a stock."""

    named, described = Named("stock_quote"), Described("lookup")
    hits = tool_index([entry(described), entry(named)]).search("stock", limit=5)
    assert [hit.key for hit in hits] == ["demo.stock_quote", "demo.lookup"]
    assert hits[0].score > hits[1].score > 0


def test_a_tools_description_is_its_own_docstrings_first_paragraph() -> None:
    class Documented(EchoTool):
        """Converts money
        between currencies.

        Uses the daily rates."""

    class Undocumented(EchoTool):
        pass

    assert Documented("x").description() == "Converts money between currencies."
    assert Undocumented("y").description() == ""  # never a base class's docstring


# -- choose mode ------------------------------------------------------------------------------


async def test_the_model_chooses_among_candidates_and_each_chosen_tool_is_confirmed() -> None:
    one, two, three = EchoTool("one", "1"), EchoTool("two", "2"), EchoTool("three", "3")
    model = ScriptedModel().on_choose(["two", "one"]).on_suitability(["one", "two"]).on_answer()

    answer = await selecting(model, one, two, three).ask("q")

    assert model.purposes[:3] == [Purpose.CHOICE, Purpose.SUITABILITY, Purpose.SUITABILITY]
    [choice] = model.calls_for(Purpose.CHOICE)
    assert choice.inputs["options"] == ["one", "two", "three"]  # short names, registry order
    confirmations = model.calls_for(Purpose.SUITABILITY)  # one question a call, in order named
    assert [call.inputs["tool_names"] for call in confirmations] == [["demo.two"], ["demo.one"]]
    selection = selection_of(answer)
    assert [step.step for step in selection.steps] == ["retrieve", "choose", "confirm"]
    assert selection.activated == ["demo.two", "demo.one"]
    assert [tool.tool_name for tool in answer.trace.tools] == ["demo.one", "demo.two"]
    assert [selection.why(name) for name in ("demo.one", "demo.three")] == [
        "named by the choice; confirmed on its question",
        "not chosen among the candidates",
    ]
    assert selection.describe() == "retrieve (3 candidate(s), all) → choose → confirm"
    assert three.texts == []


async def test_a_chosen_tool_refused_by_its_own_question_does_not_run() -> None:
    one, two = EchoTool("one", "1"), EchoTool("two", "2")
    model = ScriptedModel().on_choose(["one"]).on_suitability([]).on_answer("no tool")

    answer = await selecting(model, one, two).ask("write me a poem")

    [confirmation] = model.calls_for(Purpose.SUITABILITY)
    assert confirmation.inputs["tool_names"] == ["demo.one"]
    selection = selection_of(answer)
    assert (selection.answers, selection.activated) == ({"demo.one": False}, [])
    assert selection.why("demo.one") == "named by the choice; refused on its question"
    assert answer.trace.tools == [] and one.texts == []
    assert answer.failures == []


async def test_when_the_model_chooses_nothing_no_confirmation_is_asked() -> None:
    model = ScriptedModel().on_choose([]).on_answer("no tool")

    answer = await selecting(model, EchoTool("one"), EchoTool("two")).ask("hello")

    assert model.purposes == [Purpose.CHOICE, Purpose.ANSWER]
    assert selection_of(answer).step("choose").note == "none named"


async def test_names_outside_the_candidates_are_ignored_and_shown() -> None:
    one = EchoTool("one", "1")
    model = ScriptedModel().on_choose(["nope", "one", "one"]).on_suitability(["one"]).on_answer()

    answer = await selecting(model, one, EchoTool("two")).ask("q")

    selection = selection_of(answer)
    assert selection.ignored == ["nope"]
    assert selection.activated == ["demo.one"]
    assert one.texts == ["q"]


async def test_without_a_confirmation_step_the_choice_decides() -> None:
    model = ScriptedModel().on_choose(["two"]).on_answer()
    tools = (EchoTool("one"), EchoTool("two", "2"))

    answer = await selecting(model, *tools, steps=["retrieve", "choose"]).ask("q")

    assert model.purposes == [Purpose.CHOICE, Purpose.ANSWER]
    assert selection_of(answer).activated == ["demo.two"]
    assert selection_of(answer).why("demo.two") == "named by the choice"


async def test_a_confirmation_without_a_choice_asks_every_candidate() -> None:
    model = ScriptedModel().on_suitability(["two"]).on_answer()
    tools = (EchoTool("one"), EchoTool("two", "2"), EchoTool("three"))

    answer = await selecting(model, *tools, steps=["retrieve", "confirm"]).ask("q")

    asked = [call.inputs["tool_names"] for call in model.calls_for(Purpose.SUITABILITY)]
    assert asked == [["demo.one"], ["demo.two"], ["demo.three"]]
    assert selection_of(answer).activated == ["demo.two"]
    assert selection_of(answer).why("demo.one") == "refused on its question"


async def test_a_single_candidate_needs_no_choice_only_its_question() -> None:
    model = ScriptedModel().on_suitability(["only"]).on_answer()

    answer = await selecting(model, EchoTool("only", "x")).ask("q")

    assert model.purposes == [Purpose.SUITABILITY, Purpose.ANSWER]
    assert selection_of(answer).activated == ["demo.only"]
    assert selection_of(answer).why("demo.only") == "the only candidate; confirmed on its question"


async def test_retrieval_narrows_a_large_domain_to_the_top_k_best_matches() -> None:
    tools = [EchoTool(f"area_filler_{n}") for n in range(10)]
    triangle = TriangleArea()
    model = (
        ScriptedModel().on_suitability(["triangle_area"]).on_extract(Area, {"base": 3, "height": 4})
    )
    model.on_answer()

    answer = await selecting(model, *tools, triangle, top_k=3).ask(
        "What is the area of a triangle with base 3 and height 4?"
    )

    selection = selection_of(answer)
    assert selection.retrieved is True
    assert selection.candidates[0].tool_name == "demo.triangle_area"
    assert len(selection.candidates) == 3
    assert selection.candidates[0].score > selection.candidates[1].score
    [choice] = model.calls_for(Purpose.CHOICE)
    assert choice.inputs["options"][0] == "triangle_area"
    assert "area 6.0" in answer.text


class ExchangeRate(EchoTool):
    """Looks up the exchange rate between two currencies."""

    def executable_instruction(self) -> str:
        return "Does the message ask for the exchange rate between two currencies?"


class CurrencyConversion(EchoTool):
    """Converts an amount of money from one currency into another."""

    def executable_instruction(self) -> str:
        return "Does the message ask to convert an amount of money into another currency?"


async def test_the_best_matchs_closest_siblings_follow_the_matches() -> None:
    """The message shares words with the rate tool only; the conversion tool, its sibling, is
    put to the model too, after the matches."""
    fillers = [EchoTool(f"filler_{n}") for n in range(6)]
    rate, conversion = ExchangeRate("exchange_rate"), CurrencyConversion("currency_conversion")
    model = (
        ScriptedModel().on_choose(["currency_conversion"]).on_suitability(["currency_conversion"])
    )
    model.on_answer()

    answer = await selecting(model, *fillers, rate, conversion, top_k=3).ask(
        "What are my 50,000 yen in Swiss francs at the exchange rate?"
    )

    selection = selection_of(answer)
    assert selection.retrieved is True
    names = [candidate.tool_name for candidate in selection.candidates]
    assert names == ["demo.exchange_rate", "demo.currency_conversion"]
    assert [candidate.score > 0 for candidate in selection.candidates] == [True, False]
    assert selection.activated == ["demo.currency_conversion"]


async def test_siblings_that_matched_keep_their_rank_and_never_pass_top_k() -> None:
    fillers = [EchoTool(f"filler_{n}") for n in range(6)]
    rate, conversion = ExchangeRate("exchange_rate"), CurrencyConversion("currency_conversion")
    model = ScriptedModel().on_choose([]).on_suitability([]).on_answer("none of them")
    tools = (*fillers, rate, conversion)

    both = await selecting(model, *tools, top_k=3).ask("convert currency at the exchange rate")
    full = await selecting(model, *tools, top_k=1).ask("What are my yen at the exchange rate?")

    names = [candidate.tool_name for candidate in selection_of(both).candidates]
    assert sorted(names) == ["demo.currency_conversion", "demo.exchange_rate"]  # each once
    assert all(candidate.score > 0 for candidate in selection_of(both).candidates)
    assert [c.tool_name for c in selection_of(full).candidates] == ["demo.exchange_rate"]


async def test_a_small_domain_puts_its_matches_first() -> None:
    one, two, triangle = EchoTool("one", "1"), EchoTool("two", "2"), TriangleArea()
    model = ScriptedModel().on_choose([]).on_answer("none of them")

    answer = await selecting(model, one, two, triangle).ask("a triangle, please")

    [choice] = model.calls_for(Purpose.CHOICE)
    assert choice.inputs["options"] == ["triangle_area", "one", "two"]
    assert selection_of(answer).retrieved is False  # every tool of the domain is a candidate


async def test_nothing_retrieved_means_no_model_call_and_no_tool() -> None:
    tools = [EchoTool(f"filler_{n}") for n in range(10)]
    model = ScriptedModel().on_answer("nothing to do")

    answer = await selecting(model, *tools, top_k=3).ask("write a poem about autumn")

    assert model.purposes == [Purpose.ANSWER]
    selection = selection_of(answer)
    assert (selection.candidates, selection.activated) == ([], [])


async def test_a_failing_choice_is_a_recorded_failure_and_no_tool_runs() -> None:
    one = EchoTool("one", "1")
    model = ScriptedModel().on_choose(ModelError("choice", "timeout")).on_answer("composed")

    answer = await selecting(model, one, EchoTool("two")).ask("q")

    assert len(model.calls_for(Purpose.CHOICE)) == 1  # orchestrator.model_attempts
    assert answer.failures == [
        "task 1: choose: the choice failed, no tool chosen by it: model call for 'choice' "
        "failed: timeout (after 1 attempt(s))"
    ]
    assert selection_of(answer).step("choose").failure is not None
    assert one.texts == [] and answer.text.startswith("composed")


async def test_a_failing_confirmation_keeps_the_models_choice() -> None:
    one = EchoTool("one", "1")
    model = ScriptedModel().on_choose(["one"]).on_suitability(ModelError("suitability", "down"))
    model.on_answer()

    answer = await selecting(model, one, EchoTool("two")).ask("q")

    assert one.texts == ["q"]
    assert answer.failures == [
        "task 1: confirm: a confirmation failed: model call for 'suitability' failed: down "
        "(after 1 attempt(s)); the chosen tools run unconfirmed"
    ]


async def test_a_single_candidate_whose_question_fails_does_not_run() -> None:
    only = EchoTool("only", "x")
    model = ScriptedModel().on_suitability(ModelError("suitability", "down")).on_answer("a")

    answer = await selecting(model, only).ask("q")

    assert only.texts == []
    assert answer.failures[0].startswith("task 1: confirm: a confirmation failed")


async def test_a_tool_whose_question_raises_is_left_out_and_reported_on_every_task() -> None:
    kept = EchoTool("kept", "k")
    model = ScriptedModel().on_suitability(["kept", "broken"]).on_answer()

    service = selecting(model, Raising("broken"), kept)
    answer = await service.ask("q")

    assert kept.texts == ["q"]
    assert answer.failures == [
        "task 1: tool demo.broken left out of selection: RuntimeError: question service down"
    ]
    assert selection_of(answer).left_out == {"demo.broken": "RuntimeError: question service down"}
    assert (await service.ask("again")).failures == answer.failures


class Answering(EchoTool):
    """A tool whose question or description is not text."""

    def __init__(
        self, name: str, question: object = "Does it fit?", description: object = ""
    ) -> None:
        super().__init__(name)
        self._question, self._description = question, description

    def executable_instruction(self) -> str:
        return self._question  # type: ignore[return-value]

    def description(self) -> str:
        return self._description  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("tool", "problem"),
    [
        (
            Answering("broken", question=None),
            "executable_instruction() returned NoneType, not a str",
        ),
        (Answering("broken", question="  "), "executable_instruction() returned an empty question"),
        (Answering("broken", description=3), "description() returned int, not a str"),
    ],
    ids=["question-none", "question-blank", "description-int"],
)
async def test_a_tool_whose_question_is_not_text_is_left_out_and_the_domain_works(
    tool: EchoTool, problem: str
) -> None:
    kept = EchoTool("kept", "k")
    model = ScriptedModel().on_suitability(["kept"]).on_answer()

    answer = await selecting(model, tool, kept).ask("q")

    assert kept.texts == ["q"] and tool.texts == []
    assert answer.failures == [
        f"task 1: tool demo.broken left out of selection: TypeError: {problem}"
    ]


async def test_required_tools_skip_selection_entirely() -> None:
    from orchestration_kit import Coordinator, subtask

    def split(task: Any) -> None:
        task.sub_tasks = [subtask("1.1", "fetch", "one")]

    one = EchoTool("one", "1")
    model = ScriptedModel().on_choose([]).on_answer()
    service = selecting(model, Coordinator("splitter", split), one, EchoTool("two"))

    answer = await service.ask("q")

    assert answer.trace.sub_tasks[0].selection is None
    assert [call.inputs["task_prompt"] for call in model.calls_for(Purpose.CHOICE)] == ["q"]
    assert one.texts != []


class OnlyOnDesignatedTasks(EchoTool):
    """A tool a coordinator designates; no flag set, only the seed's always-false question."""

    def executable_instruction(self) -> str:
        from toolwire.tools import coordinator_only_instruction

        return coordinator_only_instruction(self.name)


async def test_seed_6_4_the_always_false_question_alone_keeps_a_tool_off_selection() -> None:
    """Seed 6.4: a tool whose question always answers no runs only on coordinator-designated
    tasks, also with no confirmation step (the choice alone decides)."""
    designated, other = OnlyOnDesignatedTasks("designated", "d"), EchoTool("other", "o")
    model = ScriptedModel().on_choose(["designated", "other"]).on_answer()

    answer = await selecting(model, designated, other, steps=["retrieve", "choose"]).ask("q")

    selection = selection_of(answer)
    assert [candidate.tool_name for candidate in selection.candidates] == ["demo.other"]
    assert selection.activated == ["demo.other"]
    assert designated.texts == [] and other.texts == ["q"]


async def test_a_confirmation_failing_after_a_refusal_keeps_the_refusal() -> None:
    """Moved from the removed ``confirm: also`` tests: a refused tool stays refused when a later
    tool's question fails; the tools not answered run unconfirmed, as the model chose them."""
    one, two, three = EchoTool("one", "1"), EchoTool("two", "2"), EchoTool("three", "3")
    model = ScriptedModel().on_choose(["one", "two", "three"]).on_suitability([], times=1)
    model.on_suitability(ModelError("suitability", "timeout")).on_answer()

    answer = await selecting(model, one, two, three).ask("q")

    asked = [call.inputs["tool_names"] for call in model.calls_for(Purpose.SUITABILITY)]
    assert asked == [["demo.one"], ["demo.two"]]  # nothing asked after the failure
    selection = selection_of(answer)
    assert selection.answers == {"demo.one": False}
    assert selection.activated == ["demo.two", "demo.three"]
    assert selection.why("demo.one") == "named by the choice; refused on its question"
    assert answer.failures[0].startswith("task 1: confirm: a confirmation failed")
    assert not one.texts and two.texts and three.texts
