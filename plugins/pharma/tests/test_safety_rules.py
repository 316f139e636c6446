"""The pharma domain's SAFETY_RULES are its instructions (issue 32 item 4): every model call of
the domain carries them in its fixed prefix, the system message, byte-identical from question to
question, never in the dynamic tail; and the dosage tool's guaranteed answer still reaches the
caller verbatim, whatever the rules say about answers. Against a fake OpenAI-compatible server,
so the requests are the bytes a model server would receive."""

from __future__ import annotations

import json
import re
from pathlib import Path

import toolwire_pharma.plugin
from toolwire_pharma import DosageQuery
from toolwire_pharma.dosage import DosageInfoTool
from toolwire_pharma.plugin import SAFETY_RULES

from toolwire import App
from toolwire.domain_instructions import instructions_block, normalised
from toolwire.llm import OpenAIGateway, prompts
from toolwire.sessions import MemorySessionStore
from toolwire.settings import LLMSettings
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest

QUESTIONS = ("What is the usual dose of Tylenol?", "What is the usual dose of Advil?")


def reply(request: FakeRequest) -> FakeReply:
    """A model that reads a dose question as one: no combination, the dosage tool, its
    product."""
    fields = (request.output_schema or {}).get("properties", {})
    if "products" in fields:  # the interaction coordinator's decomposition
        return FakeReply(text=json.dumps({"asks_about_combination": False, "products": []}))
    if "choice" in fields:
        options = fields["choice"]["items"]["enum"]
        return FakeReply(text=json.dumps({"choice": [o for o in options if "dosage" in o]}))
    if "answer" in fields:  # the chosen tool confirmed on its question
        return FakeReply(text='{"answer": "yes"}')
    if "product" in fields:
        [product] = re.findall(r"usual dose of (\w+)", request.messages[-1]["content"])
        return FakeReply(text=json.dumps({"product": product}))
    return FakeReply(text="A composed answer.")


async def test_safety_rules_sit_in_every_calls_system_message_and_the_dose_stays_verbatim(
    isolated: Path,
) -> None:
    async with FakeOpenAIServer(reply) as server:
        settings = LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0)
        gateway = OpenAIGateway(settings, api_key="k", concurrency=1)
        app = App.load(
            plugins=[toolwire_pharma.plugin],
            load_entry_points=False,
            llm=gateway,
            session_store=MemorySessionStore(),
        )
        try:
            answers = [await app.ask(question) for question in QUESTIONS]
            dosage = app.tool("pharma.dosage_info")
            assert isinstance(dosage, DosageInfoTool)
            own = [  # what the tool itself answers, to compare the answers with
                dosage.execute_with_result(DosageQuery(product=product), "").text
                for product in ("Tylenol", "Advil")
            ]
        finally:
            await app.aclose()

    domain = app.domains["pharma"]
    assert domain.instructions == normalised(SAFETY_RULES)  # the domain's instructions
    fixed = f"{prompts.RULES}\n\nDomain: {domain.description}\n\n{instructions_block(SAFETY_RULES)}"
    requests = server.chat_requests
    first, second = answers
    assert len(requests) == len(first.model_calls) + len(second.model_calls)
    assert len(first.model_calls) == len(second.model_calls) >= 4  # decomposition … parameters
    systems = [request.messages[0] for request in requests]
    assert all(system["role"] == "system" for system in systems)
    assert all(system["content"].startswith(fixed) for system in systems)
    half = len(systems) // 2
    assert systems[:half] == systems[half:]  # byte-identical from one question to the next
    rule = "NEVER give a dose for a child under 12"
    tail = [message["content"] for request in requests for message in request.messages[1:]]
    assert tail and not any(rule in text for text in tail)  # never in the dynamic tail
    assert all(call.shared_prefix_chars > len(fixed) for call in second.model_calls)

    for answer, text, product in zip(answers, own, ("Tylenol", "Advil"), strict=True):
        assert text.startswith(f"Usual dosage for {product}: ")
        assert answer.kind == "answer" and answer.failures == []
        assert answer.guaranteed_contexts == [text]
        assert answer.text == text  # the tool's finished answer, as the tool wrote it
    assert [call.purpose for call in first.model_calls] == [
        "decomposition", "choice", "suitability", "parameters"
    ]  # fmt: skip  # no model wrote the answer: nothing could reword it
