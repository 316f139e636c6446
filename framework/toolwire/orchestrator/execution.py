"""SPEC §3 steps 6 and 7 for one tool: parameters from the execution text, then the right
execution method (plain, context consumer, clarification round, clarifiable consumer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import structlog
from pydantic import BaseModel

from toolwire.context_buffer import ContextBuffer
from toolwire.errors import PLUGIN_FAILURES
from toolwire.llm.attempts import call_model
from toolwire.llm.base import LanguageModel, Purpose, parameters_source
from toolwire.orchestrator.invoke import failed
from toolwire.run_state import Clarification
from toolwire.task import TaskInfo
from toolwire.tool_threads import PluginRunner
from toolwire.tools import (
    ChatbotTool,
    ClarifiableContextConsumerTool,
    ContextConsumerTool,
    ToolExecutionResult,
)


def clarified_text(execution_text: str, exchanges: Sequence[Clarification]) -> str:
    """The text parameters are extracted from after the user answered clarifying questions:
    the execution text, then every question and reply of the task, oldest first."""
    return execution_text + "".join(
        f"\n\nClarifying question: {each.question}\nUser's reply: {each.reply or ''}"
        for each in exchanges
    )


log = structlog.get_logger(__name__)


def known_params(
    task: TaskInfo, qualified_name: str, tool: ChatbotTool[Any], text: str
) -> dict[str, Any] | None:
    """A tool's parameters when no model call is needed to find them: the coordinator's
    (``task.tool_params`` under the tool's prefixed or short name), else the tool's own from
    the text (:meth:`ChatbotTool.params_from_text`); None: the model extracts them. Data that
    fails the tool's model (or whose validators raise anything else: pydantic passes an
    ``AttributeError`` or a ``TypeError`` through), or a ``params_from_text`` that raises, is
    logged and extracted."""
    given = task.tool_params.get(qualified_name, task.tool_params.get(tool.name))
    if given is not None:
        try:
            return tool.params_model.model_validate(given).model_dump(mode="json")
        except PLUGIN_FAILURES as error:  # its parameters are then extracted
            log.warning("coordinator_params_invalid", tool=qualified_name, error=failed(error))
    try:
        own = tool.params_from_text(text)
        if own is None:
            return None
        return tool.params_model.model_validate(own).model_dump(mode="json")
    except PLUGIN_FAILURES as error:  # its parameters are then extracted
        log.warning("params_from_text_failed", tool=qualified_name, error=failed(error))
        return None


async def extract_params(
    llm: LanguageModel,
    model: type[BaseModel],
    instruction: str,
    text: str,
    attempts: int,
    source: str | None = None,
) -> BaseModel:
    """Fill a tool's parameter model from ``text``; a model without fields needs no call.
    ``source``: the tool's ``external_source`` (an MCP tool's), whose field descriptions the
    prompt then shows as external content (:func:`~toolwire.llm.base.parameters_source`)."""
    if not model.model_fields:
        return model()
    with parameters_source(source):
        return await call_model(
            Purpose.PARAMETERS.value,
            attempts,
            lambda: llm.extract(model, text, instruction=instruction, purpose=Purpose.PARAMETERS),
        )


async def execute(
    runner: PluginRunner,
    tool: ChatbotTool[Any],
    params: BaseModel,
    text: str,
    prior_context: ContextBuffer,
    clarification: Clarification | None,
) -> ToolExecutionResult:
    """Run the tool the way its kind requires; a consumer gets ``prior_context`` (a snapshot)."""
    if clarification is not None:
        if isinstance(tool, ClarifiableContextConsumerTool):
            outcome = await runner.call(
                tool.execute_with_clarification_and_prior_context,
                params,
                text,
                clarification,
                prior_context,
            )
        else:
            outcome = await runner.call(
                tool.execute_with_clarification, params, text, clarification
            )
    elif isinstance(tool, ContextConsumerTool):
        outcome = await runner.call(tool.execute_with_prior_context, params, text, prior_context)
    else:
        outcome = await runner.call(tool.execute_with_result, params, text)
    if not isinstance(outcome, ToolExecutionResult):
        raise TypeError(
            f"{type(tool).__name__} returned {type(outcome).__name__}; tools must return a "
            "ToolExecutionResult (context, as_guaranteed_context, clarifying_question, terminal)"
        )
    return outcome
