"""A plain (not streamed) ``POST /v1/ask`` whose client goes away, over real HTTP on 127.0.0.1
(uvicorn in the test's loop, ``server_support.live``): the question stops, as a streamed one
does, instead of running its tools and model calls to the end for nobody; nothing is stored for
the round, and the access log counts the request as 499.

The tools are async and wait at a gate the test holds (``server_support.gated``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from orchestration_kit import plugin_of
from server_support.gated import Gate, Slow, SlowReply
from server_support.live import serving
from toolwire import App
from toolwire.registry import DomainSpec
from toolwire.server.questions import until_the_client_leaves
from toolwire.sessions import MemorySessionStore
from toolwire.testing import ScriptedModel

SPEC = DomainSpec(name="demo", description="Slow things (test domain).")


def load(tmp_path: Path, store: MemorySessionStore) -> App:
    config = tmp_path / "toolwire.yaml"
    config.write_text(json.dumps({"default_domain": "demo", "sessions": {"store": "memory"}}))
    model = (
        ScriptedModel()
        .on_suitability(lambda prompt, _names: ["slowreply" if "reply" in prompt else "slow"])
        .on_answer(lambda _question, contexts: " ".join(c.context for c in contexts))
    )
    return App.load(
        config,
        llm=model,
        plugins=[plugin_of(SPEC, Slow, SlowReply)],
        load_entry_points=False,
        session_store=store,
    )


async def leave_at(gate: Gate, client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> None:
    """Post ``body`` and close the connection once the question has reached ``gate``."""
    request = asyncio.create_task(client.post(f"{url}/v1/ask", json=body))
    await asyncio.wait_for(gate.reached.wait(), 5)
    request.cancel()  # httpx closes the connection
    with pytest.raises(asyncio.CancelledError):
        await request


@pytest.mark.usefixtures("info_logs")
async def test_a_plain_question_whose_client_goes_away_is_cancelled(tmp_path: Path) -> None:
    store = MemorySessionStore()
    app = load(tmp_path, store)
    slow = app.tool("slow")
    assert isinstance(slow, Slow)
    with capture_logs() as logs:
        async with serving(app) as url, httpx.AsyncClient(timeout=10) as client:
            await leave_at(slow.gate, client, url, {"message": "slow please"})
            await slow.gate.until_cancelled()
            slow.gate.release.set()  # too late: nothing waits there any more
            await asyncio.sleep(0.1)
    await app.aclose()

    assert slow.gate.cancelled and not slow.gate.finished
    assert store._rows == {}  # the question it would have asked is not kept
    events = [entry["event"] for entry in logs]
    assert "request_abandoned" in events and "question_answered" not in events
    (access,) = [entry for entry in logs if entry["event"] == "http_request"]
    assert (access["path"], access["status"]) == ("/v1/ask", 499)


async def test_a_plain_reply_whose_client_goes_away_leaves_the_conversation_waiting(
    tmp_path: Path,
) -> None:
    store = MemorySessionStore()
    app = load(tmp_path, store)
    tool = app.tool("slowreply")
    assert isinstance(tool, SlowReply)
    async with serving(app) as url, httpx.AsyncClient(timeout=10) as client:
        asked = await client.post(f"{url}/v1/ask", json={"message": "a slow reply"})
        session_id = asked.json()["session_id"]
        before = await store.load(session_id)
        reply = {"message": "the red one", "session_id": session_id}
        await leave_at(tool.gate, client, url, reply)
        await tool.gate.until_cancelled()
        after = await store.load(session_id)
        tool.gate.release.set()  # the reply sent again is answered
        answered = await client.post(f"{url}/v1/ask", json=reply)
    await app.aclose()

    assert asked.json()["kind"] == "clarification"
    assert after.version == before.version  # the dropped round stored nothing
    assert answered.status_code == 200, answered.text
    assert answered.json()["text"] == "Done with the red one."


async def test_a_connection_that_fails_to_read_stops_the_work_and_raises_its_error() -> None:
    """The other way out of ``until_the_client_leaves``: reading the connection raises. The
    error is the caller's to see, and the work is cancelled and waited for, not left running."""
    started, cancelled = asyncio.Event(), False

    async def work() -> str:
        nonlocal cancelled
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled = True
            raise
        return "answer"

    async def broken_receive() -> Any:
        await started.wait()
        raise OSError("connection reset")

    with pytest.raises(OSError, match="connection reset"):
        await until_the_client_leaves(broken_receive, work())
    assert cancelled  # already, when the error reaches the caller
