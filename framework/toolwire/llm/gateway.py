"""The one gateway to OpenAI-compatible servers (OpenAI, vLLM, Ollama, llama.cpp, embedded).

Each purpose builds its messages in :mod:`toolwire.llm.prompts` (stable prefix first, dynamic tail
last), asks for structured output per :mod:`toolwire.llm.structured`, validates it with pydantic
and retries once with the validation error fed back. Every call leaves a ``llm_call`` log event
and a :class:`CallRecord` in the current question's collector.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import httpx
import openai
import structlog
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion

from toolwire.errors import ModelError
from toolwire.llm import prompts
from toolwire.llm.base import (
    CallRecord,
    GatekeeperVerdict,
    M,
    Purpose,
    SuitabilityQuestion,
    record_call,
)
from toolwire.llm.compression import ContextCompressor
from toolwire.llm.guard import ensure_model_requests_allowed
from toolwire.llm.prompts import Message
from toolwire.llm.structured import (
    StructuredMode,
    YesNo,
    boolean_model,
    parse_output,
    request_options,
)
from toolwire.registry import to_wire_name
from toolwire.settings import LLMSettings
from toolwire.task import PromptAndContext

log = structlog.get_logger(__name__)

BaseUrlProvider = Callable[[], Awaitable[str]]
"""Returns the server's base URL, starting the server if needed (the embedded model)."""


@dataclass
class _Completion:
    """A model's raw output and the figures of the call that produced it."""

    text: str
    record: CallRecord
    truncated: bool = False
    """The server stopped at the completion limit (``finish_reason == "length"``)."""


