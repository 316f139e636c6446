"""Which model toolwire talks to: a configured OpenAI-compatible server, or the embedded one."""

from __future__ import annotations

import os
from collections.abc import Mapping

from toolwire.errors import ConfigError
from toolwire.llm.base import LanguageModel
from toolwire.llm.gateway import OpenAIGateway
from toolwire.llm.local import LocalModelServer, LocalModelSpec, local_model_spec
from toolwire.settings import LLMSettings

ENV_BASE_URL = "TOOLWIRE_LLM_BASE_URL"
ENV_MODEL = "TOOLWIRE_LLM_MODEL"

_local_servers: dict[tuple[str, int, int | None, int], LocalModelServer] = {}


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


def local_server(settings: LLMSettings) -> LocalModelServer:
    """The process's embedded model server for these settings (started at its first use)."""
    key = (
        settings.local_model,
        settings.context_window_tokens,
        settings.local_threads,
        settings.local_prompt_cache_mib,
    )
    if key not in _local_servers:
        _local_servers[key] = LocalModelServer(
            local_model_spec(settings.local_model),
            n_ctx=settings.context_window_tokens,
            threads=settings.local_threads,
            cache_mib=settings.local_prompt_cache_mib,
        )
    return _local_servers[key]


def with_model_limits(settings: LLMSettings, spec: LocalModelSpec) -> LLMSettings:
    """The settings with the model's completion limits where the configuration sets none."""
    limits = settings.max_completion_tokens
    defaults = {
        purpose: limit
        for purpose, limit in spec.completion_limits.items()
        if purpose not in limits.model_fields_set
    }
    return settings.model_copy(
        update={"max_completion_tokens": limits.model_copy(update=defaults)}
    )


def create_language_model(
    settings: LLMSettings | None = None, environ: Mapping[str, str] | None = None
) -> LanguageModel:
    """A gateway to the configured server, or to the embedded model when neither a base URL nor
    an API key is configured. Nothing is started or contacted until the first call."""
    env = os.environ if environ is None else environ
    resolved = resolve_settings(settings or LLMSettings(), env)
    api_key = env.get(resolved.api_key_env) or None
    if resolved.base_url is None and api_key is None:
        server = local_server(resolved)
        resolved = with_model_limits(resolved, server.spec)
        return OpenAIGateway(
            resolved,
            model=resolved.model or server.spec.name,
            base_url_provider=server.ensure_started,
            structured_output="json_schema",
            # The embedded server has one slot (so that every call reuses its KV cache): queueing
            # more only lets the last ones run into the client timeout.
            per_tool_concurrency=1,
            on_close=server.aclose,
        )
    if resolved.base_url is None and resolved.model is None:
        raise ConfigError(
            f"an API key is set in {resolved.api_key_env} but no model is configured; set "
            f"{ENV_MODEL} (or llm.model in toolwire.yaml), or set {ENV_BASE_URL} to your server"
        )
    return OpenAIGateway(resolved, api_key=api_key)
