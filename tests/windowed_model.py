"""A model server with a real context window, over the fake OpenAI server: a request longer than
the window is refused (HTTP 400), as llama.cpp, vLLM and OpenAI refuse it."""

from __future__ import annotations

import json
from collections.abc import Callable

from toolwire.llm import OpenAIGateway
from toolwire.llm.profiles import ModelProfile
from toolwire.settings import LLMSettings
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest, prompt_text

WINDOW = 8192
ANSWER = "Here is what the tools found."


def request_tokens(request: FakeRequest) -> int:
    """The prompt's tokens (four characters a token, as the server counts) and the reply's."""
    return len(prompt_text(request.body)) // 4 + int(request.body.get("max_tokens") or 0)


def huge(size: int, word: str = "row") -> str:
    """``size`` characters of numbered lines."""
    line = f"{word} 0123456789 abcdefghij klmnopqrst\n"
    return (line * (size // len(line) + 1))[:size]


def windowed(
    compression: Callable[[FakeRequest], FakeReply] | None = None,
) -> Callable[[FakeRequest], FakeReply]:
    """A model server with a window of :data:`WINDOW` tokens: a longer request is refused;
    every tool fits, every confirmation is yes, compression as ``compression`` says."""

    def reply(request: FakeRequest) -> FakeReply:
        tokens = request_tokens(request)
        if tokens > WINDOW:
            return FakeReply(status=400, error=f"request ({tokens} tokens) exceeds the context")
        if offered := request.offered_functions:  # the tool choice: every tool is called
            return FakeReply(calls=[(function["name"], {}) for function in offered])
        fields = (request.output_schema or {}).get("properties", {})
        if "choice" in fields:
            return FakeReply(text=json.dumps({"choice": fields["choice"]["items"]["enum"]}))
        if "answer" in fields:
            return FakeReply(text='{"answer": "yes"}')
        if "summary" in fields:
            if compression is not None:
                return compression(request)
            return FakeReply(text='{"summary": "Rows 0123456789 of the tools."}')
        return FakeReply(text=ANSWER)

    return reply


def gateway(server: FakeOpenAIServer, **settings: object) -> OpenAIGateway:
    """A ``ChatModel`` over ``server`` whose profile knows its window."""
    return OpenAIGateway(
        LLMSettings(
            base_url=server.base_url,
            model="fake-model",
            max_retries=0,
            **settings,  # type: ignore[arg-type]
        ),
        profile=ModelProfile(structured_output="json_schema", context_window_tokens=WINDOW),
        api_key="k",
    )


def assert_every_request_fits(server: FakeOpenAIServer) -> None:
    for request in server.chat_requests:
        tokens = request_tokens(request)
        assert tokens <= WINDOW, f"{tokens} tokens sent to a window of {WINDOW}"
