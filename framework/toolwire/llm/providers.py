"""toolwire's own model providers, registered through ``register_models`` like a plugin's.

* ``openai``: any OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp's server), the key
  read from the variable ``llm.api_key_env`` names;
* ``embedded``: the local model toolwire starts itself (:mod:`toolwire.llm.local`).

The factories import what they build on first use, so loading the plugins stays quick.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from toolwire.errors import ConfigError
from toolwire.hookspecs import hookimpl
from toolwire.llm.base import LanguageModel
from toolwire.llm.profiles import ModelProfile
from toolwire.settings import ENV_BASE_URL, ENV_MODEL, LLMSettings

if TYPE_CHECKING:
    from toolwire.hookspecs import RegisterModel

OPENAI = "openai"
EMBEDDED = "embedded"


def openai_model(
    settings: LLMSettings, environ: Mapping[str, str], profile: ModelProfile
) -> LanguageModel:
    """The configured OpenAI-compatible server (``base_url``; none: OpenAI itself)."""
    from toolwire.llm.gateway import OpenAIGateway

    if (problem := openai_settings_problem(settings)) is not None:
        raise ConfigError(problem)
    api_key = environ.get(settings.api_key_env) or None
    return OpenAIGateway(settings, profile=profile, api_key=api_key)


def openai_settings_problem(settings: LLMSettings) -> str | None:
    """Why the ``openai`` provider cannot serve with ``settings`` (None: it can): it needs a
    server (``base_url``) or, for OpenAI itself, a model name. Not named in ``llm.provider``,
    it was chosen by the API key in the environment (no ``base_url``): said, with how to keep
    the embedded model, as a key exported for another program is a surprise."""
    if settings.base_url is not None or settings.model is not None:
        return None
    if settings.provider is None:
        return (
            f"the model provider is {OPENAI!r} because {settings.api_key_env} is set, and it has "
            f"no server and no model: set {ENV_MODEL} (or llm.model in toolwire.yaml) for "
            f"OpenAI itself, or set {ENV_BASE_URL} to your server; to keep the embedded model, "
            f"set llm.provider: {EMBEDDED} in toolwire.yaml (or unset {settings.api_key_env})"
        )
    return (
        f"the {OPENAI!r} model provider has no server and no model: set {ENV_MODEL} (or "
        f"llm.model in toolwire.yaml) for OpenAI itself, or set {ENV_BASE_URL} to your server"
    )


def embedded_model(
    settings: LLMSettings, environ: Mapping[str, str], profile: ModelProfile
) -> LanguageModel:
    """The embedded model (``llm.local_model``), started at the first call (or by its
    ``warm_up``) with the profile's context window, or a running ``toolwire model serve`` server
    with the same settings; ConfigError at once when this install cannot run it."""
    from toolwire.llm.embedded_model import EmbeddedModel
    from toolwire.llm.local import local_server

    server = local_server(settings, profile.context_window_tokens)
    server.check_installed()
    return EmbeddedModel(settings, profile, server)


@hookimpl
def register_models(register: RegisterModel) -> None:
    """The two built-in providers."""
    register(OPENAI, openai_model)
    register(EMBEDDED, embedded_model)
