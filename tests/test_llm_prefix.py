"""One byte-stable prefix per question (SPEC §5, issue 10 item 3), on the exact requests sent.

* Between questions: two calls of one purpose with different input send byte-identical prompts
  up to the point where the question's own text starts, and the same request parameters.
* Within a question: every call starts with the same fixed rules and the task; the gatekeeper
  and the answer share the whole retrieved context; two tools' parameter extractions share
  everything but their tool's part. Only the purpose's instruction and output format differ, at
  the end.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from html import escape

import pytest
from pydantic import BaseModel, Field

from orchestration_kit import QueryTool
from toolwire.context_buffer import PromptAndContext
from toolwire.llm import (
    OpenAIGateway,
    Option,
    Purpose,
    SuitabilityQuestion,
    collect_calls,
    domain_prompt,
    prompts,
)
from toolwire.llm.base import RetrievalPlace, retrieval_place
from toolwire.llm.chat_model import PROMPT_ALLOWANCE_TOKENS
from toolwire.llm.compression import ContextCompressor
from toolwire.llm.profiles import ModelProfile
from toolwire.registry import DomainSpec
from toolwire.search.pages import Page, render_pages
from toolwire.search.relevance import relevant_pages
from toolwire.settings import LLMSettings
from toolwire.testing import conversation_for
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest, prompt_text

QUESTIONS = [
    SuitabilityQuestion(tool_name="pharma.drug_info", question="Is the task about a drug?"),
    SuitabilityQuestion(tool_name="pharma.interactions", question="Two medicines together?"),
    SuitabilityQuestion(tool_name="weather.forecast", question="Is it about the weather?"),
]


OPTIONS = [
    Option(name="pharma-drug_info", question="Is the task about a drug?", description="Drugs."),
    Option(name="weather-forecast", question="Is it about the weather?"),
]


class Topic(BaseModel):
    """What the message is about."""

    topic: str


class DrugPair(BaseModel):
    drug_a: str = Field(description="The first drug")
    drug_b: str


class City(BaseModel):
    city: str | None = None


Call = Callable[[OpenAIGateway, str], Awaitable[object]]


def context(variant: str) -> PromptAndContext:
    return PromptAndContext(
        prompt=variant, context=f"{variant} " * 60, tool_name=f"{variant}.tool", task_no="1"
    )


async def _extract(gateway: OpenAIGateway, variant: str, purpose: Purpose) -> object:
    return await gateway.extract(Topic, variant, instruction="Name the topic.", purpose=purpose)


async def _relevance(gateway: OpenAIGateway, variant: str) -> object:
    page = Page(doc_id=f"{variant}-doc", page_no=1, title=variant, text=variant)
    return await relevant_pages(gateway, variant, [page])


CASES: dict[str, tuple[Call, str]] = {
    # name: (one call with a variant as its dynamic input, the purpose whose requests to compare)
    "classification": (lambda g, v: _extract(g, v, Purpose.CLASSIFICATION), "classification"),
    "parameters": (lambda g, v: _extract(g, v, Purpose.PARAMETERS), "parameters"),
    "decomposition": (lambda g, v: _extract(g, v, Purpose.DECOMPOSITION), "decomposition"),
    "suitability": (lambda g, v: g.suitability(v, QUESTIONS[:1]), "suitability"),
    "choice": (lambda g, v: g.choose(v, OPTIONS), "choice"),
    "routing": (
        lambda g, v: g.choose(v, OPTIONS, purpose=Purpose.ROUTING, several=False),
        "routing",
    ),
    "relevance": (_relevance, "relevance"),
    "gatekeeper": (lambda g, v: g.judge_context(v, [context(v)]), "gatekeeper"),
    "answer": (lambda g, v: g.answer(v, [context(v)]), "answer"),
    "compression": (lambda g, v: g.answer(v, [context(v), context(v + "-2")]), "compression"),
}


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as fake:
        yield fake


WINDOW = 8192


def gateway_for(
    server: FakeOpenAIServer, compress_above: int = 180, *, worked_examples: bool = True
) -> OpenAIGateway:
    """``compress_above`` 180 tokens: two contexts of ~400 characters are compressed (in one
    call: the window is a real one)."""
    settings = LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0)
    profile = ModelProfile(
        structured_output="json_schema",
        context_window_tokens=WINDOW,
        worked_examples=worked_examples,
    )
    gateway = OpenAIGateway(settings, profile=profile, api_key="k", concurrency=1)
    gateway.compressor = ContextCompressor(
        gateway,
        window_tokens=WINDOW,
        threshold=compress_above / WINDOW,
        reserved_tokens=profile.completion_limits.compression + PROMPT_ALLOWANCE_TOKENS,
    )
    return gateway


def assert_stable_up_to_the_tail(one: FakeRequest, two: FakeRequest, first_variant: str) -> None:
    first, second = prompt_text(one.body), prompt_text(two.body)
    tail_starts = first.index(first_variant)
    shared = prompts.shared_prefix_length(first, second)
    around = slice(max(shared - 60, 0), shared + 40)
    assert shared >= tail_starts, (
        f"the prompts differ at {shared}, before the dynamic tail at {tail_starts}:\n"
        f"{first[around]!r}\n{second[around]!r}"
    )
    assert second.index("QUESTION-TWO") >= tail_starts
    parameters = {key: value for key, value in one.body.items() if key != "messages"}
    assert parameters == {key: value for key, value in two.body.items() if key != "messages"}
    assert one.messages[:-1] == two.messages[:-1]


@pytest.mark.parametrize("case", sorted(CASES))
async def test_two_questions_share_the_prefix_up_to_the_dynamic_tail(
    server: FakeOpenAIServer, case: str
) -> None:
    call, purpose = CASES[case]
    gateway = gateway_for(server)
    with collect_calls() as calls:
        await call(gateway, "QUESTION-ONE")
        await call(gateway, "QUESTION-TWO")
    await gateway.aclose()

    sent = [r for r, c in zip(server.chat_requests, calls, strict=True) if c.purpose == purpose]
    assert len(sent) == 2, [c.purpose for c in calls]
    assert_stable_up_to_the_tail(sent[0], sent[1], "QUESTION-ONE")


async def test_per_tool_suitability_keeps_one_prefix_and_a_stable_order(
    server: FakeOpenAIServer,
) -> None:
    gateway = gateway_for(server)
    await gateway.suitability("QUESTION-ONE", QUESTIONS)
    await gateway.suitability("QUESTION-TWO", QUESTIONS)
    await gateway.aclose()

    requests = server.chat_requests
    assert len(requests) == 6
    first_round, second_round = requests[:3], requests[3:]
    assert [r.messages[1]["content"].rsplit("Question: ", 1)[1] for r in first_round] == [
        q.question for q in QUESTIONS
    ]
    for one, two in zip(first_round, second_round, strict=True):
        assert_stable_up_to_the_tail(one, two, "QUESTION-ONE")


# -- within a question ------------------------------------------------------------------------

TASK = "Can I take ibuprofen together with warfarin in Szeged?"


def user_text(request: FakeRequest) -> str:
    content: str = request.messages[-1]["content"]
    return content


PAGES = [
    Page(doc_id="leaflet", page_no=n, title="Leaflet", text=f"Page {n}: warfarin " * 20)
    for n in (1, 2, 3)
]
"""The search tool's candidates; the model keeps the first and the third (:func:`keep_odd`)."""


