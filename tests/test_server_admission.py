"""``server.max_concurrent_questions`` over real HTTP on 127.0.0.1: past the limit ``POST /v1/ask``
is 503 ``busy`` with ``Retry-After`` at once; a place comes back when a question ends, however it
ends (answered, streamed to its end, its client gone)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from orchestration_kit import plugin_of
from server_support.gated import Gated, holding
from server_support.live import serving, sse_messages
from toolwire import App
from toolwire.registry import DomainSpec
from toolwire.settings import ServerSettings
from toolwire.testing import ScriptedModel

LIMIT = 2
FREE = {"message": "a free question"}
"""A question no tool holds."""


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[tuple[Gated, str]]:
    config = tmp_path / "toolwire.yaml"
    config.write_text(json.dumps({"default_domain": "demo", "sessions": {"store": "memory"}}))
    model = (
        ScriptedModel()
        .on_suitability(lambda prompt, names: [] if "free" in prompt else ["gated"])
        .on_gatekeeper(True)
        .on_answer(lambda question, contexts: " ".join(c.context for c in contexts) or "free")
    )
    spec = DomainSpec(name="demo", description="Questions held at a gate (test domain).")
    app = App.load(config, llm=model, plugins=[plugin_of(spec, Gated)], load_entry_points=False)
    gated = app.tool("gated")
    assert isinstance(gated, Gated)
    async with serving(app, ServerSettings(max_concurrent_questions=LIMIT)) as url:
        yield gated, url
    await app.aclose()


async def test_past_the_limit_a_question_is_503_busy_at_once_and_a_place_comes_back(
    live: tuple[Gated, str],
) -> None:
    gated, url = live
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        held = [
            asyncio.create_task(client.post("/v1/ask", json={"message": f"question {n}"}))
            for n in range(LIMIT)
        ]
        await holding(gated, LIMIT)

        refused = await client.post("/v1/ask", json={"message": "one too many"})
        streamed = await client.post("/v1/ask", json={"message": "streamed", "stream": True})
        health, tools = await client.get("/healthz"), await client.get("/v1/tools")

        gated.gate.set()
        answered = await asyncio.gather(*held)
        after = await client.post("/v1/ask", json={"message": "now there is room"})

    for response in (refused, streamed):
        assert response.status_code == 503
        assert response.headers["retry-after"] == "5"
        assert response.headers["content-type"] == "application/json"
        body = response.json()
        assert body["error"] == "busy"
        assert body["message"] == (
            "the server is answering 2 questions, its limit (server.max_concurrent_questions: "
            "2); send the question again in 5 s, or raise the limit if the model keeps up"
        )
        assert body["details"] == {"in_flight": 2, "limit": 2, "retry_after_s": 5}
        assert body["request_id"] == response.headers["x-request-id"]
    assert (health.status_code, tools.status_code) == (200, 200)  # only questions are counted
    assert [response.status_code for response in answered] == [200, 200]
    assert after.status_code == 200 and after.json()["text"] == "answered: now there is room"


async def test_a_streamed_question_holds_its_place_until_its_client_goes_away(
    live: tuple[Gated, str],
) -> None:
    gated, url = live
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        plain = asyncio.create_task(client.post("/v1/ask", json={"message": "plain"}))
        async with client.stream(
            "POST", "/v1/ask", json={"message": "streamed", "stream": True}
        ) as stream:
            async for message in sse_messages(stream):
                if message.event == "tool_started":
                    break
            await holding(gated, LIMIT)
            refused = await client.post("/v1/ask", json={"message": "one too many"})
        # its client went away: the streamed question is cancelled, and its place is free
        await holding(gated, 1)
        async with asyncio.timeout(10):  # the response ends just after the question
            while (admitted := await client.post("/v1/ask", json=FREE)).status_code == 503:
                await asyncio.sleep(0.01)
        gated.gate.set()
        answered = await plain

    assert refused.status_code == 503
    assert admitted.status_code == 200 and admitted.json()["text"] == "free"
    assert answered.status_code == 200
