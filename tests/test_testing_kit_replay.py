"""toolwire.testing.replay: a recording survives a line damaged by a run killed mid-write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolwire.errors import ModelError
from toolwire.llm.transport import ChatReply, ChatRequest
from toolwire.testing.replay import ReplayTransport, request_key


def _request(prompt: str) -> ChatRequest:
    return ChatRequest(
        purpose="answer",
        messages=[{"role": "user", "content": prompt}],
        schema=None,
        max_tokens=64,
        timeout_s=5.0,
    )


def _line(prompt: str, text: str) -> str:
    reply = {"text": text, "model": "recorded", "calls": []}
    entry = {"key": request_key(_request(prompt)), "purpose": "answer", "reply": reply}
    return json.dumps(entry) + "\n"


class _Model:
    """The model a recording run asks: it answers every prompt with its upper-case text."""

    async def send(self, request: ChatRequest) -> ChatReply:
        return ChatReply(text=str(request.messages[-1]["content"]).upper(), model="live")

    async def aclose(self) -> None:
        return None


async def test_a_damaged_line_is_skipped_with_a_warning_naming_file_and_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "replies.jsonl"
    path.write_text(_line("hello", "recorded hello") + '{"key":"ab', encoding="utf-8")

    with pytest.warns(UserWarning) as warned:
        transport = ReplayTransport(path)

    [message] = [str(warning.message) for warning in warned]
    assert message.startswith(f"{path}:2: skipped a line that is not a recorded reply (")
    assert message.endswith("); its prompt has no reply until it is recorded again")
    assert (await transport.send(_request("hello"))).text == "recorded hello"
    with pytest.raises(ModelError, match="no recorded reply for this answer prompt"):
        await transport.send(_request("lost"))


async def test_recording_after_a_damaged_line_keeps_the_new_reply(tmp_path: Path) -> None:
    path = tmp_path / "replies.jsonl"
    path.write_text(_line("hello", "recorded hello") + '{"key":"ab', encoding="utf-8")
    with pytest.warns(UserWarning):
        recorder = ReplayTransport(path, inner=_Model())

    assert (await recorder.send(_request("lost"))).text == "LOST"

    with pytest.warns(UserWarning, match=":2: skipped") as warned:
        replay = ReplayTransport(path)
    assert len(warned) == 1
    assert (await replay.send(_request("lost"))).text == "LOST"
    damaged, recorded = path.read_text("utf-8").splitlines()[1:]
    assert damaged == '{"key":"ab'
    assert json.loads(recorded)["key"] == request_key(_request("lost"))
