"""The embedded provider's model: the OpenAI-compatible gateway over the local llama.cpp server,
which can be started and warmed up before the first question (:meth:`EmbeddedModel.warm_up`).

Its :class:`~toolwire.llm.local.LocalModelServer` starts a server of its own at the first call,
unless a ``toolwire model serve`` server with the same model, window and threads is running
(:mod:`toolwire.llm.model_service`): then every call goes there, and closing the model leaves it
running.
"""

from __future__ import annotations

import time

import structlog

from toolwire.llm.gateway import OpenAIGateway
from toolwire.llm.guard import ensure_model_requests_allowed
from toolwire.llm.local import LocalModelServer
from toolwire.llm.profiles import ModelProfile
from toolwire.settings import LLMSettings

log = structlog.get_logger(__name__)


class EmbeddedModel(OpenAIGateway):
    """:class:`OpenAIGateway` over the embedded model's server (``server``), one call at a time."""

    def __init__(self, settings: LLMSettings, profile: ModelProfile, server: LocalModelServer):
        super().__init__(
            settings,
            profile=profile,
            model=settings.model or server.spec.name,
            base_url_provider=server.ensure_started,
            # The embedded server has one slot (so that every call reuses its KV cache): calls
            # queue here, not in the server, where their timeout would run while they wait.
            concurrency=1,
            on_close=server.aclose,
        )
        self.server = server
        self._warmed: str | None = None
        """The server address the warm-up reached (a later warm-up there is skipped)."""

    async def warm_up(self) -> None:
        """Start the server now (or find a running ``toolwire model serve`` one) and have it read
        toolwire's fixed system text, so that the first question pays neither; App.start_model
        calls it (``toolwire serve``, ``toolwire chat``). A ``model serve`` server was warmed
        when it started."""
        from toolwire.llm.model_service import warm_up

        ensure_model_requests_allowed("warm_up")
        started = time.perf_counter()
        async with self._slots:  # a question that came first goes first
            base_url = await self.server.ensure_started()
            if self.server.shared is None and self._warmed != base_url:
                await warm_up(base_url, self.requested_model())
                self._warmed = base_url
        seconds = round(time.perf_counter() - started, 2)
        log.info("model_started", base_url=base_url, seconds=seconds)
