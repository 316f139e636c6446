"""``confirm: also`` (the default): the first chosen tool is confirmed with its own question,
each later one is asked whether the task also asks it as a separate request (the scripted model,
then the real chat model against the fake server)."""

from __future__ import annotations

import pytest

from orchestration_kit import EchoTool, confirmations, domain, selection_of
from toolwire.errors import ModelError
from toolwire.llm import OpenAIGateway, Purpose, SuitabilityQuestion, prompts
from toolwire.orchestrator import ConversationService
from toolwire.settings import LLMSettings
from toolwire.testing import ScriptedModel, conversation_for
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest


def asking(model: ScriptedModel, *tools: EchoTool) -> ConversationService:
    return conversation_for(domain(), *tools, model=model)  # the default: confirm also


# -- with the scripted model ------------------------------------------------------------------


async def test_a_second_chosen_tool_is_asked_besides_the_confirmed_first() -> None:
    tax, vat, other = EchoTool("income_tax", "tax"), EchoTool("vat", "vat"), EchoTool("other")
    model = ScriptedModel().on_choose(["income_tax", "vat"]).on_suitability(["income_tax", "vat"])
    model.on_answer()

    answer = await asking(model, tax, vat, other).ask("the tax on 70,000 and the VAT")

    assert model.purposes[:3] == [Purpose.CHOICE, Purpose.SUITABILITY, Purpose.SUITABILITY]
    assert confirmations(model) == [
        (["demo.income_tax"], None),
        (["demo.vat"], "demo.income_tax"),
    ]
    assert all(call.inputs["batched"] is False for call in model.calls_for(Purpose.SUITABILITY))
    selection = selection_of(answer)
    assert selection.activated == ["demo.income_tax", "demo.vat"]
    assert selection.besides == {"demo.vat": "demo.income_tax"}
    assert [selection.why(name) for name in ("demo.income_tax", "demo.vat")] == [
        "chosen and confirmed",
        "chosen, confirmed as a further request besides demo.income_tax",
    ]
    assert tax.texts and vat.texts and not other.texts


async def test_a_sibling_refused_as_a_further_request_does_not_run() -> None:
    rate, convert = EchoTool("exchange_rate", "rate"), EchoTool("convert", "converted")
    model = ScriptedModel().on_choose(["exchange_rate", "convert"])
    model.on_suitability(["exchange_rate"], times=1).on_suitability([]).on_answer()

    answer = await asking(model, rate, convert).ask("What is the euro's rate in yen?")

    selection = selection_of(answer)
    assert selection.answers == {"demo.exchange_rate": True, "demo.convert": False}
    assert selection.activated == ["demo.exchange_rate"]
    assert selection.why("demo.convert") == (
        "chosen, refused as a further request besides demo.exchange_rate"
    )
    assert answer.trace.selection_reasons["demo.convert"] == selection.why("demo.convert")
    assert "selection_reasons" in answer.trace.model_dump(mode="json")  # the web page reads it
    assert "reasons" not in selection.model_dump()  # derived: never stored with the session
    assert rate.texts and not convert.texts


async def test_every_tool_after_the_confirmed_one_is_asked_besides_it() -> None:
    one, two, three = EchoTool("one", "1"), EchoTool("two", "2"), EchoTool("three", "3")
    model = ScriptedModel().on_choose(["one", "two", "three"])
    model.on_suitability(["one"], times=1).on_suitability(["three"]).on_answer()

    answer = await asking(model, one, two, three).ask("q")

    assert confirmations(model) == [
        (["demo.one"], None),
        (["demo.two", "demo.three"], "demo.one"),  # one per call, side by side
    ]
    selection = selection_of(answer)
    assert selection.activated == ["demo.one", "demo.three"]
    assert selection.besides == {"demo.two": "demo.one", "demo.three": "demo.one"}


