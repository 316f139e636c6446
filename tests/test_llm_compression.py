"""Question-aware batch compression: when, what is kept verbatim, marking, and the breaker."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from toolwire.context_buffer import PromptAndContext
from toolwire.errors import TimeBudgetSpentError
from toolwire.llm import (
    GatekeeperVerdict,
    OpenAIGateway,
    Purpose,
    SuitabilityQuestion,
    collect_calls,
)
from toolwire.llm.compression import (
    COMPRESSED_MARKER,
    COMPRESSED_TOOL_NAME,
    KEPT_IDENTIFIERS_LABEL,
    CompressedContext,
    ContextCompressor,
    identifiers,
)
from toolwire.llm.context_limits import (
    CompressionFailure,
    PartCut,
    collect_context_issues,
    estimate_tokens,
)
from toolwire.llm.history import conversation_history, reading_history
from toolwire.llm.profiles import ModelProfile
from toolwire.llm.transport import Message
from toolwire.settings import LLMSettings
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeRequest, prompt_text

LONG = (
    "Warfarin (ATC B01AA03) interacts with ibuprofen; see https://example.org/warfarin?x=1. "
    + "Filler sentence about nothing in particular. " * 40
)


def part(task_no: str, text: str = LONG, tool: str = "pharma.drug_info") -> PromptAndContext:
    return PromptAndContext(prompt="q", context=text, tool_name=tool, task_no=task_no)


class FakeCompressingModel:
    """Answers compression calls from a list; records what it was asked."""

    def __init__(self, *outputs: str | Exception | None) -> None:
        self.outputs = list(outputs)
        self.texts: list[str] = []

    async def extract(
        self, schema: type[Any], text: str, *, instruction: str = "", purpose: Purpose
    ) -> Any:
        assert schema is CompressedContext and purpose is Purpose.COMPRESSION
        self.texts.append(text)
        output = self.outputs.pop(0)
        if isinstance(output, Exception):
            raise output
        return None if output is None else CompressedContext(summary=output)

    async def suitability(
        self,
        task_prompt: str,
        questions: Sequence[SuitabilityQuestion],
        *,
        batched: bool = False,
        handled: SuitabilityQuestion | None = None,
    ) -> dict[str, bool]:
        raise AssertionError("not used")

    async def judge_context(
        self, question: str, contexts: Sequence[PromptAndContext]
    ) -> GatekeeperVerdict:
        raise AssertionError("not used")

    async def answer(self, question: str, contexts: Sequence[PromptAndContext]) -> str:
        raise AssertionError("not used")

    async def aclose(self) -> None:
        return None


def compressor(model: FakeCompressingModel, **kwargs: Any) -> ContextCompressor:
    return ContextCompressor(model, window_tokens=1000, threshold=0.5, **kwargs)


def test_identifiers_finds_ids_numbers_names_and_urls() -> None:
    found = identifiers("the order AB-1234 of Anna Kovacs (7 items) is at https://x.org/a?b=1.")
    assert found == ["AB-1234", "Anna Kovacs", "7", "https://x.org/a?b=1"]


async def test_contexts_that_fit_pass_unchanged_without_a_model_call() -> None:
    model = FakeCompressingModel()
    contexts = [part("1", "short")]
    assert await compressor(model).fit("q", contexts) == contexts
    assert model.texts == []


async def test_fresh_parts_are_compressed_in_one_question_aware_batch() -> None:
    model = FakeCompressingModel("Warfarin (B01AA03) interacts with ibuprofen.")
    contexts = [part("1"), part("2", tool="pharma.leaflet")]
    result = await compressor(model).fit("Does warfarin interact?", contexts)

    assert len(model.texts) == 1
    assert model.texts[0].endswith("Keep what this question needs: Does warfarin interact?")
    assert model.texts[0].count("<external_content") == 2
    (compressed,) = result
    assert compressed.tool_name == COMPRESSED_TOOL_NAME
    assert compressed.context.startswith(
        f"{COMPRESSED_MARKER} sources: 1:pharma.drug_info, 2:pharma.leaflet"
    )
    # the URL and the code the summary dropped come back verbatim (an acronym is an identifier)
    assert f"{KEPT_IDENTIFIERS_LABEL} ATC, https://example.org/warfarin?x=1" in compressed.context


async def test_the_gatekeeper_and_the_answer_reuse_one_compression_of_the_same_parts() -> None:
    model = FakeCompressingModel("one summary", "a second summary nobody should ask for")
    comp = compressor(model)
    contexts = [part("1"), part("2", tool="pharma.leaflet")]
    for_the_gatekeeper = await comp.fit("Does warfarin interact?", contexts)
    for_the_answer = await comp.fit("Does warfarin interact?", contexts)

    assert len(model.texts) == 1  # compressed once, stored, reused
    assert for_the_answer == for_the_gatekeeper
    await comp.fit("Another question?", contexts)  # question-aware: a new one is compressed anew
    assert len(model.texts) == 2


async def test_a_compressed_part_is_never_compressed_again() -> None:
    model = FakeCompressingModel("first summary", "second summary")
    comp = compressor(model)
    (first,) = await comp.fit("q", [part("1"), part("2")])
    result = await comp.fit("q", [first, part("3")])
    assert result[0] == first
    assert "second summary" in result[1].context
    assert COMPRESSED_MARKER not in model.texts[1]


async def test_a_compression_that_is_not_shorter_is_refused() -> None:
    model = FakeCompressingModel(LONG * 3)
    contexts = [part("1"), part("2")]
    assert await compressor(model).fit("q", contexts) == contexts


@pytest.mark.parametrize("failure", [None, RuntimeError("server down")])
async def test_the_breaker_opens_after_repeated_failures_and_closes_after_the_cooldown(
    failure: Exception | None,
) -> None:
    now = [0.0]
    model = FakeCompressingModel(failure, failure, failure, "recovered")
    comp = compressor(model, max_failures=3, cooldown_s=60, clock=lambda: now[0])
    contexts = [part("1"), part("2")]
    for _ in range(4):
        assert await comp.fit("q", contexts) == contexts
    assert len(model.texts) == 3  # the fourth call was skipped by the open breaker
    assert comp.breaker_open
    now[0] = 61.0
    result = await comp.fit("q", contexts)
    assert "recovered" in result[0].context
    assert not comp.breaker_open


async def test_a_spent_time_budget_leaves_the_parts_uncompressed_and_the_breaker_closed() -> None:
    spent = TimeBudgetSpentError("compression", "the question's time budget of 1 s is spent")
    model = FakeCompressingModel(spent, spent, spent, "recovered")
    comp = compressor(model, reserved_tokens=300, max_failures=3)  # two calls for three parts
    contexts = [part(n, LONG[:1000]) for n in ("1", "2", "3")]
    with collect_context_issues() as issues:
        for _ in range(3):
            assert await comp.fit("q", contexts) == contexts
    assert len(model.texts) == 3  # one call a question: the rest was not tried
    assert not comp.breaker_open
    assert {(issue.sources, issue.reason) for issue in issues} == {
        (tuple(f"{n}:pharma.drug_info" for n in "123"), "the question's time budget is spent")
    }
    assert "recovered" in (await comp.fit("q", contexts))[0].context


async def test_a_summary_copied_from_the_escaped_prompt_is_unescaped_once() -> None:
    # The model reads the contexts HTML-escaped inside <external_content>; what it copies back
    # must not be escaped a second time when the compressed part is rendered again.
    url = "https://example.org/search?drug=warfarin&dose=5"
    text = f"Warfarin dosing at {url}. " + "Filler sentence about nothing in particular. " * 40
    model = FakeCompressingModel(f"Dosing: {url.replace('&', '&amp;')} (B01AA03 &lt;5 mg&gt;)")
    (compressed,) = await compressor(model).fit("dose?", [part("1", text), part("2", text)])
    assert f"Dosing: {url} (B01AA03 <5 mg>)" in compressed.context
    assert KEPT_IDENTIFIERS_LABEL not in compressed.context


async def test_an_identifier_inside_a_longer_one_is_not_counted_as_kept() -> None:
    # "80" is not kept by "8080", nor "v1.2" by "v1.23": both come back; whole ones do not
    text = "Port 80 serves v1.2 of the API. " + "Filler sentence about nothing in particular. " * 40
    model = FakeCompressingModel("Port 8080 serves v1.23 of the API.")
    (compressed,) = await compressor(model).fit("port?", [part("1", text), part("2", text)])
    assert compressed.context.endswith(f"{KEPT_IDENTIFIERS_LABEL} 80, v1.2")


async def test_a_part_longer_than_one_call_is_cut_to_fit_the_call_and_the_cut_is_reported() -> None:
    model = FakeCompressingModel("Warfarin (B01AA03) interacts with ibuprofen.")
    comp = compressor(model, reserved_tokens=200)  # 800 tokens of a 1,000-token window to send
    with collect_context_issues() as issues:
        (compressed,) = await comp.fit("q", [part("1", LONG * 100)])
    (sent,) = model.texts
    assert estimate_tokens(sent) <= 800
    assert "[cut by toolwire: the last " in sent
    assert compressed.context.startswith(f"{COMPRESSED_MARKER} sources: 1:pharma.drug_info")
    (cut,) = issues
    assert isinstance(cut, PartCut) and cut.original_chars == len(LONG) * 100
    assert cut.limit == "what fits one compression call"


async def test_parts_that_do_not_fit_one_call_are_compressed_in_as_few_calls_as_fit() -> None:
    model = FakeCompressingModel("first summary", "second summary")
    comp = compressor(model, reserved_tokens=300)  # 700 tokens a call; each part ~260
    contexts = [part(n, LONG[:1000]) for n in ("1", "2", "3")]
    with collect_context_issues() as issues:
        result = await comp.fit("q", contexts)
    assert [text.count("<external_content") for text in model.texts] == [2, 1]
    assert all(estimate_tokens(text) <= 700 for text in model.texts)
    assert [ctx.context.split("\n")[0] for ctx in result] == [
        f"{COMPRESSED_MARKER} sources: 1:pharma.drug_info, 2:pharma.drug_info",
        f"{COMPRESSED_MARKER} sources: 3:pharma.drug_info",
    ]
    assert issues == []


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        (RuntimeError("server down"), "the model call failed"),
        (None, "the model gave no valid summary"),
        (LONG * 3, "was not shorter than the context"),
    ],
)
async def test_a_failed_compression_is_reported_with_its_parts_and_why(
    output: Exception | str | None, reason: str
) -> None:
    """Why, in toolwire's words; what the model call raised apart (a server's words)."""
    model = FakeCompressingModel(output)
    contexts = [part("1"), part("2", tool="pharma.leaflet")]
    with collect_context_issues() as issues:
        assert await compressor(model).fit("q", contexts) == contexts
    (failure,) = issues
    assert isinstance(failure, CompressionFailure)
    assert failure.task_no == "1" and failure.sources == ("1:pharma.drug_info", "2:pharma.leaflet")
    assert reason in failure.reason
    assert failure.error == ("server down" if isinstance(output, Exception) else None)
    notice = failure.notice()
    assert (notice.kind, notice.detail) == ("compression_failed", failure.error)
    assert notice.message == (
        "context compression failed, sent uncompressed (1:pharma.drug_info, 2:pharma.leaflet): "
        + failure.reason
    )


async def test_an_open_breaker_is_reported_too() -> None:
    model = FakeCompressingModel(None)
    comp = compressor(model, max_failures=1, cooldown_s=60, clock=lambda: 0.0)
    await comp.fit("q", [part("1"), part("2")])
    with collect_context_issues() as issues:
        await comp.fit("q", [part("1"), part("2")])
    (skipped,) = issues
    assert isinstance(skipped, CompressionFailure)
    assert skipped.reason == "skipped for 60 s after repeated failures"


def test_the_identifier_safety_net_keeps_files_paths_snake_case_and_proper_names() -> None:
    text = (
        "no, I meant Excedrin PM: see docs/models.md, /etc/hosts and ./run.sh; the function "
        "parse_app_config reads config.yaml. Write to Bob Smith or ask Alice."
    )
    found = identifiers(text)
    for expected in (
        "Excedrin PM", "docs/models.md", "/etc/hosts", "./run.sh", "parse_app_config",
        "config.yaml", "Bob Smith", "Alice",
    ):  # fmt: skip
        assert expected in found, expected
    assert "I" not in found and "Write" not in found  # a sentence's first word is not a name


async def test_a_later_turns_answer_makes_room_for_the_earlier_turns_it_reads() -> None:
    """The answer of a later turn sends the earlier turns beside its contexts, so contexts that
    fit a first turn's answer are compressed for it; the compression calls read only the parts
    they compress, not the conversation."""
    earlier_text = "What did the leaflet say about warfarin and aspirin? " * 30
    history: list[Message] = [
        {"role": "user", "content": earlier_text},
        {"role": "assistant", "content": "They interact."},
    ]
    contexts = [part("1"), part("2"), part("3")]

    async def answer(read_history: bool) -> tuple[list[str], list[FakeRequest]]:
        async with FakeOpenAIServer() as server:
            settings = LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0)
            profile = ModelProfile(structured_output="json_schema", context_window_tokens=2048)
            gateway = OpenAIGateway(settings, profile=profile, api_key="k", concurrency=1)
            with conversation_history(history), collect_calls() as calls:
                if read_history:
                    with reading_history():
                        await gateway.answer("And with ibuprofen?", contexts)
                else:
                    await gateway.answer("And with ibuprofen?", contexts)
            await gateway.aclose()
            return [call.purpose for call in calls], server.chat_requests

    alone, _ = await answer(read_history=False)
    later, requests = await answer(read_history=True)

    assert alone == ["answer"]  # the contexts fit the window by themselves
    assert "compression" in later and later[-1] == "answer"
    for purpose, request in zip(later, requests, strict=True):
        sent = prompt_text(request.body)
        assert (earlier_text in sent) == (purpose == "answer"), purpose


def test_earlier_turns_past_their_bound_never_cut_the_findings_to_nothing() -> None:
    """A history whose compression failed can stay past ``sessions.history_tokens``: the
    findings then keep the room the bound leaves them, rather than an empty share."""
    fitting = ContextCompressor(
        FakeCompressingModel(), window_tokens=4000, least_context_tokens=400
    )
    parts = [part("1"), part("2")]

    within = fitting.within_call("q", parts, besides_tokens=100_000)

    assert all(estimate_tokens(kept.context) >= 150 for kept in within)
    assert fitting.within_call("q", parts) == parts  # with no history they fit whole
