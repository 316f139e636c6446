"""How much of one tool result enters the prompts, and what the answer says was left out.

The model is the real ``ChatModel`` over the fake OpenAI server, which here refuses a request
longer than the context window (``windowed_model``), as llama.cpp, vLLM and OpenAI do.
"""

from __future__ import annotations

import json

import pytest

from orchestration_kit import ActivatedConsumer, EchoTool
from toolwire.context_buffer import PageRef, PromptAndContext
from toolwire.errors import ConfigError
from toolwire.llm.base import PageToJudge, RetrievalPlace, retrieval_place
from toolwire.llm.context_limits import (
    CompressionFailure,
    PartCut,
    PartLimit,
    collect_context_issues,
    estimate_tokens,
)
from toolwire.llm.factory import model_profile
from toolwire.orchestrator.domain_orchestrator import file_context_issues
from toolwire.registry import DomainSpec
from toolwire.settings import LLMSettings
from toolwire.task import TaskInfo
from toolwire.testing import conversation_for
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest
from toolwire.tools import ToolExecutionResult
from windowed_model import (
    ANSWER,
    assert_every_request_fits,
    gateway,
    huge,
    windowed,
)

TWENTY_MB = 20_000_000
SPEC = DomainSpec(name="demo", description="Reports.")


# -- the limit ------------------------------------------------------------------------------


def test_a_part_is_limited_to_half_the_window_unless_a_setting_says_otherwise() -> None:
    assert PartLimit.of(8192, None).tokens == 4096
    assert PartLimit.of(8192, 1000) == PartLimit(1000, "llm.max_part_tokens")
    with pytest.raises(ConfigError, match=r"max_part_tokens \(9000\) must be less than"):
        model_profile(LLMSettings(max_part_tokens=9000), environ={})  # the embedded: 8192


def test_a_cut_part_ends_with_a_marker_and_the_cut_is_reported() -> None:
    limit = PartLimit(100, "llm.max_part_tokens")
    with collect_context_issues() as issues:
        text = limit.cut(huge(10_000), source="demo.big", task_no="1.2")
        assert limit.cut("short", source="demo.small", task_no="1") == "short"
    assert len(text) <= 400
    kept = text.rindex("\n[cut by toolwire")
    (cut,) = issues
    assert cut == PartCut(
        task_no="1.2",
        source="demo.big",
        original_chars=10_000,
        kept_chars=kept,
        limit="llm.max_part_tokens",
    )
    assert text.endswith(
        f"[cut by toolwire: the last {10_000 - kept:,} of 10,000 characters of this context are "
        "left out (llm.max_part_tokens)]"
    )


def test_chinese_japanese_and_korean_count_about_a_token_a_character() -> None:
    """At four characters a token such a text was taken for a quarter of its size, and its
    parts and histories overflowed the window they were bounded by."""
    assert estimate_tokens("a" * 400) == 101  # alphabetic text and code: as before
    assert estimate_tokens("汉字" * 200) == 401
    assert estimate_tokens("ひらがなカタカナ한국어") == 12
    assert estimate_tokens("pip install 包") == (13 + 4) // 4 + 1


def test_a_part_in_chinese_is_cut_to_the_limit_in_tokens() -> None:
    limit = PartLimit(100, "llm.max_part_tokens")
    with collect_context_issues() as issues:
        text = limit.cut("汉" * 1000, source="demo.zh", task_no="1")
        kept_whole = limit.cut("汉" * 90, source="demo.zh", task_no="1")
    (cut,) = issues
    assert estimate_tokens(text) <= 100
    assert text.startswith("汉" * cut.kept_chars) and 0 < cut.kept_chars < 100
    assert kept_whole == "汉" * 90


# -- a 20 MB tool result ------------------------------------------------------------------


async def test_a_20_mb_tool_result_is_cut_for_the_prompts_and_the_answer_names_the_cut() -> None:
    big = EchoTool("big", huge(TWENTY_MB))
    consumer = ActivatedConsumer(priority=200)
    async with FakeOpenAIServer(windowed()) as server:
        model = gateway(server)
        answer = await conversation_for(SPEC, big, consumer, model=model).ask("Sum the report")
        await model.aclose()

    assert answer.kind == "answer" and answer.text.startswith(ANSWER)
    assert all(call.ok for call in answer.model_calls)
    assert_every_request_fits(server)
    answer_request = server.chat_requests[-1]
    assert "[cut by toolwire: the last " in answer_request.messages[1]["content"]
    (cut,) = [failure for failure in answer.failures if "was cut for the model" in failure]
    assert cut.startswith("task 1: the context of big was cut for the model: 16,")
    assert cut.endswith(
        f" of {TWENTY_MB:,} characters sent (llm.max_part_tokens: half the context window); "
        "the whole result is kept"
    )
    assert answer.trace.failures == [cut.removeprefix("task 1: ")]
    # a cut is not a failure of the tool, and the tool's whole result stayed in the buffer
    assert [run.outcome for run in answer.trace.tools] == ["context", "context"]
    (snapshot,) = consumer.snapshots
    (seen,) = [part.context for parts in snapshot.values() for part in parts]
    assert len(seen) == TWENTY_MB


