"""Record a real model's replies once, replay them in tests and benchmarks without the model.

:class:`ReplayTransport` is a :class:`~toolwire.llm.transport.ChatTransport` that answers each
request from a file of recorded replies, keyed by everything the request sends (its messages,
output schema, offered functions, completion limit and temperature). Given an ``inner``
transport it records: a request it has no reply for goes to ``inner`` and the reply is appended
to the file. Without one, such a request is a ``ModelError`` that says the prompts changed and
how to record them again. A pipeline whose prompts did not change then runs in seconds, exactly
as it ran against the model::

    llm = create_language_model(settings)           # the embedded model, say
    llm.transport = ReplayTransport(path, inner=llm.transport)   # record
    ...
    llm = ChatModel(ReplayTransport(path), settings)  # replay: no model, no server

The file holds JSON lines, one per reply: ``{"key", "purpose", "reply", "latency_ms"}``. A line
that does not parse (a run killed while writing it) is skipped with a warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

from toolwire.errors import ModelError
from toolwire.llm.structured import json_schema
from toolwire.llm.transport import ChatReply, ChatRequest, ChatTransport, FunctionCall


def request_key(request: ChatRequest) -> str:
    """The hash of everything a request sends to the model (not its purpose or timeout)."""
    sent = {
        "messages": list(request.messages),
        "schema": json_schema(request.schema) if request.schema is not None else None,
        "functions": [asdict(function) for function in request.functions],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
    }
    encoded = json.dumps(sent, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


class ReplayTransport:
    """Replies from a recording (``path``); with ``inner``, misses are recorded from it.

    ``supports_functions`` is the inner transport's, or when replaying alone the value given
    (it changes which prompts a tool choice sends, so it must match the recording's)."""

    def __init__(
        self,
        path: str | Path,
        inner: ChatTransport | None = None,
        *,
        supports_functions: bool = True,
    ) -> None:
        self.path = Path(path)
        self.inner = inner
        self.supports_functions: bool = (
            getattr(inner, "supports_functions", False) if inner is not None else supports_functions
        )
        self.replies: dict[str, dict[str, Any]] = {}
        self.hits = 0
        self.misses = 0
        self.recorded_ms = 0.0
        """The recorded latency of the replies replayed so far (what the model took)."""
        if self.path.exists():
            for number, line in enumerate(self.path.read_text("utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    self.replies[entry["key"]] = entry
                except (json.JSONDecodeError, KeyError, TypeError) as error:
                    warnings.warn(  # a run killed mid-write: the rest of the recording is good
                        f"{self.path}:{number}: skipped a line that is not a recorded reply "
                        f"({error}); its prompt has no reply until it is recorded again",
                        stacklevel=2,
                    )

    async def send(self, request: ChatRequest) -> ChatReply:
        key = request_key(request)
        entry = self.replies.get(key)
        if entry is None:
            return await self._record(key, request)
        self.hits += 1
        self.recorded_ms += float(entry.get("latency_ms", 0.0))
        reply = _reply(entry["reply"])
        if request.on_text is not None and reply.text:
            request.on_text(reply.text)
        return reply

    async def _record(self, key: str, request: ChatRequest) -> ChatReply:
        self.misses += 1
        if self.inner is None:
            raise ModelError(
                request.purpose,
                f"no recorded reply for this {request.purpose} prompt (key {key[:12]}) in "
                f"{self.path}: the prompts changed since the recording; record it again with "
                "the model",
            )
        started = time.perf_counter()
        reply = await self.inner.send(request)
        latency = round((time.perf_counter() - started) * 1000, 1)
        entry = {
            "key": key,
            "purpose": request.purpose,
            "reply": _wire(reply),
            "latency_ms": latency,
        }
        self.replies[key] = entry
        _append_line(self.path, json.dumps(entry, ensure_ascii=False))
        return reply

    async def aclose(self) -> None:
        if self.inner is not None:
            await self.inner.aclose()


def _append_line(path: Path, line: str) -> None:
    """Append ``line`` in one unbuffered write to a file opened for appending, so concurrent
    writers never interleave within a line. A last line cut short by a killed run is ended
    first, or this line would join it and be lost with it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = line.encode("utf-8") + b"\n"
    with path.open("a+b", buffering=0) as handle:
        if handle.seek(0, os.SEEK_END) > 0:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                data = b"\n" + data
        handle.write(data)


def _wire(reply: ChatReply) -> dict[str, Any]:
    data = asdict(reply)
    data["calls"] = [asdict(call) for call in reply.calls]
    return data


def _reply(data: dict[str, Any]) -> ChatReply:
    calls = tuple(FunctionCall(**call) for call in data.get("calls", ()))
    return ChatReply(**{**data, "calls": calls})