class AskedTool(EchoTool):
    """An echo tool with a question of its own words (its siblings are the tools sharing them)."""

    def __init__(self, name: str, question: str) -> None:
        super().__init__(name, name)
        self.question = question

    def description(self) -> str:
        return self.question

    def executable_instruction(self) -> str:
        return self.question


async def test_a_further_tool_unlike_the_confirmed_one_is_asked_its_own_question() -> None:
    income = AskedTool("income_tax", "Income tax on wages?")
    sales = AskedTool("sales_tax", "Sales tax on purchases?")
    hotel = AskedTool("hotel_search", "Hotel rooms in a city?")
    model = ScriptedModel().on_choose(["income_tax", "hotel_search", "sales_tax"])
    model.on_suitability(["income_tax", "hotel_search"]).on_answer()

    answer = await asking(model, income, sales, hotel).ask("Tax on 70,000 and a hotel in Rome")

    assert confirmations(model) == [
        (["demo.income_tax"], None),
        (["demo.sales_tax"], "demo.income_tax"),  # a sibling: is it a separate request?
        (["demo.hotel_search"], None),  # nothing like the handled tool: its own question
    ]
    selection = selection_of(answer)
    assert selection.activated == ["demo.income_tax", "demo.hotel_search"]
    assert selection.besides == {"demo.sales_tax": "demo.income_tax"}
    assert selection.why("demo.hotel_search") == "chosen and confirmed"
    assert selection.why("demo.sales_tax") == (
        "chosen, refused as a further request besides demo.income_tax"
    )
    assert income.texts and hotel.texts and not sales.texts


async def test_a_failing_own_question_of_an_unlike_further_tool_runs_it_unconfirmed() -> None:
    income = AskedTool("income_tax", "Income tax on wages?")
    sales = AskedTool("sales_tax", "Sales tax on purchases?")
    hotel = AskedTool("hotel_search", "Hotel rooms in a city?")
    model = ScriptedModel().on_choose(["income_tax", "sales_tax", "hotel_search"])
    model.on_suitability(["income_tax"], times=2)  # its own question, then sales tax besides it
    model.on_suitability(ModelError("suitability", "timeout")).on_answer()

    answer = await asking(model, income, sales, hotel).ask("Tax on 70,000 and a hotel in Rome")

    assert confirmations(model) == [
        (["demo.income_tax"], None),
        (["demo.sales_tax"], "demo.income_tax"),
        (["demo.hotel_search"], None),
    ]
    selection = selection_of(answer)
    assert selection.activated == ["demo.income_tax", "demo.hotel_search"]  # the choice stands
    assert selection.why("demo.sales_tax") == (
        "chosen, refused as a further request besides demo.income_tax"
    )
    assert selection.why("demo.hotel_search") == "chosen (not confirmed)"
    assert answer.failures[0].startswith("task 1: confirmation failed, the chosen tools run")
    assert income.texts and hotel.texts and not sales.texts


async def test_a_refused_first_choice_hands_the_own_question_to_the_next() -> None:
    one, two, three = EchoTool("one", "1"), EchoTool("two", "2"), EchoTool("three", "3")
    model = ScriptedModel().on_choose(["one", "two", "three"])
    model.on_suitability([], times=1).on_suitability(["two"], times=1).on_suitability(["three"])
    model.on_answer()

    answer = await asking(model, one, two, three).ask("q")

    assert confirmations(model) == [
        (["demo.one"], None),
        (["demo.two"], None),  # the first is refused: the next is asked on its own
        (["demo.three"], "demo.two"),
    ]
    selection = selection_of(answer)
    assert selection.activated == ["demo.two", "demo.three"]
    assert selection.why("demo.one") == "chosen, refused on its question"
    assert not one.texts and two.texts and three.texts


async def test_every_chosen_tool_refused_runs_none() -> None:
    one, two = EchoTool("one", "1"), EchoTool("two", "2")
    model = ScriptedModel().on_choose(["one", "two"]).on_suitability([]).on_answer("no tool")

    answer = await asking(model, one, two).ask("write me a poem")

    assert confirmations(model) == [(["demo.one"], None), (["demo.two"], None)]
    assert selection_of(answer).activated == []
    assert answer.trace.tools == [] and answer.failures == []


