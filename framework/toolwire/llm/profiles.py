"""Model profiles: what is a trait of a model family, not a user's choice.

How structured output is requested, how many tokens each purpose's reply may take, the context
window, whether worked examples help, whether native function calling works, and which
selection steps pay differ between model families, not between users. A
:class:`ModelProfile` holds them; profiles are registered by name through the
``register_model_profiles`` hook (toolwire's own in :mod:`toolwire.llm.builtin_profiles`), and
``llm.profile`` names one, adjusts one (``{base: general, structured_output: tools}``), or is
left out: then the first profile whose ``models`` pattern matches the model is used, a plugin's
before toolwire's own, else ``general``.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolwire.errors import did_you_mean

GENERAL = "general"
"""The profile of a model no profile names."""

DEFAULT_SELECTION_STEPS = ("retrieve", "choose", "confirm")
"""Retrieve candidates, choose by name, confirm on each chosen tool's own question: the steps of
a profile that names none, and of an orchestrator built without an app (which resolves no
profile; docs/models.md, "Choosing the selection steps")."""

StructuredOutput = Literal["auto", "json_schema", "tools", "json_object"]


class CompletionLimits(BaseModel):
    """Most tokens the model may generate per call, by purpose (sent as ``max_tokens``).

    Without a limit a small model that loses its way in a structured answer generates until the
    context window is full (minutes on a CPU); each purpose's answer has a known size.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    classification: int = Field(default=256, gt=0)
    suitability: int = Field(default=16, gt=0)
    """One tool's ``{"answer": "yes"}``."""
    choice: int = Field(default=16, gt=0)
    """Naming the tools that fit a task, among candidates ..."""
    routing: int = Field(default=16, gt=0)
    """Naming the domain of a message ..."""
    choice_per_option: int = Field(default=16, gt=0)
    """... plus, for both, this many per option (the longest answer names every option)."""
    choice_function_call: int = Field(default=256, gt=0)
    """The choice as function calls (the ``call`` selection step): the model writes each call's
    arguments too."""
    parameters: int = Field(default=256, gt=0)
    decomposition: int = Field(default=512, gt=0)
    gatekeeper: int = Field(default=256, gt=0)
    relevance: int = Field(default=32, gt=0)
    answer: int = Field(default=1024, gt=0)
    answer_without_context: int = Field(default=96, gt=0)
    """The answer when no tool returned context: a sentence or two saying nothing was found."""
    compression: int = Field(default=1024, gt=0)


