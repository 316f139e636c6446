"""The embedded model behind a recording (``toolwire.testing.replay``), for the evaluations.

Recording: the embedded model answers what the recording lacks, and its reply is kept. Replaying
alone: no model is started; a prompt the recording lacks is a failed call (the evaluations count
it as such and say how many there were).
"""

from __future__ import annotations

from pathlib import Path

from toolwire.llm import ChatModel, LanguageModel, create_language_model
from toolwire.llm.factory import model_profile
from toolwire.llm.local import local_model_spec
from toolwire.settings import LLMSettings
from toolwire.testing.replay import ReplayTransport


def without_warming(llm: LanguageModel) -> None:
    """``llm`` with its profile's ``prefix_warming`` off (a model without a profile warms
    nothing anyway)."""
    if isinstance(llm, ChatModel):
        llm.profile = llm.profile.model_copy(update={"prefix_warming": False})


def replayed_model(
    recording: Path | None, *, replay_only: bool = False, settings: LLMSettings | None = None
) -> tuple[LanguageModel, ReplayTransport | None]:
    """The model the evaluations use, and the recording's transport (None: no recording).

    With a recording the model warms no prefixes (``prefix_warming``): a warm-up kept in it
    would be replayed later without reaching the server, so the rewrite after it would meet a
    cold cache while the run believed it warm. A recording's seconds are unwarmed ones; warmed
    seconds are measured live, without one."""
    settings = settings or LLMSettings()
    if recording is None:
        return create_language_model(settings, environ={}), None
    if replay_only:
        profile = model_profile(settings, environ={})
        named = settings.model_copy(update={"model": local_model_spec(settings.local_model).name})
        transport = ReplayTransport(recording, supports_functions=True)
        replayed = ChatModel(transport, named, profile=profile, concurrency=1)
        without_warming(replayed)
        return replayed, transport
    llm = create_language_model(settings, environ={})
    assert isinstance(llm, ChatModel)
    transport = ReplayTransport(recording, inner=llm.transport)
    llm.transport = transport
    without_warming(llm)
    return llm, transport
