"""toolwire.testing.fake_openai: a responder that fails makes the test fail with its error."""

from __future__ import annotations

import httpx
import pytest

from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest


def _failing_responder(request: FakeRequest) -> FakeReply:
    raise AssertionError("boom")


async def test_a_responder_that_raises_gets_a_500_and_fails_the_test_at_exit() -> None:
    body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
    failures = iter(["boom", "boom again"])

    def responder(request: FakeRequest) -> FakeReply:
        raise AssertionError(next(failures))

    with pytest.raises(AssertionError, match=r"^boom$"):  # the first failure
        async with FakeOpenAIServer(responder) as server, httpx.AsyncClient() as client:
            url = f"{server.base_url}/chat/completions"
            first = await client.post(url, json=body)
            second = await client.post(url, json=body)

    assert (first.status_code, second.status_code) == (500, 500)
    assert first.json()["error"]["message"] == "the fake server failed: AssertionError: boom"
    assert second.json()["error"]["message"] == (
        "the fake server failed: AssertionError: boom again"
    )


async def test_the_failure_is_raised_once() -> None:
    server = await FakeOpenAIServer(_failing_responder).start()
    async with httpx.AsyncClient(base_url=server.base_url) as client:
        await client.post("/chat/completions", json={"messages": []})

    with pytest.raises(AssertionError, match=r"^boom$"):
        await server.aclose()
    await server.aclose()