async def test_a_single_chosen_tool_is_asked_its_own_question_only() -> None:
    model = ScriptedModel().on_choose(["two"]).on_suitability(["two"]).on_answer()

    answer = await asking(model, EchoTool("one"), EchoTool("two", "2")).ask("q")

    assert confirmations(model) == [(["demo.two"], None)]
    assert selection_of(answer).besides == {}


async def test_a_failing_further_question_keeps_the_confirmed_and_the_unconfirmed_tool() -> None:
    one, two = EchoTool("one", "1"), EchoTool("two", "2")
    model = ScriptedModel().on_choose(["one", "two"]).on_suitability(["one"], times=1)
    model.on_suitability(ModelError("suitability", "timeout")).on_answer()

    answer = await asking(model, one, two).ask("q")

    selection = selection_of(answer)
    assert selection.activated == ["demo.one", "demo.two"]  # the model's choice stands
    assert selection.why("demo.two") == "chosen (not confirmed)"
    assert answer.failures == [
        "task 1: confirmation failed, the chosen tools run unconfirmed: model call for "
        "'suitability' failed: timeout (after 1 attempt(s))"
    ]
    assert one.texts and two.texts


async def test_a_failing_first_question_runs_every_chosen_tool_unconfirmed() -> None:
    one, two = EchoTool("one", "1"), EchoTool("two", "2")
    model = ScriptedModel().on_choose(["one", "two"])
    model.on_suitability(ModelError("suitability", "timeout")).on_answer()

    answer = await asking(model, one, two).ask("q")

    assert confirmations(model) == [(["demo.one"], None)]  # nothing more is asked
    assert selection_of(answer).activated == ["demo.one", "demo.two"]
    assert answer.failures[0].startswith("task 1: confirmation failed, the chosen tools run")
    assert one.texts and two.texts


async def test_the_scripted_model_refuses_a_handled_request_in_a_batched_call() -> None:
    question = SuitabilityQuestion(tool_name="demo.vat", question="VAT asked?")
    model = ScriptedModel().on_suitability(["vat"])

    with pytest.raises(ValueError, match="one per call"):  # as the chat model does
        await model.suitability("Tax?", [question], batched=True, handled=question)
    assert await model.suitability("Tax?", [question], handled=question) == {"demo.vat": True}


# -- the chat model's call ----------------------------------------------------------------------


async def test_the_chat_model_names_the_handled_request_before_the_question() -> None:
    def reply(request: FakeRequest) -> FakeReply:
        return FakeReply(text='{"answer": "no"}')

    handled = SuitabilityQuestion(tool_name="demo.income_tax", question="Income tax asked?")
    vat = SuitabilityQuestion(tool_name="demo.vat", question="VAT asked?")
    duty = SuitabilityQuestion(tool_name="demo.duty", question="Customs duty asked?")
    async with FakeOpenAIServer(reply) as server:
        gateway = OpenAIGateway(LLMSettings(base_url=server.base_url, model="f"), api_key="t")
        answers = await gateway.suitability("Tax on 70,000?", [vat, duty], handled=handled)
        with pytest.raises(ValueError, match="one per call"):
            await gateway.suitability("Tax?", [vat], batched=True, handled=handled)
        await gateway.aclose()

    assert answers == {"demo.vat": False, "demo.duty": False}
    endings = sorted(request.messages[-1]["content"] for request in server.chat_requests)
    assert len(endings) == 2  # one call per question, each naming the handled request
    for content, question in zip(endings, ("Customs duty asked?", "VAT asked?"), strict=True):
        assert content.startswith("<task>Tax on 70,000?</task>")
        assert prompts.ALSO_SUITABILITY in content
        assert content.endswith(f"Already handled: Income tax asked?\nQuestion: {question}")