def keep_odd(request: FakeRequest) -> FakeReply:
    """Relevance verdicts: the pages numbered 1 and 3 are relevant, the page 2 is not."""
    if "page_1" not in (request.output_schema or {}).get("properties", {}):
        return FakeReply()
    return FakeReply(text=json.dumps({"page_1": True, "page_2": False, "page_3": True}))


SEARCH = "leaflet.search"


async def one_question(gateway: OpenAIGateway) -> list[PromptAndContext]:
    """The calls of a question in the orchestrator's order, on one task: the search tool's
    relevance check of three pages comes between the parameters and the gatekeeper, where the
    orchestrator has opened the place of the tool's context (after an earlier tool's)."""
    earlier = context("warfarin")
    topic, drugs = "Name the topic.", "Name both drugs."
    await gateway.extract(Topic, TASK, instruction=topic, purpose=Purpose.CLASSIFICATION)
    await gateway.choose(TASK, OPTIONS)
    await gateway.extract(DrugPair, TASK, instruction=drugs, purpose=Purpose.PARAMETERS)
    await gateway.extract(City, TASK, purpose=Purpose.PARAMETERS)
    with retrieval_place(RetrievalPlace(TASK, (earlier,), SEARCH, "1")):
        kept = await relevant_pages(gateway, TASK, PAGES)
    found = PromptAndContext(prompt=TASK, context=render_pages(kept), tool_name=SEARCH, task_no="1")
    contexts = [earlier, found]
    await gateway.judge_context(TASK, contexts)
    await gateway.answer(TASK, contexts)
    return kept


