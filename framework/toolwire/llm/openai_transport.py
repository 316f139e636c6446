"""The chat transport to OpenAI-compatible servers: OpenAI, vLLM, Ollama, llama.cpp, embedded.

It sends one request through ``openai.AsyncOpenAI``, asks for structured output the way the
server understands (:mod:`toolwire.llm.structured`), retries transient failures (connection
errors, 408/409/429/5xx) only while the request's time lasts (waiting the ``Retry-After`` the
server asks for, or failing at once when it does not fit), and checks that the reply has the
shape of a chat completion before reading it: a reply that is JSON but not a completion is a
``ModelError`` like any other bad reply. Error messages carry the HTTP status and a shortened
server message with the API key and other secret shapes removed, never a body verbatim.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
import openai
import structlog
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionChunk
from pydantic import BaseModel, Field, ValidationError, field_validator

from toolwire.errors import FunctionCallingRefusedError, ModelError
from toolwire.llm.guard import ensure_model_requests_allowed
from toolwire.llm.structured import StructuredMode, request_options
from toolwire.llm.transport import ChatReply, ChatRequest, FunctionCall
from toolwire.redaction import redact

log = structlog.get_logger(__name__)

BaseUrlProvider = Callable[[], Awaitable[str]]
"""Returns the server's base URL, starting the server if needed (the embedded model)."""

TRANSIENT_STATUS = frozenset({408, 409, 429})
"""HTTP statuses worth another try (and every 5xx): the server may answer the next one (not a
429 for ``insufficient_quota``: no retry gets the quota back)."""

RETRY_DELAY_S = 0.5
"""Pause before the first retry; doubled for each further one."""

MESSAGE_CHARS = 200
"""How much of a server's error message an error quotes."""

FUNCTION_REFUSALS = (
    "requires --jinja",  # llama.cpp without --jinja: "tools param requires --jinja flag"
    "unsupported param: tools",  # llama.cpp before its tool calling, bitnet.cpp
    "enable-auto-tool-choice",  # vLLM: '"auto" tool choice requires --enable-auto-tool-choice'
    "does not support tools",  # Ollama: "registry.ollama.ai/library/gemma does not support tools"
)
"""What a server says, lower-cased, when it refuses function calling itself (not one request's
functions: OpenAI's "Invalid 'tools[3].function.name'" is an ordinary error of that call)."""


class _WireFunction(BaseModel):
    name: str | None = None
    arguments: str = ""
    """JSON text. An object (llama.cpp for a while, TGI) is taken as its JSON text, null as
    no arguments."""

    @field_validator("arguments", mode="before")
    @classmethod
    def _as_json_text(cls, value: object) -> object:
        if value is None:
            return "{}"
        return json.dumps(value) if isinstance(value, dict) else value


class _WireToolCall(BaseModel):
    function: _WireFunction | None = None


class _WireMessage(BaseModel):
    content: str | None = None
    tool_calls: list[_WireToolCall] | None = None


class _WireChoice(BaseModel):
    message: _WireMessage
    finish_reason: str | None = None


class _WirePromptDetails(BaseModel):
    cached_tokens: int | None = None


class _WireUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_details: _WirePromptDetails | None = None


class _WireTimings(BaseModel):
    """llama.cpp's own figures; ``cache_n``: prompt tokens reused from the KV cache."""

    cache_n: int | None = None


class _WireCompletion(BaseModel):
    """The part of an OpenAI chat completion toolwire reads, checked before it is read."""

    model: str | None = None
    choices: list[_WireChoice] = Field(min_length=1)
    usage: _WireUsage | None = None
    timings: _WireTimings | None = None


