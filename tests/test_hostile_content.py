"""Content from outside that is not text (bytes Python kept as lone surrogates) reaches the model
as text through the real gateway, instead of failing the question."""

from __future__ import annotations

from orchestration_kit import EchoTool, domain
from toolwire.llm import OpenAIGateway
from toolwire.settings import LLMSettings
from toolwire.testing import conversation_for
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest, default_output

LISTED = "caf\udce9.txt"
"""A Latin-1 file name as ``os.listdir`` gives it on a UTF-8 system (``surrogateescape``)."""


async def test_a_tool_result_that_is_not_utf8_reaches_the_model_replaced() -> None:
    """It was a ``UnicodeEncodeError`` from the OpenAI client: the whole question failed, a 500
    over HTTP."""

    def answering(request: FakeRequest) -> FakeReply:
        if request.output_schema is not None:
            return FakeReply(text=default_output(request.output_schema))
        return FakeReply(text="The folder has one file.")

    async with FakeOpenAIServer(answering) as server:
        gateway = OpenAIGateway(
            LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0), api_key="k"
        )
        files = EchoTool("files", f"file: {LISTED}")
        service = conversation_for(domain(), files, model=gateway)
        answer = await service.ask("which files are in the folder?")
        await gateway.aclose()

    assert answer.kind == "answer" and answer.failures == []
    assert answer.text == "The folder has one file."
    [answering_call] = [r for r in server.chat_requests if r.output_schema is None]
    assert "file: caf\ufffd.txt" in answering_call.messages[-1]["content"]