class ModelProfile(BaseModel):
    """The traits of one model family."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: tuple[str, ...] = ()
    """Model names it fits, as ``fnmatch`` patterns matched case-sensitively
    (``qwen2.5-coder*``); empty: it is chosen only by name."""
    structured_output: StructuredOutput = "auto"
    """How structured output is requested: the JSON schema as response format, a forced
    function call, llama-cpp-python's ``json_object`` with a schema, or ``auto`` (JSON schema,
    switching to a function call once the server rejects it)."""
    completion_limit_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    """Request field that carries the limit: ``max_tokens`` is what llama.cpp, vLLM, Ollama and
    most OpenAI models read (llama-cpp-python ignores the other and never stops); OpenAI's
    reasoning models require ``max_completion_tokens``."""
    completion_limits: CompletionLimits = Field(default_factory=CompletionLimits)
    context_window_tokens: int = Field(default=8192, gt=0)
    """The tokens a prompt and its reply may take together; retrieved context is compressed as
    it nears them (the embedded server is started with this window)."""
    worked_examples: bool = True
    """Worked examples (``toolwire.llm.prompts.SUITABILITY_EXAMPLES``, about 450 tokens) at the
    end of the system message of each one-tool yes/no call of the selection: fixed text the
    server's prompt cache keeps, which makes a small model refuse more requests no tool serves
    (docs/models.md); a larger model that needs none saves the tokens."""
    function_calling: bool = True
    """Whether the model's server takes functions to call (native tool calling); False: the
    ``call`` selection step gets a constrained choice instead."""
    selection_steps: tuple[str, ...] = DEFAULT_SELECTION_STEPS
    """The selection steps when ``orchestrator.selection.steps`` names none."""
    prefix_warming: bool = False
    """Whether toolwire has the server read the next turn's first prompt while the user reads
    the answer: once a turn is stored, the follow-up rewrite's prompt up to the message (the
    earlier turns, its instruction) is sent with a one-token limit, so the next turn's rewrite
    evaluates only the message. It pays where the server keeps a prompt cache and its idle time
    costs nothing (the embedded server); a question that arrives meanwhile cancels it (and waits
    at most for the batch the server is evaluating), but it is one more request per turn, billed
    by a paid API (docs/conversations.md, "Warming the next turn")."""


class ProfileError(ValueError):
    """``llm.profile`` names no registered profile, or overrides a trait wrongly.

    ``key``: where under ``llm.profile`` the mistake is (``()``: the setting itself).
    """

    def __init__(self, message: str, key: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.key = key


ProfileSetting = str | Mapping[str, Any] | None
"""``llm.profile``: a registered name, a mapping ``{base: <name>, <trait>: <value>, ...}``, or
None (the profile matching the model)."""


def matching_profile(model: str, profiles: Mapping[str, ModelProfile]) -> str:
    """The name of the first profile (in ``profiles``' order) one of whose ``models`` patterns
    matches ``model``; :data:`GENERAL` when none does."""
    for name, profile in profiles.items():
        if model and any(fnmatchcase(model, pattern) for pattern in profile.models):
            return name
    return GENERAL


def resolve_profile(
    setting: ProfileSetting, model: str, profiles: Mapping[str, ModelProfile]
) -> ModelProfile:
    """The profile ``llm.profile`` asks for, for the model named ``model`` ("" when not known).

    A mapping's ``base`` (default: the profile matching the model) is copied with the other keys
    replacing its traits (``completion_limits`` purpose by purpose). ``ProfileError`` for an
    unknown name or an invalid trait.
    """
    if setting is None or isinstance(setting, str):
        name = setting if setting is not None else matching_profile(model, profiles)
        return _registered(name, profiles, ())
    overrides = dict(setting)
    base_name = overrides.pop("base", None)
    if base_name is None:
        base_name = matching_profile(model, profiles)
    elif not isinstance(base_name, str):
        raise ProfileError(
            f"llm.profile.base: {base_name!r} is not a profile name; "
            f"registered: {', '.join(sorted(profiles))}",
            ("base",),
        )
    base = _registered(base_name, profiles, ("base",))
    values = base.model_dump()
    limits = overrides.pop("completion_limits", None)
    if isinstance(limits, Mapping):
        values["completion_limits"] = {**values["completion_limits"], **limits}
    elif limits is not None:
        values["completion_limits"] = limits
    values.update(overrides)
    try:
        return ModelProfile.model_validate(values)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        loc = tuple(first["loc"])
        where = ".".join(str(part) for part in loc)
        if first["type"] == "extra_forbidden":
            allowed = _allowed_at(loc)
            what = "completion limit" if len(loc) > 1 else "trait"
            hint = did_you_mean(str(loc[-1]), allowed)
            message = (
                f"llm.profile: unknown {what} {where!r}; {hint}the {what}s are {', '.join(allowed)}"
            )
        else:
            message = f"llm.profile.{where}: {first['msg']}"
        raise ProfileError(message, loc) from None


def _allowed_at(loc: tuple[str | int, ...]) -> list[str]:
    model: type[BaseModel] = CompletionLimits if len(loc) > 1 else ModelProfile
    return list(model.model_fields)


def _registered(
    name: str, profiles: Mapping[str, ModelProfile], key: tuple[str | int, ...]
) -> ModelProfile:
    if name not in profiles:
        raise ProfileError(unknown_profile(name, profiles), key)
    return profiles[name]


def unknown_profile(name: str, profiles: Mapping[str, object]) -> str:
    """The message for an ``llm.profile`` no plugin registered."""
    known = sorted(profiles)
    return (
        f"llm.profile: unknown model profile {name!r}; {did_you_mean(name, known)}"
        f"registered: {', '.join(known) or 'none'} (a plugin adds one with the "
        "register_model_profiles hook, docs/plugins.md)"
    )


def part_limit_problem(max_part_tokens: int | None, profile: ModelProfile) -> str | None:
    """Why ``llm.max_part_tokens`` does not fit the profile's window (None: it does)."""
    window = profile.context_window_tokens
    if max_part_tokens is None or max_part_tokens < window:
        return None
    return (
        f"llm.max_part_tokens ({max_part_tokens}) must be less than the model profile's "
        f"context_window_tokens ({window}): a part must leave room for the prompt's rules, the "
        "task and the reply; lower it or leave it unset (half the window)"
    )