class OpenAITransport:
    """:class:`toolwire.llm.transport.ChatTransport` over ``openai.AsyncOpenAI``.

    ``base_url_provider`` defers connecting until the first call (the embedded model's server is
    started then, not at creation). ``client`` injects a ready client. ``model`` None: the first
    model the server lists. ``structured_output="auto"`` asks with a JSON schema and switches to
    a forced function call once the server rejects the schema.
    """

    supports_functions = True
    """OpenAI-compatible servers take ``tools`` with ``tool_choice: auto`` (a server that refuses
    them answers with :class:`~toolwire.errors.FunctionCallingRefusedError`)."""

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        base_url_provider: BaseUrlProvider | None = None,
        client: AsyncOpenAI | None = None,
        structured_output: StructuredMode | str = "auto",
        max_retries: int = 2,
        completion_limit_field: str = "max_tokens",
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._base_url = base_url
        self._api_key = api_key
        self._model = model
        self._base_url_provider = base_url_provider
        self._provided_url: str | None = None
        """What ``base_url_provider`` answered for the current client."""
        self._client = client
        self._client_lock = asyncio.Lock()
        self._structured: StructuredMode = cast(
            StructuredMode, "json_schema" if structured_output == "auto" else structured_output
        )
        self._auto = structured_output == "auto"
        self._max_retries = max_retries
        self._limit_field = completion_limit_field
        self._on_close = on_close

    @property
    def model(self) -> str | None:
        """The model the requests name (None until the server's first is listed, when none was
        configured)."""
        return self._model

    @property
    def structured_mode(self) -> StructuredMode:
        """How structured output is requested right now (``auto`` may have switched to tools)."""
        return self._structured

    async def send(self, request: ChatRequest) -> ChatReply:
        ensure_model_requests_allowed(request.purpose)
        deadline = time.monotonic() + request.timeout_s
        client = await self._connect(request, deadline)
        mode = self._structured
        try:
            return await self._send(client, request, mode, deadline)
        except ModelError as error:
            schema_asked = request.schema is not None and mode == "json_schema"
            if not (self._auto and schema_asked and _rejects_schema(error)):
                raise
        if self._structured != "tools":  # the first rejected call switches; those in flight follow
            self._structured = "tools"
            log.warning("structured_output_fallback", purpose=request.purpose, mode="tools")
        return await self._send(client, request, "tools", deadline)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._on_close is not None:
            await self._on_close()

    # -- one request, retried while its time lasts ------------------------------------------

    async def _send(
        self, client: AsyncOpenAI, request: ChatRequest, mode: StructuredMode, deadline: float
    ) -> ChatReply:
        options = request_options(request.schema, mode) if request.schema is not None else {}
        if request.functions:
            options = _offered(request)
        parameters: dict[str, Any] = {**options, self._limit_field: request.max_tokens}
        for attempt in range(self._max_retries + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ModelError(request.purpose, _out_of_time(request))
            try:
                if request.on_text is not None and request.schema is None:
                    reply = await self._stream(client, request, parameters, deadline)
                else:
                    raw = await client.chat.completions.with_raw_response.create(
                        model=self._model or "",
                        messages=cast(Any, list(request.messages)),
                        temperature=request.temperature,
                        timeout=remaining,
                        **parameters,
                    )
                    reply = self._reply(request, raw.content)
            except openai.APITimeoutError as error:
                raise ModelError(request.purpose, _out_of_time(request)) from error
            except openai.APIError as error:
                if request.functions and _is_function_rejection(error):
                    raise FunctionCallingRefusedError(
                        request.purpose, self._describe(error)
                    ) from error
                if not (_is_transient(error) and attempt < self._max_retries):
                    raise ModelError(request.purpose, self._describe(error)) from error
                asked = _retry_after(error)
                delay = RETRY_DELAY_S * 2**attempt if asked is None else asked
                left = deadline - time.monotonic()
                if delay >= left:
                    problem = self._describe(error)
                    if asked is not None:
                        problem += (
                            f"; the server asks for a retry after {asked:g} s, more than the "
                            f"{max(left, 0):.1f} s the call has left"
                        )
                    raise ModelError(request.purpose, problem) from error
                log.info(
                    "llm_call_retry", purpose=request.purpose, attempt=attempt + 1,
                    problem=self._describe(error),
                )  # fmt: skip
                await asyncio.sleep(delay)
                continue
            if reply.finish_reason == "content_filter":  # a partial reply: no retry helps
                raise ModelError(request.purpose, "the server's content filter stopped the reply")
            return reply
        raise AssertionError("unreachable: the loop returns or raises")

    async def _stream(
        self,
        client: AsyncOpenAI,
        request: ChatRequest,
        parameters: dict[str, Any],
        deadline: float,
    ) -> ChatReply:
        """The reply streamed (``stream=True``): each piece of text goes to ``request.on_text``
        as it arrives. One deadline bounds the wait for the headers (llama.cpp sends them once
        it has read the prompt) and the stream together."""
        left = deadline - time.monotonic()
        try:
            async with asyncio.timeout_at(asyncio.get_running_loop().time() + left):
                stream = await client.chat.completions.create(
                    model=self._model or "",
                    messages=cast(Any, list(request.messages)),
                    temperature=request.temperature,
                    timeout=left,
                    stream=True,
                    stream_options={"include_usage": True},
                    **parameters,
                )
                return await self._read_stream(request, stream)
        except TimeoutError as error:
            raise ModelError(request.purpose, _out_of_time(request)) from error

    async def _read_stream(
        self, request: ChatRequest, stream: openai.AsyncStream[ChatCompletionChunk]
    ) -> ChatReply:
        """An open stream's reply. A failure now is a ``ModelError`` (not retried: the watcher
        has seen part of the text). A server that answers with a whole body instead of an event
        stream is read, and checked, as an ordinary reply."""
        assert request.on_text is not None
        if "text/event-stream" not in stream.response.headers.get("content-type", ""):
            try:
                body = await stream.response.aread()
            finally:
                await stream.close()
            return self._reply(request, body)
        reply = _StreamedReply(self._model or "")
        try:
            async for chunk in stream:
                request.on_text(reply.add(chunk.model_dump()))
        except ValidationError as error:
            message = f"a streamed chunk is not a chat completion chunk ({_problems(error)})"
            raise ModelError(request.purpose, message) from error
        except UnicodeDecodeError as error:  # the SDK decodes each line as UTF-8
            message = f"a streamed chunk is not UTF-8 text ({_undecodable(error)})"
            raise ModelError(request.purpose, message) from error
        except json.JSONDecodeError as error:  # the SDK reads each chunk with json.loads
            message = f"a streamed chunk is not JSON ({error.msg} at position {error.pos})"
            raise ModelError(request.purpose, message) from error
        except RecursionError:  # the SDK reads each chunk with json.loads
            message = "a streamed chunk is JSON nested too deeply to read"
            raise ModelError(request.purpose, message) from None
        except (openai.APIError, httpx.HTTPError) as error:
            message = f"the stream broke off: {self._quote(str(error) or type(error).__name__)}"
            raise ModelError(request.purpose, message) from error
        finally:
            await stream.close()
        return reply.result()

    async def _connect(self, request: ChatRequest, deadline: float) -> AsyncOpenAI:
        """The client for this call. A ``base_url_provider`` is asked before every call, not
        only the first: the embedded model's server that died (killed, out of memory) is started
        again there, on another port, and the client follows it."""
        async with self._client_lock:
            base_url = self._base_url
            if self._base_url_provider is not None:
                base_url = await self._base_url_provider()
                if self._client is not None and base_url != self._provided_url:
                    log.info("llm_server_moved", purpose=request.purpose, base_url=base_url)
                    await self._client.close()
                    self._client = None
                self._provided_url = base_url
            if self._client is None:
                self._client = AsyncOpenAI(
                    base_url=base_url,
                    api_key=self._api_key or "not-needed",
                    max_retries=0,  # retries are ours, bounded by the request's time
                )
            if self._model is None:
                self._model = await self._first_served_model(self._client, request, deadline)
            return self._client

    async def _first_served_model(
        self, client: AsyncOpenAI, request: ChatRequest, deadline: float
    ) -> str:
        try:
            raw = await client.models.with_raw_response.list(
                timeout=max(deadline - time.monotonic(), 0.1)
            )
        except openai.APIError as error:
            message = f"cannot list the server's models: {self._describe(error)}"
            raise ModelError(request.purpose, message) from error
        try:  # read here, not by the SDK, which fails on a body that is not JSON with a crash
            listed = _WireModelList.model_validate(json.loads(raw.content))
        except (ValueError, RecursionError) as error:  # JSON, UTF-8 and validation errors
            message = f"cannot list the server's models: {_unreadable(error, 'model list')}"
            raise ModelError(request.purpose, message) from None
        if not listed.data:
            raise ModelError(request.purpose, "the server lists no model; set TOOLWIRE_LLM_MODEL")
        return listed.data[0].id

    def _describe(self, error: openai.APIError) -> str:
        if isinstance(error, openai.APIStatusError):
            return f"HTTP {error.status_code}: {self._quote(_server_message(error))}"
        if isinstance(error, openai.APIConnectionError):
            client = self._client
            where = f" at {self._quote(_address(str(client.base_url)))}" if client else ""
            # the embedded model's server is toolwire's own; a configured one is the user's
            hint = (
                "" if self._base_url_provider else
                "; check that the server runs and that llm.base_url (or TOOLWIRE_LLM_BASE_URL) "
                "is its address"
            )  # fmt: skip
            return f"cannot connect to the model server{where}: {self._quote(str(error))}{hint}"
        return f"{type(error).__name__}: {self._quote(str(error))}"

    def _reply(self, request: ChatRequest, body: bytes) -> ChatReply:
        """The reply's text and figures; ``ModelError`` when the body is not a chat completion
        (an error sent with status 200, ``{"error": {"message": …}}``, is quoted)."""
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as error:  # JSON and UTF-8 errors
            raise ModelError(request.purpose, _unreadable(error, "chat completion")) from None
        if isinstance(data, dict) and data.get("error"):
            failure = data["error"]
            message = failure.get("message", failure) if isinstance(failure, dict) else failure
            quoted = self._quote(str(message))
            raise ModelError(request.purpose, f"the server answered with an error: {quoted}")
        try:
            completion = _WireCompletion.model_validate(data)
        except (ValueError, RecursionError) as error:  # validation errors
            raise ModelError(request.purpose, _unreadable(error, "chat completion")) from None
        choice = completion.choices[0]
        usage = completion.usage or _WireUsage()
        offered = bool(request.functions)
        return ChatReply(
            text=(choice.message.content or "") if offered else _output_text(choice.message),
            model=completion.model or self._model or "",
            calls=_calls(choice.message) if offered else (),
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_prompt_tokens=_cached_tokens(usage, completion.timings),
            truncated=choice.finish_reason == "length",
            finish_reason=choice.finish_reason,
        )

    def _quote(self, text: str) -> str:
        """A server's text as an error quotes it: redacted (this transport's API key too), on one
        line, at most ``MESSAGE_CHARS`` long."""
        line = redact(text, secrets=[self._api_key or ""]).replace("\n", " ")
        return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 1] + "…"