async def test_a_guaranteed_20_mb_result_reaches_the_caller_whole() -> None:
    text = huge(TWENTY_MB)
    big = EchoTool("big", ToolExecutionResult.as_guaranteed_context(text))
    plain = EchoTool("plain", "and a little plain context")
    async with FakeOpenAIServer(windowed()) as server:
        model = gateway(server)
        answer = await conversation_for(SPEC, big, plain, model=model).ask("Sum the report")
        await model.aclose()

    assert answer.guaranteed_contexts == [text]
    assert_every_request_fits(server)
    assert any("the context of big was cut" in failure for failure in answer.failures)


# -- a retrieved page ----------------------------------------------------------------------


async def test_a_huge_page_is_cut_for_its_relevance_check() -> None:
    page = PageToJudge(ref=PageRef(doc_id="manual", page_no=3), text=huge(TWENTY_MB))
    earlier = PromptAndContext(prompt="p", context=huge(TWENTY_MB), tool_name="old", task_no="1")
    place = RetrievalPlace("Which rows?", (earlier,), "search", "1.2")

    def relevant(request: FakeRequest) -> FakeReply:
        fields = (request.output_schema or {}).get("properties", {})
        if "page_1" in fields:  # the pages in one call
            return FakeReply(text=json.dumps(dict.fromkeys(fields, True)))
        return windowed()(request)

    async with FakeOpenAIServer(relevant) as server:
        model = gateway(server)
        with collect_context_issues() as issues, retrieval_place(place):
            assert await model.judge_pages("Which rows?", [page]) == [True]
        await model.aclose()

    assert_every_request_fits(server)
    assert "[cut by toolwire: the last " in server.chat_requests[0].messages[-1]["content"]
    assert {(issue.task_no, issue.source) for issue in issues if isinstance(issue, PartCut)} == {
        ("1.2", "page manual#3"),
        ("1", "old"),
    }


# -- compression ----------------------------------------------------------------------------


async def test_parts_too_long_for_one_compression_call_are_compressed_in_several() -> None:
    tools = [EchoTool(name, huge(4_000_000, name)) for name in ("one", "two", "three")]
    async with FakeOpenAIServer(windowed()) as server:
        model = gateway(server)
        answer = await conversation_for(SPEC, *tools, model=model).ask("Sum the report")
        await model.aclose()

    assert answer.kind == "answer" and all(call.ok for call in answer.model_calls)
    assert_every_request_fits(server)
    purposes = [call.purpose for call in answer.model_calls]
    assert purposes.count("compression") == 3  # each part alone fills most of a call
    user = server.chat_requests[-1].messages[1]["content"]
    assert user.count("[compressed context] sources: 1:") == 3
    assert sorted(f.split(" was cut")[0] for f in answer.failures) == [
        f"task 1: the context of {name}" for name in ("one", "three", "two")
    ]


async def test_a_failed_compression_is_listed_and_the_answer_still_fits_the_window() -> None:
    def refuse(request: FakeRequest) -> FakeReply:
        return FakeReply(status=500, error="compression service unavailable")

    tools = [EchoTool(name, huge(4_000_000, name)) for name in ("one", "two")]
    async with FakeOpenAIServer(windowed(refuse)) as server:
        model = gateway(server)
        answer = await conversation_for(SPEC, *tools, model=model).ask("Sum the report")
        await model.aclose()

    assert answer.kind == "answer" and answer.text.startswith(ANSWER)
    assert_every_request_fits(server)
    failed = [f for f in answer.failures if "context compression failed" in f]
    assert [f.split("): ")[0] + ")" for f in failed] == [
        "task 1: context compression failed, sent uncompressed (1:one)",
        "task 1: context compression failed, sent uncompressed (1:two)",
    ]
    assert all(
        f.endswith("): the model call failed (model call for 'compression' failed: HTTP 500: "
        "compression service unavailable)")
        for f in failed
    )
    assert [call.purpose for call in answer.model_calls if not call.ok] == ["compression"] * 2
    # uncompressed, the two parts were cut to share the answer's call
    assert any("an equal share of one call" in f for f in answer.failures)
    assert "(Some steps failed, so this answer may be incomplete" in answer.text


def test_an_issue_of_a_task_not_in_the_tree_is_filed_on_the_root_once() -> None:
    root = TaskInfo(task_no="1", task_prompt="q")
    issue = CompressionFailure(task_no="7", sources=("7:x",), reason="down")
    file_context_issues(root, [issue, issue])
    assert root.run.notices == [issue.notice().model_copy(update={"task_no": "1"})]
    assert root.run.reported() == ["context compression failed, sent uncompressed (7:x): down"]
