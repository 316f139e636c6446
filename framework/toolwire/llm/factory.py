"""Which model toolwire talks to: the provider ``llm.provider`` names, built by its factory
with the model's profile.

Providers are registered through the ``register_models`` hook; toolwire's own two, ``openai``
and ``embedded``, register through the same hook (:mod:`toolwire.llm.providers`). Without
``llm.provider``: ``openai`` when a base URL or an API key is set, else ``embedded``. Profiles
are registered through ``register_model_profiles`` (:mod:`toolwire.llm.profiles`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from toolwire.errors import ConfigError
from toolwire.llm.base import LanguageModel
from toolwire.llm.profiles import ModelProfile, ProfileError, part_limit_problem, resolve_profile
from toolwire.llm.providers import EMBEDDED, OPENAI
from toolwire.settings import ENV_BASE_URL, ENV_MODEL, LLMSettings

if TYPE_CHECKING:
    from toolwire.plugins import ModelProfileRegistration, ModelProvider


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


def profiled_model_name(settings: LLMSettings, environ: Mapping[str, str]) -> str:
    """The name a profile's ``models`` patterns are matched against: the embedded model's
    (``llm.local_model``) when the embedded provider serves it, else ``llm.model`` ("" when not
    set: the server's first model, unknown until the first call)."""
    if provider_name(settings, environ) == EMBEDDED:
        return settings.local_model
    return settings.model or ""


def profile_order(registered: Mapping[str, ModelProfileRegistration]) -> dict[str, ModelProfile]:
    """The registered profiles in the order their ``models`` patterns are tried: the plugins'
    before toolwire's own (a plugin's profile for one model beats a built-in family pattern)."""
    from toolwire.plugins import BUILTIN_PLUGIN_NAME

    ordered = sorted(registered.values(), key=lambda each: each.plugin == BUILTIN_PLUGIN_NAME)
    return {each.name: each.value for each in ordered}


def model_profile(
    settings: LLMSettings | None = None,
    environ: Mapping[str, str] | None = None,
    profiles: Mapping[str, ModelProfileRegistration] | None = None,
) -> ModelProfile:
    """The profile ``llm.profile`` resolves to for the configured model (``ConfigError`` for
    an unknown name, an invalid trait, or ``llm.max_part_tokens`` beyond its window).
    ``profiles``: the registered ones (``App.model_profiles``); by default the built-in ones."""
    env = os.environ if environ is None else environ
    resolved = resolve_settings(settings or LLMSettings(), env)
    if profiles is None:
        from toolwire.plugins import discover

        profiles = discover(load_entry_points=False).model_profiles
    model = profiled_model_name(resolved, env)
    try:
        profile = resolve_profile(resolved.profile, model, profile_order(profiles))
    except ProfileError as error:
        raise ConfigError(str(error)) from None
    problem = part_limit_problem(resolved.max_part_tokens, profile)
    if problem is not None:
        raise ConfigError(problem)
    return profile


def create_language_model(
    settings: LLMSettings | None = None,
    environ: Mapping[str, str] | None = None,
    providers: Mapping[str, ModelProvider] | None = None,
    profile: ModelProfile | None = None,
) -> LanguageModel:
    """The model of the configured provider; nothing is started or contacted before the first
    call. ``providers``: the registered ones (``App.model_providers``); by default the built-in
    ones, found through the same hook. ``profile``: the model's (``App.model_profile``); by
    default the one :func:`model_profile` resolves from the built-in profiles."""
    env = os.environ if environ is None else environ
    resolved = resolve_settings(settings or LLMSettings(), env)
    from toolwire.plugins import built_by, discover

    if providers is None:
        providers = discover(load_entry_points=False).models
    name = provider_name(resolved, env)
    if name not in providers:
        raise ConfigError(unknown_provider(name, providers))
    if profile is None:
        profile = model_profile(resolved, env)
    return built_by(providers[name], "model", LanguageModel, resolved, env, profile)


def unknown_provider(name: str, providers: Mapping[str, ModelProvider]) -> str:
    """The message for an ``llm.provider`` no plugin registered."""
    known = ", ".join(sorted(providers)) or "none"
    return (
        f"llm.provider: unknown model provider {name!r}; registered: {known} (a plugin adds one "
        "with the register_models hook, docs/plugins.md)"
    )
