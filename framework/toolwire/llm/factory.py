"""Which model toolwire talks to: a configured OpenAI-compatible server, or the embedded one."""

from __future__ import annotations

import os
from collections.abc import Mapping

from toolwire.errors import ConfigError
from toolwire.llm.base import LanguageModel
from toolwire.llm.gateway import OpenAIGateway
from toolwire.llm.local import MODEL_NAME, LocalModelServer
from toolwire.settings import LLMSettings

ENV_BASE_URL = "TOOLWIRE_LLM_BASE_URL"
ENV_MODEL = "TOOLWIRE_LLM_MODEL"

_local_servers: dict[int, LocalModelServer] = {}


def resolve_settings(
    settings: LLMSettings, environ: Mapping[str, str] | None = None
) -> LLMSettings:
    """The settings with ``TOOLWIRE_LLM_BASE_URL`` and ``TOOLWIRE_LLM_MODEL`` applied."""
    env = os.environ if environ is None else environ
    updates: dict[str, str] = {}
    if env.get(ENV_BASE_URL):
        updates["base_url"] = env[ENV_BASE_URL]
    if env.get(ENV_MODEL):
        updates["model"] = env[ENV_MODEL]
    return settings.model_copy(update=updates)


def local_server(n_ctx: int) -> LocalModelServer:
    """The process's embedded model server for this window size (started at its first use)."""
    if n_ctx not in _local_servers:
        _local_servers[n_ctx] = LocalModelServer(n_ctx=n_ctx)
    return _local_servers[n_ctx]


def create_language_model(
    settings: LLMSettings | None = None, environ: Mapping[str, str] | None = None
) -> LanguageModel:
    """A gateway to the configured server, or to the embedded model when neither a base URL nor
    an API key is configured. Nothing is started or contacted until the first call."""
    env = os.environ if environ is None else environ
    resolved = resolve_settings(settings or LLMSettings(), env)
    api_key = env.get(resolved.api_key_env) or None
    if resolved.base_url is None and api_key is None:
        server = local_server(resolved.context_window_tokens)
        return OpenAIGateway(
            resolved,
            model=resolved.model or MODEL_NAME,
            base_url_provider=server.ensure_started,
            structured_output="json_object",
            # llama-cpp-python's server evaluates one request at a time: queueing more only
            # lets the last ones run into the client timeout.
            per_tool_concurrency=1,
            on_close=server.aclose,
        )
    if resolved.base_url is None and resolved.model is None:
        raise ConfigError(
            f"an API key is set in {resolved.api_key_env} but no model is configured; set "
            f"{ENV_MODEL} (or llm.model in toolwire.yaml), or set {ENV_BASE_URL} to your server"
        )
    return OpenAIGateway(resolved, api_key=api_key)
