"""Test doubles for toolwire and its plugins, shipped as public API.

- :class:`ScriptedModel`: a language model scripted by the *purpose* of each call.
- :func:`block_model_requests`: make every real model request an error.
- :class:`ToolConformance`: a mixin of checks every tool class must pass.
- :class:`FakeOpenAIServer`: an OpenAI-compatible server on 127.0.0.1 answering from a script.
- :func:`ask_embedded_model`: ``toolwire ask --json`` on the embedded model, end to end.
- :func:`conversation_for`, :func:`orchestrator_for`, :func:`registry_of`: the real
  orchestrator over tool instances, without plugins or YAML.
- The pytest plugin (``toolwire.testing.pytest_plugin``) adds the fixtures ``scripted_model``,
  ``block_model_requests`` and ``toolwire_app_factory``.
"""

from toolwire.testing.cli import ask_embedded_model
from toolwire.testing.conformance import ToolConformance
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest
from toolwire.testing.guard import block_model_requests
from toolwire.testing.scripted import (
    ScriptedCall,
    ScriptedModel,
    UnscriptedCallError,
    join_contexts,
)
from toolwire.testing.wiring import conversation_for, orchestrator_for, registry_of

__all__ = [
    "FakeOpenAIServer",
    "FakeReply",
    "FakeRequest",
    "ScriptedCall",
    "ScriptedModel",
    "ToolConformance",
    "UnscriptedCallError",
    "ask_embedded_model",
    "block_model_requests",
    "conversation_for",
    "join_contexts",
    "orchestrator_for",
    "registry_of",
]