PURPOSES_OF_ONE_QUESTION = [
    "classification", "choice", "parameters", "parameters", "relevance", "gatekeeper",
    "answer",
]  # fmt: skip


async def test_every_call_of_a_question_shares_the_rules_and_the_context_calls_share_it_all() -> (
    None
):
    async with FakeOpenAIServer(keep_odd) as server:
        gateway = gateway_for(server, compress_above=int(0.9 * WINDOW))
        with domain_prompt("Medicines:  interactions\n and dosage."), collect_calls() as calls:
            kept = await one_question(gateway)
        await gateway.aclose()

    assert kept == [PAGES[0], PAGES[2]]
    requests = server.chat_requests
    assert [c.purpose for c in calls] == PURPOSES_OF_ONE_QUESTION
    systems = {r.messages[0]["content"] for r in requests}
    assert systems == {f"{prompts.RULES}\n\nDomain: Medicines: interactions and dosage."}
    task = prompts.task_block(TASK)
    texts = [user_text(r) for r in requests]
    # the classification's fixed part (instruction and output format) comes before the task, so
    # that the server's prompt cache keeps it from one question to the next
    for text, call in zip(texts, calls, strict=True):
        instruction = prompts.INSTRUCTIONS[Purpose(call.purpose)]
        if call.purpose == "relevance":
            instruction = prompts.BATCH_RELEVANCE
        if call.purpose == "classification":
            assert text.startswith(instruction)
            assert text.index("Reply with one JSON") < text.index(task)
        else:  # the others: the task first, the purpose's instruction after it
            assert text.startswith(task + "\n\n") and text.index(instruction) > text.index(task)
    # the two parameter calls differ only in the tool's part
    one, two = texts[2:4]
    common = f"{task}\n\n{prompts.INSTRUCTIONS[Purpose.PARAMETERS]}\n"
    assert prompts.shared_prefix_length(one, two) == len(common)
    assert one[len(common) :].startswith("Name both drugs.\nReply with one JSON object")
    # one relevance call reads the three pages after the earlier tool's context, where the
    # search tool's context will stand, and names the pages it judges last
    check = texts[4]
    pages = [escape(page.render(), quote=False) for page in PAGES]
    labels = ", ".join(page.ref.label for page in PAGES)
    assert check.endswith(f"The pages to judge: {labels}\nTask: {task}")
    assert check.index(context("warfarin").context) < check.index(pages[0])
    assert f"{pages[0]}\n\n{pages[1]}\n\n{pages[2]}</external_content>" in check
    # the gatekeeper reads everything the check read up to the refused page 2, where it
    # diverges (in the page header), and the answer shares the gatekeeper's whole context
    gatekeeper, answer = texts[5:7]
    assert f"{pages[0]}\n\n{pages[2]}</external_content>" in gatekeeper
    refused = check.index(pages[1])
    diverge = prompts.shared_prefix_length(check, gatekeeper)
    assert refused <= diverge < refused + len("[page leaflet#2]")
    context_end = gatekeeper.index("</external_content>\n\n", gatekeeper.rindex(SEARCH))
    assert prompts.shared_prefix_length(gatekeeper, answer) > context_end
    # the records say how much of each call's messages the previous call had sent already
    assert calls[0].shared_prefix_chars == 0
    classification = prompts.canonical(requests[0].messages)
    system = len(classification.split(prompts.INSTRUCTIONS[Purpose.CLASSIFICATION])[0])
    assert all(c.shared_prefix_chars >= system for c in calls[1:])
    # the answer shares the gatekeeper's messages up to the end of the retrieved context
    assert calls[6].shared_prefix_chars > prompts.canonical(requests[6].messages).rindex(
        "</external"
    )