def _cached_tokens(usage: _WireUsage, timings: _WireTimings | None) -> int:
    """Prompt tokens served from the cache: OpenAI's figure, else llama.cpp's own."""
    cached = usage.prompt_tokens_details.cached_tokens if usage.prompt_tokens_details else None
    if not cached and timings is not None:
        cached = timings.cache_n
    return cached or 0


def _unreadable(error: ValueError | RecursionError, expected: str) -> str:
    """Why a reply's body cannot be read as the ``expected`` JSON (an OpenAI chat completion,
    a model list): what the server sent is never quoted, only where it went wrong."""
    if isinstance(error, ValidationError):
        return f"the server's reply is not an OpenAI {expected} ({_problems(error)})"
    if isinstance(error, UnicodeDecodeError):
        return f"the server's reply is not UTF-8 text ({_undecodable(error)})"
    if isinstance(error, json.JSONDecodeError):
        return f"the server's reply is not JSON ({error.msg} at position {error.pos})"
    if isinstance(error, RecursionError):
        return "the server's reply is JSON nested too deeply to read"
    return f"the server's reply cannot be read as JSON ({type(error).__name__})"


def _undecodable(error: UnicodeDecodeError) -> str:
    """Where bytes that are not UTF-8 start: ``byte 0xff at position 13``."""
    byte = error.object[error.start : error.start + 1]
    return f"byte 0x{byte.hex() or '??'} at position {error.start}"


