"""Plugin-style tools that use the notes server's MCP tools (declared in the tests' YAML)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from toolwire import (
    AgentCoordinator,
    OrchestratorActivatedTool,
    TaskInfo,
    ToolExecutionResult,
)
from toolwire.mcp import McpTool
from toolwire.tools import coordinator_only_instruction


class DigestParams(BaseModel):
    title: str = Field(description="The title of the note to digest")


class NoteDigestTool(OrchestratorActivatedTool[DigestParams]):
    """Counts the words of a note it reads through the injected MCP tool (a direct call)."""

    def __init__(self, read_note: McpTool) -> None:
        self.read_note = read_note

    def executable_instruction(self) -> str:
        return "Does the user ask how long one of their notes is?"

    async def execute_with_result(self, params: DigestParams, text: str) -> ToolExecutionResult:
        note = await self.read_note.call(title=params.title)
        words = len(note.text.split())
        return ToolExecutionResult.as_guaranteed_context(f"{params.title!r} has {words} words.")


class PlainDigestTool(OrchestratorActivatedTool[DigestParams]):
    """The same with a plain method: it calls the MCP tool synchronously (worker thread)."""

    def __init__(self, read_note: McpTool) -> None:
        self.read_note = read_note

    def executable_instruction(self) -> str:
        return "Does the user ask how many characters one of their notes has?"

    def execute_with_result(self, params: DigestParams, text: str) -> ToolExecutionResult:
        note = self.read_note.call_sync(title=params.title)
        return ToolExecutionResult.context(f"{params.title!r} has {len(note.text)} characters.")


class NoWork(BaseModel):
    pass


class NotesCoordinator(OrchestratorActivatedTool[NoWork], AgentCoordinator):
    """Sends "which notes" questions to the MCP tool list_notes by name."""

    coordinator_only = True

    def executable_instruction(self) -> str:
        return coordinator_only_instruction(self.name)

    def decompose_into_subtasks(self, task: TaskInfo) -> TaskInfo:
        if "which notes" in task.task_prompt.lower():
            task.sub_tasks.append(
                TaskInfo(
                    task_no=f"{task.task_no}.1",
                    task_prompt="List the user's notes",
                    required_tool_names={"list_notes"},
                )
            )
        return task
