"""Which model toolwire talks to: the provider ``llm.provider`` names, built by its factory.

Providers are registered through the ``register_models`` hook; toolwire's own two, ``openai``
and ``embedded``, register through the same hook (:mod:`toolwire.llm.providers`). Without
``llm.provider``: ``openai`` when a base URL or an API key is set, else ``embedded``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from toolwire.errors import ConfigError
from toolwire.llm.base import LanguageModel
from toolwire.llm.providers import EMBEDDED, OPENAI
from toolwire.settings import ENV_BASE_URL, ENV_MODEL, LLMSettings

if TYPE_CHECKING:
    from toolwire.plugins import ModelProvider

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


def provider_name(settings: LLMSettings, environ: Mapping[str, str]) -> str:
    """``llm.provider``, else ``openai`` with a base URL or an API key, else ``embedded``."""
    if settings.provider is not None:
        return settings.provider
    if settings.base_url is not None or environ.get(settings.api_key_env):
        return OPENAI
    return EMBEDDED


def create_language_model(
    settings: LLMSettings | None = None,
    environ: Mapping[str, str] | None = None,
    providers: Mapping[str, ModelProvider] | None = None,
) -> LanguageModel:
    """The model of the configured provider; nothing is started or contacted before the first
    call. ``providers``: the registered ones (``App.model_providers``); by default the built-in
    ones, found through the same hook."""
    env = os.environ if environ is None else environ
    resolved = resolve_settings(settings or LLMSettings(), env)
    from toolwire.plugins import built_by, discover

    if providers is None:
        providers = discover(load_entry_points=False).models
    name = provider_name(resolved, env)
    if name not in providers:
        raise ConfigError(unknown_provider(name, providers))
    return built_by(providers[name], "model", LanguageModel, resolved, env)


def unknown_provider(name: str, providers: Mapping[str, ModelProvider]) -> str:
    """The message for an ``llm.provider`` no plugin registered."""
    known = ", ".join(sorted(providers)) or "none"
    return (
        f"llm.provider: unknown model provider {name!r}; registered: {known} (a plugin adds one "
        "with the register_models hook, docs/plugins.md)"
    )
