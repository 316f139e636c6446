"""A fake OpenAI-compatible model server (``toolwire.testing.FakeOpenAIServer``) on its own event
loop thread, for tests whose server process talks to a real gateway."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from toolwire.testing.fake_openai import FakeOpenAIServer, Responder


@contextmanager
def fake_model_in_thread(responder: Responder) -> Iterator[FakeOpenAIServer]:
    """The server, started on 127.0.0.1; stopped (and its loop with it) afterwards."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fake-model", daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(FakeOpenAIServer(responder).start(), loop).result(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.aclose(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