async def test_the_schema_stays_out_of_the_messages_in_json_schema_mode(
    server: FakeOpenAIServer,
) -> None:
    """A JSON schema sent as ``response_format`` (a grammar on llama.cpp) leaves the messages
    alone, so purposes with different schemas still share the prefix; the model reads the
    fields in the output format line at the end."""
    gateway = gateway_for(server)
    await gateway.extract(DrugPair, TASK, purpose=Purpose.PARAMETERS)
    await gateway.aclose()
    (request,) = server.chat_requests
    assert "tools" not in request.body
    assert request.body["response_format"]["json_schema"]["schema"] == DrugPair.model_json_schema()
    assert user_text(request).endswith(
        'Reply with one JSON object with these fields:\n- "drug_a" (string): The first drug\n'
        '- "drug_b" (string)'
    )


async def test_the_orchestrator_puts_the_domains_text_in_every_calls_prefix() -> None:
    """Suitability, parameters and the answer of one question all start with the same system
    message: the rules and the domain's description (no classification: without a deep
    fallback the prompt type changes nothing)."""

    def reply(request: FakeRequest) -> FakeReply:
        schema = request.output_schema or {}
        fields = schema.get("properties", {})
        if "prompt_type" in fields:
            return FakeReply(text='{"prompt_type": "lookup", "important_words": []}')
        if "choice" in fields:  # every candidate fits
            return FakeReply(text=json.dumps({"choice": fields["choice"]["items"]["enum"]}))
        if "answer" in fields:
            return FakeReply(text='{"answer": "yes"}')
        return FakeReply(text='{"query": "widgets"}' if schema else "Widgets are in aisle 3.")

    spec = DomainSpec(name="demo", description="A shop's stock.", prompt_types=["lookup", "other"])
    async with FakeOpenAIServer(reply) as server:
        gateway = gateway_for(server, compress_above=int(0.9 * WINDOW))
        service = conversation_for(spec, QueryTool("finder"), model=gateway)
        answer = await service.ask("Where are the widgets?")
        await gateway.aclose()

    assert [call.purpose for call in answer.model_calls] == ["suitability", "parameters", "answer"]
    domain_system = f"{prompts.RULES}\n\nDomain: A shop's stock."
    systems = [request.messages[0]["content"] for request in server.chat_requests]
    # the lone candidate's yes/no call ends its system message with the worked examples
    assert systems == [
        f"{domain_system}\n\n{prompts.SUITABILITY_EXAMPLES}",
        domain_system,
        domain_system,
    ]
    assert all(call.shared_prefix_chars > len(domain_system) for call in answer.model_calls[1:])


@pytest.mark.parametrize("examples", [True, False])
async def test_the_yes_no_calls_of_a_selection_end_the_system_message_with_worked_examples(
    server: FakeOpenAIServer, examples: bool
) -> None:
    """A tool's own question carries the fixed examples after the rules and the domain's text
    (the other calls do not); a profile with ``worked_examples: false`` leaves them out. Fixed
    text: two questions send the same system message."""
    gateway = gateway_for(server, worked_examples=examples)
    with domain_prompt("Medicines."):
        for task in ("QUESTION-ONE", "QUESTION-TWO"):
            await gateway.choose(task, OPTIONS)
            await gateway.suitability(task, QUESTIONS[:1])
            await gateway.extract(Topic, task, purpose=Purpose.PARAMETERS)
    await gateway.aclose()

    domain_system = f"{prompts.RULES}\n\nDomain: Medicines."
    with_examples = f"{domain_system}\n\n{prompts.SUITABILITY_EXAMPLES}"
    yes_no = with_examples if examples else domain_system
    systems = [request.messages[0]["content"] for request in server.chat_requests]
    assert systems == [domain_system, yes_no, domain_system] * 2
