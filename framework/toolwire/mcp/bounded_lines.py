"""The stdio transport's messages, read in linear time and bounded in size.

The SDK's stdio client reads a server's stdout through the incremental decoder of the
``encoding`` named in ``StdioServerParameters``, then splits the text into lines, one JSON-RPC
message each. That decoder is the one place where toolwire stands between the pipe and the SDK,
so toolwire registers a codec for it (:func:`bounded_encoding`), UTF-8 with two rules:

- **whole lines only.** The decoder gathers a line's bytes and decodes them once, at its end.
  The SDK joins what it holds with every 64 KiB piece it gets (``buffer + chunk``), so a message
  of n bytes cost it n²/64 KiB of copying (10 MB of text, a 20 MB message, took 3.7 s; 50 MB ran
  past the 30 s timeout); whole lines cost it one split each.
- **at most ``limit`` bytes a message.** Past the limit the rest of the line is counted and
  dropped, and at its end the SDK gets instead a JSON-RPC error answering the same request:
  its ``id`` is found at the head of the line (where the Python, Go and Rust SDKs write it) or
  at its tail (the TypeScript SDK), and its data says how big the message was
  (:func:`too_large`). The call fails at once, and the connection stays usable. A message too
  large that answers no request (a notification, a request of the server's) is dropped with a
  warning.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from functools import cache, partial
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

log = structlog.get_logger(__name__)

CODEC_PREFIX = "toolwire_mcp_lines_"
EDGE_BYTES = 256
"""How much of a message's head and tail is kept to find its ``id``."""
TOO_LARGE_KEY = "toolwire_message_too_large"
"""The key of the error data that marks toolwire's own answer to a message too large."""
TOO_LARGE_CODE = -32099
"""A JSON-RPC server error code (the range -32000..-32099 is the implementation's)."""

_RESPONSE_HEAD = re.compile(rb'\s*\{[^{\[]*?"(?:result|error)"\s*:')
_ID = rb'(-?\d+|"(?:[^"\\]|\\.)*")'
_ID_AT_HEAD = re.compile(rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID)
_ID_AT_TAIL = re.compile(rb'"id"\s*:\s*' + _ID + rb"\s*\}\s*$")


@dataclass(frozen=True)
class TooLarge:
    """A message refused: its size (None: it was not read to its end) and the limit, in bytes."""

    size: int | None
    limit: int


def bounded_encoding(limit: int) -> str:
    """The name of the codec that reads messages of at most ``limit`` bytes."""
    _register()
    return f"{CODEC_PREFIX}{limit}"


@cache
def _register() -> None:
    codecs.register(_search)


def too_large(data: Any) -> TooLarge | None:
    """The refused message behind an MCP error's data, if the data is toolwire's."""
    details = data.get(TOO_LARGE_KEY) if isinstance(data, dict) else None
    if not isinstance(details, dict):
        return None
    size, limit = details.get("bytes"), details.get("limit")
    if (size is None or isinstance(size, int)) and isinstance(limit, int):
        return TooLarge(size=size, limit=limit)
    return None


def refusal(request_id: int | str, refused: TooLarge) -> str:
    """toolwire's JSON-RPC error answering request ``request_id`` in place of a message too
    large (:func:`too_large` reads its data back)."""
    of_size = "" if refused.size is None else f" of {refused.size:,} bytes"
    error = {
        "code": TOO_LARGE_CODE,
        "message": f"the server's answer{of_size} is over the limit of {refused.limit:,} bytes "
        "(max_result_bytes)",
        "data": {TOO_LARGE_KEY: {"bytes": refused.size, "limit": refused.limit}},
    }
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})


def _search(name: str) -> codecs.CodecInfo | None:
    if not name.startswith(CODEC_PREFIX) or not name[len(CODEC_PREFIX) :].isdigit():
        return None
    utf8 = codecs.lookup("utf-8")
    return codecs.CodecInfo(
        name=name,
        encode=utf8.encode,
        decode=utf8.decode,
        incrementalencoder=utf8.incrementalencoder,
        incrementaldecoder=partial(BoundedLineDecoder, limit=int(name[len(CODEC_PREFIX) :])),
    )


class BoundedLineDecoder(codecs.IncrementalDecoder):
    """UTF-8, whole lines at a time, each of at most ``limit`` bytes (see the module docstring)."""

    def __init__(self, errors: str = "strict", *, limit: int) -> None:
        super().__init__(errors)
        self.limit = limit
        self._pieces: list[bytes] = []
        self._size = 0
        self._head = b""
        self._tail = b""
        self._over = False

    def reset(self) -> None:
        self._pieces, self._size, self._head, self._tail, self._over = [], 0, b"", b"", False

    def decode(self, input: ReadableBuffer, final: bool = False) -> str:
        data = bytes(input)
        lines: list[str] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._take(data[start:end])
            line = self._line()
            if line is not None:
                lines.append(line + "\n")
            start = end + 1
        self._take(data[start:])
        if final and self._size:
            lines.append(self._line() or "")
        return "".join(lines)

    def _take(self, piece: bytes) -> None:
        if not piece:
            return
        if len(self._head) < EDGE_BYTES:
            self._head += piece[: EDGE_BYTES - len(self._head)]
        self._size += len(piece)
        if self._over:
            self._tail = (self._tail + piece[-EDGE_BYTES:])[-EDGE_BYTES:]
            return
        self._pieces.append(piece)
        if self._size > self.limit:
            self._tail = b"".join(self._pieces)[-EDGE_BYTES:]
            self._pieces, self._over = [], True

    def _line(self) -> str | None:
        """The line gathered so far (None: a message too large that answers no request)."""
        if self._over:
            text = self._refusal()
        else:
            text = b"".join(self._pieces).decode("utf-8", self.errors)
        self.reset()
        return text

    def _refusal(self) -> str | None:
        request_id = _request_id(self._head, self._tail)
        if request_id is None or not _RESPONSE_HEAD.match(self._head):
            log.warning(
                "mcp_message_dropped", bytes=self._size, limit=self.limit, head=self._head[:80]
            )
            return None
        return refusal(request_id, TooLarge(size=self._size, limit=self.limit))


def _request_id(head: bytes, tail: bytes) -> int | str | None:
    """The ``id`` of a message from its first and last bytes (None: not found)."""
    found = _ID_AT_HEAD.match(head) or _ID_AT_TAIL.search(tail)
    try:
        request_id = json.loads(found.group(1)) if found else None
    except ValueError:  # a string with an escape JSON does not have
        return None
    return request_id if isinstance(request_id, int | str) else None