class _WireModel(BaseModel):
    id: str


class _WireModelList(BaseModel):
    """The part of ``GET /models`` toolwire reads."""

    data: list[_WireModel] = Field(default_factory=list)


def _problems(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in problem['loc']) or '(root)'}: {problem['msg']}"
        for problem in error.errors(include_url=False, include_input=False)
    )


class _WireDelta(BaseModel):
    content: str | None = None


class _WireChunkChoice(BaseModel):
    delta: _WireDelta = Field(default_factory=_WireDelta)
    finish_reason: str | None = None


class _WireChunk(BaseModel):
    """The part of a streamed chat completion chunk toolwire reads."""

    model: str | None = None
    choices: list[_WireChunkChoice] = Field(default_factory=list)
    usage: _WireUsage | None = None
    timings: _WireTimings | None = None


@dataclass
class _StreamedReply:
    """A streamed reply put together chunk by chunk: the text, the finish reason, and the usage
    the last chunk reports (``stream_options.include_usage``; llama.cpp adds its timings)."""

    model: str
    parts: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    usage: _WireUsage | None = None
    timings: _WireTimings | None = None

    def add(self, data: dict[str, Any]) -> str:
        """Take one chunk (checked); returns its piece of text ("" for none)."""
        chunk = _WireChunk.model_validate(data)
        self.model = chunk.model or self.model
        self.usage = chunk.usage or self.usage
        self.timings = chunk.timings or self.timings
        piece = ""
        for choice in chunk.choices[:1]:
            piece = choice.delta.content or ""
            self.finish_reason = choice.finish_reason or self.finish_reason
        if piece:
            self.parts.append(piece)
        return piece

    def result(self) -> ChatReply:
        usage = self.usage or _WireUsage()
        text = "".join(self.parts)
        return ChatReply(
            text=text,
            model=self.model,
            prompt_tokens=usage.prompt_tokens,
            # a server that reports no usage for a stream: one piece is about one token
            completion_tokens=usage.completion_tokens or len(self.parts),
            cached_prompt_tokens=_cached_tokens(usage, self.timings),
            truncated=self.finish_reason == "length",
            finish_reason=self.finish_reason,
        )


