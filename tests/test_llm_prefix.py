"""The byte-stable prefix (SPEC §5), checked for every purpose on the exact requests sent.

Two calls of one purpose with different dynamic input (question, task, text, contexts) must send
byte-identical prompts up to the point where the dynamic input starts, and the same request
parameters. A timestamp, id or counter anywhere before the tail, or an unstable tool order,
breaks it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
from pydantic import BaseModel

from toolwire.llm import OpenAIGateway, Purpose, SuitabilityQuestion, prompts
from toolwire.search.pages import Page
from toolwire.search.relevance import relevant_pages
from toolwire.settings import LLMSettings
from toolwire.task import PromptAndContext
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeRequest, prompt_text

QUESTIONS = [
    SuitabilityQuestion(tool_name="pharma.drug_info", question="Is the task about a drug?"),
    SuitabilityQuestion(tool_name="pharma.interactions", question="Two medicines together?"),
    SuitabilityQuestion(tool_name="weather.forecast", question="Is it about the weather?"),
]


class Topic(BaseModel):
    """What the message is about."""

    topic: str


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
    "suitability_batched": (
        lambda g, v: g.suitability(v, QUESTIONS, batched=True),
        "suitability",
    ),
    "relevance": (_relevance, "relevance"),
    "gatekeeper": (lambda g, v: g.judge_context(v, [context(v)]), "gatekeeper"),
    "answer": (lambda g, v: g.answer(v, [context(v)]), "answer"),
    "compression": (lambda g, v: g.answer(v, [context(v), context(v + "-2")]), "compression"),
}


@dataclass
class Sent:
    purpose: str
    request: FakeRequest


def purpose_of(request: FakeRequest) -> str:
    """Which purpose a request served, read from its fixed system text."""
    system = request.messages[0]["content"]
    for purpose in Purpose:
        if system.startswith(prompts.system_text(purpose).split("\n\n")[0]):
            return purpose.value
    assert system.startswith("Answer a yes/no question"), system
    return "suitability"


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as fake:
        yield fake


def gateway_for(server: FakeOpenAIServer) -> OpenAIGateway:
    settings = LLMSettings(
        base_url=server.base_url,
        model="fake-model",
        max_retries=0,
        structured_output="json_schema",
        # small enough that two contexts of ~400 characters are compressed before the answer
        context_window_tokens=200,
        compression_threshold=0.9,
    )
    return OpenAIGateway(settings, api_key="k")


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
    await call(gateway, "QUESTION-ONE")
    await call(gateway, "QUESTION-TWO")
    await gateway.aclose()

    sent = [r for r in server.chat_requests if purpose_of(r) == purpose]
    assert len(sent) == 2, [purpose_of(r) for r in server.chat_requests]
    assert_stable_up_to_the_tail(sent[0], sent[1], "QUESTION-ONE")


async def test_per_tool_suitability_keeps_each_tools_prefix_and_a_stable_order(
    server: FakeOpenAIServer,
) -> None:
    gateway = gateway_for(server)
    await gateway.suitability("QUESTION-ONE", QUESTIONS)
    await gateway.suitability("QUESTION-TWO", QUESTIONS)
    await gateway.aclose()

    requests = server.chat_requests
    assert len(requests) == 6
    first_round, second_round = requests[:3], requests[3:]
    systems = [r.messages[0]["content"] for r in first_round]
    assert systems == [r.messages[0]["content"] for r in second_round]
    assert [s.rsplit("Question: ", 1)[1] for s in systems] == [q.question for q in QUESTIONS]
    for one, two in zip(first_round, second_round, strict=True):
        assert_stable_up_to_the_tail(one, two, "QUESTION-ONE")
