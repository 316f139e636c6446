"""The stdio transport's decoder (toolwire.mcp.bounded_lines): whole lines, each bounded.

End to end, with a real server: tests/test_mcp_consume.py (``max_result_bytes``).
"""

from __future__ import annotations

import codecs
import json

import pytest
from structlog.testing import capture_logs

from toolwire.mcp.bounded_lines import TooLarge, bounded_encoding, too_large

LIMIT = 100
BIG = "y" * 300


def decoded(*chunks: bytes, limit: int = LIMIT) -> list[str]:
    """What the SDK reads from these chunks of stdout: one string per chunk."""
    decoder = codecs.getincrementaldecoder(bounded_encoding(limit))(errors="strict")
    return [decoder.decode(chunk) for chunk in chunks]


def refusal(line: str) -> tuple[object, TooLarge | None]:
    message = json.loads(line)
    return message["id"], too_large(message["error"]["data"])


def test_lines_reach_the_sdk_whole_however_the_pipe_cuts_them() -> None:
    text = '{"a": "é"}\n{"b": 2}\n'.encode()
    cut = text.index("é".encode()) + 1  # inside the two bytes of é
    assert decoded(text[:3], text[3:cut], text[cut:]) == ["", "", '{"a": "é"}\n{"b": 2}\n']


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 7, "result": {"text": BIG}},  # Python, Go, Rust: the id first
        {"result": {"text": BIG}, "jsonrpc": "2.0", "id": "call-7"},  # TypeScript: the id last
        {"jsonrpc": "2.0", "id": 7, "error": {"code": 1, "message": BIG}},
    ],
)
def test_a_message_over_the_limit_becomes_an_error_answering_its_request(
    message: dict[str, object],
) -> None:
    line = json.dumps(message, separators=(",", ":")).encode() + b"\n"
    chunks = [line[i : i + 64] for i in range(0, len(line), 64)]
    *gathering, answer, following = decoded(*chunks, b'{"next": 1}\n')
    assert gathering == [""] * (len(chunks) - 1)
    assert answer.endswith("}\n") and answer.count("\n") == 1
    assert refusal(answer) == (message["id"], TooLarge(size=len(line) - 1, limit=LIMIT))
    assert following == '{"next": 1}\n'  # the stream goes on with the next message


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": BIG}},
        {"jsonrpc": "2.0", "id": 3, "method": "sampling/createMessage", "params": {"x": BIG}},
    ],
)
def test_a_message_over_the_limit_that_answers_no_request_is_dropped_and_logged(
    message: dict[str, object],
) -> None:
    line = json.dumps(message).encode() + b"\n"
    with capture_logs() as logs:
        assert decoded(line, b"{}\n") == ["", "{}\n"]
    assert [(log["event"], log["bytes"]) for log in logs] == [
        ("mcp_message_dropped", len(line) - 1)
    ]


def test_the_limit_counts_the_message_not_its_line_end() -> None:
    exactly = b"x" * LIMIT
    assert decoded(exactly + b"\n") == [exactly.decode() + "\n"]


def test_an_unfinished_last_line_is_handed_over_at_the_end_as_before() -> None:
    decoder = codecs.getincrementaldecoder(bounded_encoding(LIMIT))(errors="strict")
    assert decoder.decode(b'{"a"') == ""
    assert decoder.decode(b"", final=True) == '{"a"'


def test_a_message_over_the_limit_with_an_id_json_cannot_read_is_dropped() -> None:
    line = b'{"jsonrpc":"2.0","id":"\\x","result":"' + BIG.encode() + b'"}\n'
    assert decoded(line, b"{}\n") == ["", "{}\n"]


@pytest.mark.parametrize(
    "data",
    [None, {"bytes": 5}, {"toolwire_message_too_large": {"bytes": "x", "limit": 1}}, [1]],
)
def test_too_large_reads_only_toolwires_own_error_data(data: object) -> None:
    """A server's own error data, whatever it holds, is not mistaken for it (nor raises)."""
    assert too_large(data) is None
