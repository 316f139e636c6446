"""toolwire's own model profiles, registered through ``register_model_profiles`` like a plugin's.

* ``general``: a model no profile names (an OpenAI-compatible server's model): structured output
  by JSON schema with a fallback to a forced function call, limits that fit any answer, and
  ``decisive_words`` before the choice (a question whose words point at one tool costs one
  call less, where every call is paid for; bench/selection/LOG.md);
* ``embedded``: the embedded Qwen2.5-Coder 0.5B and 1.5B (:mod:`toolwire.llm.local`): JSON
  schema (llama.cpp makes it a grammar), limits sized for a laptop CPU, their server's window,
  and the next turn's prompt warmed while the user reads (``prefix_warming``).
"""

from __future__ import annotations

from toolwire.hookspecs import RegisterModelProfile, hookimpl
from toolwire.llm.profiles import GENERAL, CompletionLimits, ModelProfile

EMBEDDED = "embedded"

GENERAL_PROFILE = ModelProfile(
    selection_steps=("retrieve", "decisive_words", "choose", "confirm"),
)

EMBEDDED_PROFILE = ModelProfile(
    # the two sizes toolwire embeds, wherever they are served; a larger Qwen2.5-Coder on a GPU
    # server gets ``general``'s limits
    models=("qwen2.5-coder-0.5b*", "qwen2.5-coder-1.5b*"),
    structured_output="json_schema",
    # a laptop CPU writes slowly: at the general limits a long answer runs past the call
    # timeout, so the answers that may run long are capped lower
    completion_limits=CompletionLimits(
        classification=128, decomposition=256, gatekeeper=128, answer=384, compression=512
    ),
    context_window_tokens=8192,
    # its own server on the user's machine: idle between turns, and a prompt cache to warm
    prefix_warming=True,
)


@hookimpl
def register_model_profiles(register: RegisterModelProfile) -> None:
    """The two built-in profiles."""
    register(GENERAL, GENERAL_PROFILE)
    register(EMBEDDED, EMBEDDED_PROFILE)
