"""``OpenAIGateway``: the language model over an OpenAI-compatible server, in one object.

A :class:`~toolwire.llm.chat_model.ChatModel` whose transport is an
:class:`~toolwire.llm.openai_transport.OpenAITransport` built from :class:`LLMSettings` and the
model's profile: OpenAI, vLLM, Ollama, llama.cpp's server, and the embedded model (a base URL
provider that starts it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from openai import AsyncOpenAI

from toolwire.llm.chat_model import ChatModel
from toolwire.llm.openai_transport import BaseUrlProvider, OpenAITransport
from toolwire.llm.profiles import ModelProfile
from toolwire.llm.structured import StructuredMode
from toolwire.settings import LLMSettings


class OpenAIGateway(ChatModel):
    """:class:`toolwire.llm.LanguageModel` over ``openai.AsyncOpenAI``.

    ``profile``: the model's traits (how structured output is requested, the completion limits
    and the field that carries them, …), by default the ``general`` profile.
    ``base_url_provider`` defers connecting until the first call (the embedded model's server is
    started then, not at creation). ``client`` injects a ready client (tests, custom transports).
    """

    transport: OpenAITransport

    def __init__(
        self,
        settings: LLMSettings,
        *,
        profile: ModelProfile | None = None,
        api_key: str | None = None,
        model: str | None = None,
        base_url_provider: BaseUrlProvider | None = None,
        client: AsyncOpenAI | None = None,
        concurrency: int = 8,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        from toolwire.llm.builtin_profiles import GENERAL_PROFILE

        profile = profile or GENERAL_PROFILE
        transport = OpenAITransport(
            base_url=settings.base_url,
            api_key=api_key,
            model=model or settings.model,
            base_url_provider=base_url_provider,
            client=client,
            structured_output=profile.structured_output,
            max_retries=settings.max_retries,
            completion_limit_field=profile.completion_limit_field,
            on_close=on_close,
        )
        super().__init__(transport, settings, profile=profile, concurrency=concurrency)

    @property
    def structured_mode(self) -> StructuredMode:
        """How structured output is requested right now (``auto`` may have switched to tools)."""
        return self.transport.structured_mode
