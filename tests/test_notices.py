"""What every caller is told about how an answer was made (``Answer.notices``), over HTTP (plain
and streamed) and MCP's ``<domain>.ask``: a part of the context cut for the model, a compression
that failed, the answer cut off at its length limit.

Before, these reached only the CLI: HTTP and MCP callers, who see internal failures as
``a step failed (error id …)``, could not tell that the answer was made from a cut context. Now
each is a typed record (``kind``, ``task_no``, ``message`` in toolwire's words), and its line
among the failures reads as the notice does; what a server said (a failed compression's error,
here echoing an API key) stays withheld behind an error id.

The model is the real gateway over the fake OpenAI server with an 8k window
(``windowed_model``), whose compression calls fail with an error body that holds a key.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi.testclient import TestClient
from pydantic import BaseModel
from structlog.testing import capture_logs

from _build_samples import make_plugin
from server_support.fake_model import fake_model_in_thread
from toolwire import App, OrchestratorActivatedTool, ToolExecutionResult
from toolwire.context_buffer import PageRef
from toolwire.disclosure import disclosed_answer
from toolwire.llm import OpenAIGateway
from toolwire.llm.context_limits import PartCut
from toolwire.orchestrator import Answer, TaskTrace
from toolwire.run_state import TaskStatus
from toolwire.server import create_app
from toolwire.testing.fake_openai import FakeOpenAIServer, FakeReply, FakeRequest
from toolwire.testing.pytest_plugin import AppFactory
from windowed_model import gateway, huge, windowed

LEAKED_KEY = "sk-proj-LeakedKey0123456789abcdefXYZ"
UPSTREAM_HOST = "gpu-7.inference.internal.example"
ERROR_ID = r"[0-9a-f]{12}"
CONFIG = "default_domain: demo\nsessions: {store: memory}\n"
FAILED_CALL = "the model call failed"


class Nothing(BaseModel):
    pass


class SalesTool(OrchestratorActivatedTool[Nothing]):
    """Returns 4 MB of sales rows: more than a prompt may carry."""

    def executable_instruction(self) -> str:
        return "Does the question need the sales rows?"

    def execute_with_result(self, params: Nothing, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(huge(4_000_000, "sales"))


class StockTool(SalesTool):
    """Returns 4 MB of stock rows."""

    def execute_with_result(self, params: Nothing, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(huge(4_000_000, "stock"))


def refuse_with_the_key(_request: FakeRequest) -> FakeReply:
    """A compression call refused by a server whose error body echoes the key it was sent."""
    return FakeReply(
        status=500, error=f"Incorrect API key provided: {LEAKED_KEY}; rejected by {UPSTREAM_HOST}"
    )


def demo_app(factory: AppFactory, model: OpenAIGateway) -> App:
    plugin = make_plugin("demo", domains=("demo",), tools=(SalesTool, StockTool))
    app: App = factory(plugins=[plugin], config=CONFIG, llm=model)
    return app


def assert_told(answer: dict[str, Any], compression: tuple[str, str]) -> None:
    """The notices of the 8 MB question, as a caller without error details sees them
    (``compression``: why each tool's part went uncompressed)."""
    notices = answer["notices"]
    assert {notice["task_no"] for notice in notices} == {"1"}
    cuts = [n for n in notices if n["kind"] == "context_cut"]
    failed = [n for n in notices if n["kind"] == "compression_failed"]
    assert len(cuts) + len(failed) == len(notices)
    assert {(n["message"], n["detail"]) for n in cuts if "4,000,000" in n["message"]} == {
        (
            f"the context of {tool} was cut for the model: 16,246 of 4,000,000 characters sent "
            "(llm.max_part_tokens: half the context window); the whole result is kept",
            None,
        )
        for tool in ("sales", "stock")
    }
    assert [n["message"] for n in failed] == [
        f"context compression failed, sent uncompressed (1:{tool}): {reason}"
        for tool, reason in zip(("sales", "stock"), compression, strict=True)
    ]
    for notice in failed:  # the server's words are withheld; toolwire's own need no detail
        if notice["message"].endswith(FAILED_CALL):
            assert re.fullmatch(f"error id {ERROR_ID}", notice["detail"])
        else:
            assert notice["detail"] is None
    # each notice's line among the failures reads as the notice does: none is "a step failed"
    lines = [
        "task 1: " + (n["message"] if n["detail"] is None else f"{n['message']} ({n['detail']})")
        for n in notices
    ]
    assert answer["failures"] == lines
    assert answer["trace"]["notices"] == notices
    assert answer["trace"]["failures"] == [line.removeprefix("task 1: ") for line in lines]
    # the answer says it may be incomplete, and is still composed
    assert "(Some steps failed, so this answer may be incomplete" in answer["text"]


def assert_withheld(text: str, answer: dict[str, Any], logs: list[dict[str, Any]]) -> None:
    """What the compression server said is nowhere in the reply, and in the log under the id."""
    assert LEAKED_KEY not in text and UPSTREAM_HOST not in text
    (error_id,) = {n["detail"] for n in answer["notices"] if n["detail"] is not None}
    (event,) = [e for e in logs if e.get("error_id") == error_id.removeprefix("error id ")]
    assert event["event"] == "error_withheld" and event["notice"] == "compression_failed"
    assert UPSTREAM_HOST in event["detail"]


def sse_answer(body: str) -> dict[str, Any]:
    (data,) = [
        block.split("data: ", 1)[1]
        for block in body.split("\n\n")
        if block.startswith("event: answer\n")
    ]
    answer: dict[str, Any] = json.loads(data)["answer"]
    return answer


def test_http_callers_are_told_of_cut_context_and_a_failed_compression(
    toolwire_app_factory: AppFactory,
) -> None:
    with fake_model_in_thread(windowed(refuse_with_the_key)) as server:
        model = gateway(server)
        app = demo_app(toolwire_app_factory, model)
        with TestClient(create_app(app)) as client, capture_logs() as logs:
            plain = client.post("/v1/ask", json={"message": "Sum the sales and the stock"})
            streamed = client.post(
                "/v1/ask", json={"message": "Sum the sales and the stock", "stream": True}
            )
            client.portal.call(model.aclose)  # type: ignore[union-attr]

    assert plain.status_code == 200, plain.text
    assert_told(plain.json(), (FAILED_CALL, FAILED_CALL))
    assert_withheld(plain.text, plain.json(), logs)
    assert streamed.status_code == 200
    # the third failure in a row opened the compressor's breaker
    assert_told(
        sse_answer(streamed.text), (FAILED_CALL, "skipped for 300 s after repeated failures")
    )
    assert_withheld(streamed.text, sse_answer(streamed.text), logs)


async def test_mcp_ask_tells_the_same_notices(toolwire_app_factory: AppFactory) -> None:
    from toolwire.mcp.server import DomainMcpServer

    async with FakeOpenAIServer(windowed(refuse_with_the_key)) as server:
        model = gateway(server)
        app = demo_app(toolwire_app_factory, model)
        try:
            with capture_logs() as logs:
                result = await DomainMcpServer(app, "demo").call(
                    "demo.ask", {"message": "Sum the sales and the stock"}
                )
        finally:
            await model.aclose()

    assert not result.is_error
    shown = result.structured_content
    assert shown is not None
    notices = shown["notices"]
    assert shown["failures"] == [
        "task 1: " + (n["message"] if n["detail"] is None else f"{n['message']} ({n['detail']})")
        for n in notices
    ]
    assert {n["kind"] for n in notices} == {"context_cut", "compression_failed"}
    assert_withheld(str(result), {"notices": notices}, logs)


def test_a_cut_page_names_no_document_to_callers() -> None:
    """A page's document id may be a path on the server: callers read that a retrieved page
    was cut; the page is the notice's detail, withheld (the CLI's ``--trace`` shows it)."""
    cut = PartCut(
        task_no="1",
        source="page /srv/manuals/internal.pdf#3",
        original_chars=20_000,
        kept_chars=16_000,
        limit="llm.max_part_tokens",
        page=PageRef(doc_id="/srv/manuals/internal.pdf", page_no=3),
    )
    root = TaskTrace(task_no="1", task_prompt="q", status=TaskStatus.DONE)
    notice = cut.notice()
    root.notices.append(notice)
    root.failures.append(notice.describe())
    answer = Answer(
        kind="answer",
        text="t",
        domain="demo",
        failures=[f"task 1: {notice.describe()}"],
        notices=[notice],
        trace=root,
    )

    shown = disclosed_answer(answer, verbose=False)
    verbose = disclosed_answer(answer, verbose=True)

    assert "internal.pdf" not in shown.model_dump_json()
    (told,) = shown.notices
    assert told.message == (
        "a retrieved page was cut for the model: 16,000 of 20,000 characters sent "
        "(llm.max_part_tokens)"
    )
    assert told.detail is not None and re.fullmatch(f"error id {ERROR_ID}", told.detail)
    assert shown.failures == [f"task 1: {told.message} ({told.detail})"]
    assert shown.trace.notices == [told]
    assert verbose.failures == [f"task 1: {notice.message} (page /srv/manuals/internal.pdf#3)"]