class OpenAIGateway:
    """:class:`toolwire.llm.LanguageModel` over ``openai.AsyncOpenAI``.

    ``base_url_provider`` defers connecting until the first call (the embedded model's server is
    started then, not at creation). ``client`` injects a ready client (tests, custom transports).
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        api_key: str | None = None,
        model: str | None = None,
        base_url_provider: BaseUrlProvider | None = None,
        client: AsyncOpenAI | None = None,
        structured_output: StructuredMode | None = None,
        per_tool_concurrency: int = 8,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.settings = settings
        self._api_key = api_key
        self._model = model or settings.model
        self._base_url_provider = base_url_provider
        self._client = client
        self._client_lock = asyncio.Lock()
        configured = settings.structured_output
        self._structured: StructuredMode = structured_output or (
            "json_schema" if configured == "auto" else configured
        )
        self._may_fall_back = structured_output is None and configured == "auto"
        self._semaphore = asyncio.Semaphore(per_tool_concurrency)
        self._on_close = on_close
        self._last_request: dict[str, str] = {}
        self.compressor = ContextCompressor(
            self,
            window_tokens=settings.context_window_tokens,
            threshold=settings.compression_threshold,
        )

    @property
    def structured_mode(self) -> StructuredMode:
        """How structured output is requested right now (``auto`` may have switched to tools)."""
        return self._structured

    # -- the purposes ---------------------------------------------------------------------------

    async def suitability(
        self, task_prompt: str, questions: Sequence[SuitabilityQuestion]
    ) -> dict[str, bool]:
        if not questions:
            return {}
        if self.settings.suitability_mode == "per_tool":
            return await self._suitability_per_tool(task_prompt, questions)
        return await self._suitability_batched(task_prompt, questions)

    async def _suitability_batched(
        self, task_prompt: str, questions: Sequence[SuitabilityQuestion]
    ) -> dict[str, bool]:
        wired = [(to_wire_name(question.tool_name), question) for question in questions]
        schema = boolean_model(tuple((wire, question.question) for wire, question in wired))
        messages = prompts.suitability_batched_messages(task_prompt, wired)
        limits = self.settings.max_completion_tokens
        max_tokens = limits.suitability + limits.suitability_batched_per_tool * len(questions)
        answers = await self._required_structured_call(
            Purpose.SUITABILITY, messages, schema, max_tokens
        )
        values = answers.model_dump(by_alias=True)
        return {question.tool_name: bool(values[wire]) for wire, question in wired}

    async def _suitability_per_tool(
        self, task_prompt: str, questions: Sequence[SuitabilityQuestion]
    ) -> dict[str, bool]:
        async def ask(question: SuitabilityQuestion) -> YesNo | None:
            async with self._semaphore:
                messages = prompts.suitability_single_messages(task_prompt, question)
                return await self._structured_call(Purpose.SUITABILITY, messages, YesNo)

        answers = await asyncio.gather(*(ask(question) for question in questions))
        unanswered = [q.tool_name for q, a in zip(questions, answers, strict=True) if a is None]
        if len(unanswered) == len(questions):
            raise ModelError(Purpose.SUITABILITY, "no tool's question got a valid answer")
        if unanswered:
            log.warning("suitability_unanswered", tools=unanswered)
        return {
            question.tool_name: answer is not None and answer.answer == "yes"
            for question, answer in zip(questions, answers, strict=True)
        }

    async def extract(
        self,
        schema: type[M],
        text: str,
        *,
        instruction: str = "",
        purpose: Purpose = Purpose.DECOMPOSITION,
    ) -> M | None:
        messages = prompts.extract_messages(purpose, text, instruction)
        return await self._structured_call(purpose, messages, schema)

    async def judge_context(
        self, question: str, contexts: Sequence[PromptAndContext]
    ) -> GatekeeperVerdict:
        contexts = await self.compressor.fit(question, contexts)
        messages = prompts.gatekeeper_messages(question, contexts)
        return await self._required_structured_call(Purpose.GATEKEEPER, messages, GatekeeperVerdict)

    async def answer(self, question: str, contexts: Sequence[PromptAndContext]) -> str:
        contexts = await self.compressor.fit(question, contexts)
        messages = prompts.answer_messages(question, contexts)
        completion = await self._complete(Purpose.ANSWER, messages, {})
        if completion.truncated:
            log.warning(
                "llm_output_truncated", purpose=str(Purpose.ANSWER), chars=len(completion.text)
            )
        text = completion.text.strip()
        if not text:
            completion.record.ok = False
            completion.record.error = "empty answer"
        self._finish(completion.record)
        if not text:
            raise ModelError(Purpose.ANSWER, "the model returned an empty answer")
        return text

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._on_close is not None:
            await self._on_close()

    # -- structured output ----------------------------------------------------------------------

    async def _required_structured_call(
        self,
        purpose: Purpose,
        messages: list[Message],
        schema: type[M],
        max_tokens: int | None = None,
    ) -> M:
        """:meth:`_structured_call` for purposes that have no "no answer": None is a ModelError."""
        result = await self._structured_call(purpose, messages, schema, max_tokens)
        if result is None:
            raise ModelError(
                purpose, "the model's output did not match the schema after one corrective retry"
            )
        return result

    async def _structured_call(
        self,
        purpose: Purpose,
        messages: list[Message],
        schema: type[M],
        max_tokens: int | None = None,
    ) -> M | None:
        """One call, one corrective retry on invalid output, then None (figures recorded)."""
        limit = max_tokens or self._completion_limit(purpose)
        attempt_messages = messages
        for attempt in (1, 2):
            completion = await self._complete_structured(purpose, attempt_messages, schema, limit)
            try:
                result = parse_output(schema, completion.text)
            except ValueError as exc:
                error = _output_error(exc, completion, limit)
                completion.record.ok = False
                completion.record.error = error
                self._finish(completion.record)
                log.warning(
                    "llm_output_invalid", purpose=str(purpose), attempt=attempt, error=error
                )
                attempt_messages = prompts.corrective_messages(messages, completion.text, error)
                continue
            self._finish(completion.record)
            return result
        return None

    async def _complete_structured(
        self, purpose: Purpose, messages: list[Message], schema: type[M], max_tokens: int
    ) -> _Completion:
        mode = self._structured
        try:
            return await self._complete(
                purpose, messages, request_options(schema, mode), max_tokens
            )
        except ModelError as exc:
            if not (self._may_fall_back and mode == "json_schema" and _rejects_schema(exc)):
                raise
        self._structured = "tools"
        self._may_fall_back = False
        log.warning("structured_output_fallback", purpose=str(purpose), mode="tools")
        return await self._complete(purpose, messages, request_options(schema, "tools"), max_tokens)

    def _completion_limit(self, purpose: Purpose) -> int:
        """The configured most tokens a purpose's answer may take (``LLMSettings``)."""
        limit: int = getattr(self.settings.max_completion_tokens, purpose.value)
        return limit

    # -- transport and figures ------------------------------------------------------------------

    async def _connect(self) -> AsyncOpenAI:
        async with self._client_lock:
            if self._client is None:
                base_url = await self._base_url_provider() if self._base_url_provider else None
                self._client = AsyncOpenAI(
                    base_url=base_url or self.settings.base_url,
                    api_key=self._api_key or "not-needed",
                    timeout=self.settings.timeout_s,
                    max_retries=self.settings.max_retries,
                )
            if self._model is None:
                self._model = await self._first_served_model(self._client)
            return self._client

    async def _first_served_model(self, client: AsyncOpenAI) -> str:
        try:
            page = await client.models.list()
        except (openai.APIError, httpx.HTTPError) as exc:
            raise ModelError("models", f"cannot list the server's models: {exc}") from exc
        if not page.data:
            raise ModelError("models", "the server lists no model; set TOOLWIRE_LLM_MODEL")
        return page.data[0].id

    async def _complete(
        self,
        purpose: Purpose,
        messages: list[Message],
        options: dict[str, Any],
        max_tokens: int | None = None,
    ) -> _Completion:
        """One HTTP round trip; transport failures (after the client's retries) → ModelError.

        The completion limit is sent but kept out of ``shared_prefix_chars``: it is not part of
        the prompt a cache reuses.
        """
        ensure_model_requests_allowed(str(purpose))
        client = await self._connect()
        model = self._model or ""
        serialised = prompts.canonical([options, messages])
        previous = self._last_request.get(purpose)
        self._last_request[purpose] = serialised
        shared = prompts.shared_prefix_length(previous, serialised) if previous else 0
        limit = max_tokens or self._completion_limit(purpose)
        parameters: dict[str, Any] = {**options, self.settings.completion_limit_field: limit}
        started = time.perf_counter()
        try:
            response: ChatCompletion = await client.chat.completions.create(
                model=model,
                messages=cast(Any, messages),
                temperature=self.settings.temperature,
                **parameters,
            )
        except (openai.APIError, httpx.HTTPError, ValueError) as exc:
            record = CallRecord(
                purpose=str(purpose),
                model=model,
                latency_ms=_elapsed_ms(started),
                shared_prefix_chars=shared,
                ok=False,
                error=_describe(exc),
            )
            self._finish(record)
            raise ModelError(purpose, record.error or "unknown failure") from exc
        record = _record(purpose, model, response, started, shared)
        truncated = bool(response.choices) and response.choices[0].finish_reason == "length"
        return _Completion(text=_output_text(response), record=record, truncated=truncated)

    def _finish(self, record: CallRecord) -> None:
        record_call(record)
        log.info("llm_call", **record.model_dump())


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def _record(
    purpose: Purpose, model: str, response: ChatCompletion, started: float, shared: int
) -> CallRecord:
    usage = response.usage
    cached = 0
    if usage is not None and usage.prompt_tokens_details is not None:
        cached = usage.prompt_tokens_details.cached_tokens or 0
    timings = (response.model_extra or {}).get("timings")
    if not cached and isinstance(timings, dict):  # llama.cpp's own server: tokens reused from cache
        cached = int(timings.get("cache_n") or 0)
    return CallRecord(
        purpose=str(purpose),
        model=response.model or model,
        latency_ms=_elapsed_ms(started),
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
        cached_prompt_tokens=cached,
        shared_prefix_chars=shared,
    )


def _output_text(response: ChatCompletion) -> str:
    """A forced function call's arguments, else the message content."""
    if not response.choices:
        return ""
    message = response.choices[0].message
    for call in message.tool_calls or []:
        function = getattr(call, "function", None)
        if function is not None:
            return str(function.arguments)
    return message.content or ""


def _output_error(exc: ValueError, completion: _Completion, max_tokens: int) -> str:
    """Why structured output was rejected, naming the completion limit when it cut the output."""
    if completion.truncated:
        return (
            f"the output was cut off at the limit of {max_tokens} tokens ({exc}); answer with "
            "shorter values"
        )
    return str(exc)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "the request timed out (after the client's retries)"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {exc.message}"
    if isinstance(exc, openai.APIConnectionError):
        return f"cannot connect to the model server: {exc}"
    return f"{type(exc).__name__}: {exc}"


def _rejects_schema(exc: ModelError) -> bool:
    """Whether a failure looks like a server that does not know ``json_schema`` response formats."""
    cause = exc.__cause__
    if not isinstance(cause, openai.APIStatusError) or cause.status_code not in {400, 422, 500}:
        return False
    text = str(cause.message) + str(getattr(cause, "body", ""))
    return "response_format" in text or "json_schema" in text
