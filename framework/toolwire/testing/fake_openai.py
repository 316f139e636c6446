"""A fake OpenAI-compatible server on 127.0.0.1, for tests and load benchmarks.

It speaks just enough HTTP/1.1 (keep-alive, Content-Length) for ``openai.AsyncOpenAI`` and
httpx, records every request, answers from a script of :class:`FakeReply` objects (then from a
responder function, then with a schema-valid default), and reports usage like OpenAI does:
prompt tokens estimated at four characters a token, and ``prompt_tokens_details.cached_tokens``
for the longest prefix shared with an earlier request (a simulated prefix cache). A responder
that raises (a failing ``assert``) gets the client an HTTP 500 naming the exception, and closing
the server (the end of ``async with``) raises the first such exception, so the test fails with it.

::

    async with FakeOpenAIServer(latency_s=0.05) as server:
        server.script(FakeReply(text='{"drug_a": "ibuprofen", "drug_b": "warfarin"}'))
        gateway = OpenAIGateway(LLMSettings(base_url=server.base_url, model="fake"))
        ...
        assert server.requests[0].messages[0]["role"] == "system"
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from toolwire.llm.prompts import shared_prefix_length

__all__ = ["FakeOpenAIServer", "FakeReply", "FakeRequest", "default_output"]

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 422: "Unprocessable Entity",
            500: "Internal Server Error", 503: "Service Unavailable"}  # fmt: skip


@dataclass(frozen=True)
class FakeRequest:
    """One request the server received."""

    method: str
    path: str
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.body.get("messages", [])
        return messages

    @property
    def forced_function(self) -> str | None:
        """The function name of a forced function call (``tool_choice``), if any."""
        choice = self.body.get("tool_choice")
        if isinstance(choice, dict):
            name: str | None = choice.get("function", {}).get("name")
            return name
        return None

    @property
    def offered_functions(self) -> list[dict[str, Any]]:
        """The functions offered for the model to call as it sees fit (``tools`` without a
        forced ``tool_choice``): each ``{"name", "description", "parameters"}``."""
        if self.forced_function is not None:
            return []
        return [tool.get("function", {}) for tool in self.body.get("tools", [])]

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """The JSON schema the request asks the answer to follow, however it was sent."""
        name = self.forced_function
        if name is not None:
            for tool in self.body.get("tools", []):
                if tool.get("function", {}).get("name") == name:
                    schema: dict[str, Any] = tool["function"].get("parameters", {})
                    return schema
        response_format = self.body.get("response_format") or {}
        if response_format.get("type") == "json_schema":
            found: dict[str, Any] = response_format["json_schema"].get("schema", {})
            return found
        if response_format.get("type") == "json_object" and "schema" in response_format:
            found = response_format["schema"]
            return found
        return None


@dataclass
class FakeReply:
    """What the server answers to one request.

    ``text`` is the model output: sent as the forced function call's arguments when the request
    forced one, else as the message content. ``raw_body`` replaces the whole HTTP body (to send
    garbage); ``status`` other than 200 sends an OpenAI-style error with ``error`` as message.
    """

    text: str | None = None
    status: int = 200
    error: str = "fake server error"
    delay_s: float = 0.0
    raw_body: bytes | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    """``length`` simulates output cut off at ``max_tokens``; default ``stop`` (``tool_calls``)."""
    piece_delay_s: float = 0.0
    """A streamed reply (``"stream": true``): the pause before each piece (word) of the text."""
    break_after: int | None = None
    """A streamed reply: close the connection after this many pieces (a server that died)."""
    calls: list[tuple[str, dict[str, Any]]] | None = None
    """To a request offering functions: the calls made, each ``(name, arguments)`` (``[]``:
    none, the ``text`` alone). Unset, with no ``text`` either: the first function offered is
    called with default arguments."""
    model: str | None = None
    """The model the reply names (a dated snapshot, say); default the one the request named."""


Responder = Callable[[FakeRequest], "FakeReply | Awaitable[FakeReply]"]


def default_output(schema: dict[str, Any] | None) -> str:
    """A minimal answer valid against ``schema`` (false, 0, "", [] …); plain text without one."""
    if schema is None:
        return "This is the fake model's answer."
    return json.dumps(_instance(schema, schema.get("$defs", {})))


def _instance(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    if "$ref" in schema:
        return _instance(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return _instance(schema[key][0], defs)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type", "object")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: _instance(sub, defs) for name, sub in properties.items()}
    simple = {"string": "", "boolean": False, "integer": 0, "number": 0, "array": [], "null": None}
    return simple.get(kind)


@dataclass
class _PrefixCache:
    """Remembers recent prompts; a new prompt's cached part is its longest shared prefix."""

    size: int = 512
    prompts: deque[str] = field(default_factory=deque)

    def cached_chars(self, prompt: str) -> int:
        best = 0
        for previous in self.prompts:
            limit = min(len(previous), len(prompt))
            if limit <= best:
                continue
            best = max(best, shared_prefix_length(previous, prompt))
        self.prompts.append(prompt)
        if len(self.prompts) > self.size:
            self.prompts.popleft()
        return best