def _offered(request: ChatRequest) -> dict[str, Any]:
    """The request fields that offer ``request.functions`` for the model to call, or not."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": offer.name,
                "description": offer.description,
                "parameters": offer.parameters,
            },
        }
        for offer in request.functions
    ]
    return {"tools": tools, "tool_choice": "auto"}


def _calls(message: _WireMessage) -> tuple[FunctionCall, ...]:
    """The named function calls of a reply, in order."""
    return tuple(
        FunctionCall(name=call.function.name, arguments=call.function.arguments)
        for call in message.tool_calls or []
        if call.function is not None and call.function.name
    )


def _output_text(message: _WireMessage) -> str:
    """A forced function call's arguments, else the message content."""
    for call in message.tool_calls or []:
        if call.function is not None:
            return call.function.arguments
    return message.content or ""


def _out_of_time(request: ChatRequest) -> str:
    return f"timed out: no reply within the {request.timeout_s:.1f} s the call had"


def _address(url: str) -> str:
    """A server's URL as an error names it: without the user part or the query, where a token
    may sit that no secret pattern recognises."""
    return str(httpx.URL(url).copy_with(username=None, password=None, query=None))


def _is_transient(error: openai.APIError) -> bool:
    if isinstance(error, openai.APIStatusError):
        if _is_schema_rejection(error) or error.code == "insufficient_quota":
            return False
        return error.status_code in TRANSIENT_STATUS or error.status_code >= 500
    return isinstance(error, openai.APIConnectionError)


def _retry_after(error: openai.APIError) -> float | None:
    """The seconds a server asks to wait before the next try (``Retry-After``), None when it
    does not say in seconds."""
    if not isinstance(error, openai.APIStatusError) or "retry-after" not in error.response.headers:
        return None
    try:
        seconds = float(error.response.headers["retry-after"])
    except ValueError:  # an HTTP date: rare from model servers, the usual pause then
        return None
    return None if math.isnan(seconds) else max(seconds, 0.0)


def _server_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return str(error.message)


def _is_function_rejection(error: openai.APIError) -> bool:
    """Whether a server refused function calling: an error status that says one of
    :data:`FUNCTION_REFUSALS`."""
    if not isinstance(error, openai.APIStatusError) or error.status_code in TRANSIENT_STATUS:
        return False
    text = (str(error.message) + str(error.body)).lower()
    return any(refusal in text for refusal in FUNCTION_REFUSALS)


def _rejects_schema(error: ModelError) -> bool:
    """Whether a failure looks like a server that does not know ``json_schema`` response formats."""
    cause = error.__cause__
    return isinstance(cause, openai.APIStatusError) and _is_schema_rejection(cause)


def _is_schema_rejection(error: openai.APIStatusError) -> bool:
    if error.status_code not in {400, 422, 500}:
        return False
    text = str(error.message) + str(error.body)
    return "response_format" in text or "json_schema" in text
