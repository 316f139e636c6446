"""Async tools that wait at a gate the test holds, for what happens when a client goes away or a
time limit strikes mid-question: each notes whether its wait was cancelled and whether it ever
finished (a finished run would have stored its clarifying question); and one that counts the
questions it holds, for the limit on questions at once."""

from __future__ import annotations

import asyncio

from orchestration_kit import NoParams
from toolwire import Clarification, OrchestratorActivatedTool, ToolExecutionResult


class Gate:
    """Where a tool waits until the test releases it, noting what became of the wait."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False
        self.finished = False

    async def wait(self) -> None:
        self.reached.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.finished = True

    async def until_cancelled(self, timeout_s: float = 5.0) -> None:
        """Wait for the server to notice the closed connection and cancel the wait."""
        async with asyncio.timeout(timeout_s):
            while not self.cancelled:
                await asyncio.sleep(0.02)


class Slow(OrchestratorActivatedTool[NoParams]):
    """Waits at its gate, then asks a question (which a finished round would store)."""

    name = "slow"

    def __init__(self) -> None:
        self.gate = Gate()

    def executable_instruction(self) -> str:
        return "Is it slow?"

    async def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        await self.gate.wait()
        return ToolExecutionResult.clarifying_question("Slow enough?")


class SlowReply(OrchestratorActivatedTool[NoParams]):
    """Asks at once; handling the reply waits at its gate."""

    name = "slowreply"

    def __init__(self) -> None:
        self.gate = Gate()

    def executable_instruction(self) -> str:
        return "Is the reply slow?"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.clarifying_question("Which one?")

    async def execute_with_clarification(
        self, params: NoParams, text: str, clarification: Clarification
    ) -> ToolExecutionResult:
        await self.gate.wait()
        return ToolExecutionResult.context(f"Done with {clarification.reply}.")


class Gated(OrchestratorActivatedTool[NoParams]):
    """Holds every question until the test opens the gate; counts the questions it holds."""

    name = "gated"

    def __init__(self) -> None:
        self.holding = 0
        self.gate = asyncio.Event()

    def executable_instruction(self) -> str:
        return "Is it a question?"

    async def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        self.holding += 1
        try:
            await self.gate.wait()
        finally:
            self.holding -= 1
        return ToolExecutionResult.context(f"answered: {text}")


async def holding(gated: Gated, count: int) -> None:
    """Wait until ``gated`` holds ``count`` questions."""
    async with asyncio.timeout(10):
        while gated.holding != count:
            await asyncio.sleep(0.01)