def prompt_text(body: dict[str, Any]) -> str:
    """What a chat template would put before the answer: output spec and tools, then messages."""
    head = {key: body[key] for key in ("tools", "response_format") if key in body}
    parts = [json.dumps(head, separators=(",", ":"))] if head else []
    parts.extend(f"<{m.get('role')}>{m.get('content') or ''}" for m in body.get("messages", []))
    return "\n".join(parts)


class FakeOpenAIServer:
    """An OpenAI-compatible chat completions server answering from a script (see module doc)."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        latency_s: float = 0.0,
        model: str = "fake-model",
        chars_per_token: int = 4,
    ) -> None:
        self.requests: list[FakeRequest] = []
        self.model = model
        self._responder = responder
        self._latency_s = latency_s
        self._chars_per_token = chars_per_token
        self._script: deque[FakeReply] = deque()
        self._cache = _PrefixCache()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._counter = 0
        self._failure: Exception | None = None
        """The first exception a request raised (the responder's), raised again by aclose."""
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[FakeRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def script(self, *replies: FakeReply) -> None:
        """Queue replies; each chat request takes the next one before the responder is asked."""
        self._script.extend(replies)

    async def start(self) -> FakeOpenAIServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):  # idle keep-alive connections end with EOF
                writer.close()
            if self._handlers:
                await asyncio.wait(self._handlers, timeout=2)
            await self._server.wait_closed()
            self._server = None
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    async def __aenter__(self) -> FakeOpenAIServer:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- HTTP ------------------------------------------------------------------------------------

    async def _write_stream(self, writer: asyncio.StreamWriter, stream: _Stream) -> bool:
        """Send a streamed reply as Server-Sent Events in chunked encoding; False when the reply
        breaks off (the connection is then closed)."""
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
        )
        for number, event in enumerate(stream.events):
            if stream.reply.break_after is not None and number >= stream.reply.break_after:
                await writer.drain()
                return False
            if number < stream.pieces and stream.reply.piece_delay_s:
                await asyncio.sleep(stream.reply.piece_delay_s)
            data = f"data: {event}\n\n".encode()
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {
                    name.strip().lower(): value.strip()
                    for name, _, value in (line.partition(":") for line in lines[1:] if line)
                }
                raw = await reader.readexactly(int(headers.get("content-length", "0")))
                try:
                    response = await self._handle(method, path, raw)
                except Exception as error:  # a failing responder: the test must fail with it
                    self._failure = self._failure or error
                    message = f"the fake server failed: {type(error).__name__}: {error}"
                    response = 500, _error(message)
                if isinstance(response, _Stream):
                    if not await self._write_stream(writer, response):
                        return
                    continue
                status, body = response
                writer.write(
                    f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                    "Connection: keep-alive\r\n\r\n".encode("latin-1")
                    + body
                )
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return  # the client went away, or the loop is shutting down: nothing left to serve
        finally:
            self._writers.discard(writer)
            if task is not None:
                self._handlers.discard(task)
            writer.close()

    async def _handle(self, method: str, path: str, raw: bytes) -> tuple[int, bytes] | _Stream:
        body: dict[str, Any] = json.loads(raw) if raw else {}
        request = FakeRequest(method=method, path=path, body=body)
        self.requests.append(request)
        if path.endswith("/models"):
            data = [{"id": self.model, "object": "model", "created": 0, "owned_by": "toolwire"}]
            return 200, json.dumps({"object": "list", "data": data}).encode()
        if not path.endswith("/chat/completions"):
            return 404, _error(f"no route {path}")
        reply = await self._reply(request)
        delay = self._latency_s + reply.delay_s
        if delay:
            await asyncio.sleep(delay)
        if reply.raw_body is not None:
            return reply.status, reply.raw_body
        if reply.status != 200:
            return reply.status, _error(reply.error)
        completion = self._completion(request, reply)
        if request.body.get("stream"):
            return _Stream.of(completion, reply, request.body.get("stream_options") or {})
        return 200, json.dumps(completion).encode()

    async def _reply(self, request: FakeRequest) -> FakeReply:
        if self._script:
            return self._script.popleft()
        if self._responder is not None:
            result = self._responder(request)
            return await result if inspect.isawaitable(result) else result
        return FakeReply()

    def _completion(self, request: FakeRequest, reply: FakeReply) -> dict[str, Any]:
        self._counter += 1
        text = reply.text if reply.text is not None else default_output(request.output_schema)
        prompt = prompt_text(request.body)
        cached_chars = self._cache.cached_chars(prompt)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish = reply.finish_reason or "stop"
        function = request.forced_function
        offered = request.offered_functions
        calls = reply.calls
        if offered and calls is None and reply.text is None:
            first = offered[0]
            calls = [(first.get("name", ""), json.loads(default_output(first.get("parameters"))))]
            text = ""
        if offered and calls:
            message = {"role": "assistant", "content": text or None, "tool_calls": [
                {"id": f"call_{self._counter}_{number}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments)}}
                for number, (name, arguments) in enumerate(calls)
            ]}  # fmt: skip
            finish = reply.finish_reason or "tool_calls"
        elif function is not None:
            call = {"name": function, "arguments": text}
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{self._counter}", "type": "function", "function": call}
            ]}  # fmt: skip
            finish = reply.finish_reason or "tool_calls"
        prompt_tokens = len(prompt) // self._chars_per_token + 1
        completion_tokens = reply.completion_tokens or len(text) // self._chars_per_token + 1
        return {
            "id": f"chatcmpl-fake-{self._counter}",
            "object": "chat.completion",
            "created": 0,
            "model": reply.model or request.body.get("model") or self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {
                    "cached_tokens": min(cached_chars // self._chars_per_token, prompt_tokens)
                },
            },
        }


_PIECES = re.compile(r"\s*\S+|\s+")


@dataclass(frozen=True)
class _Stream:
    """A completion as the chunks of a streamed reply (``data:`` payloads, ``[DONE]`` last):
    one per word of the text, the finish reason, then the usage when the request asked for it."""

    events: list[str]
    pieces: int
    reply: FakeReply

    @classmethod
    def of(
        cls, completion: dict[str, Any], reply: FakeReply, options: dict[str, Any]
    ) -> _Stream:
        choice = completion["choices"][0]
        text = choice["message"]["content"] or ""
        head = {key: completion[key] for key in ("id", "created", "model")}
        head["object"] = "chat.completion.chunk"

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> str:
            return json.dumps({**head, "choices": choices, **extra})

        events = [
            chunk([{"index": 0, "delta": {"content": piece}, "finish_reason": None}])
            for piece in _PIECES.findall(text)
        ]
        pieces = len(events)
        finish = {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}
        events.append(chunk([finish]))
        if options.get("include_usage"):
            events.append(chunk([], usage=completion["usage"]))
        events.append("[DONE]")
        return cls(events, pieces, reply)


def _error(message: str) -> bytes:
    return json.dumps(
        {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
    ).encode()
