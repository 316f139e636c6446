"""A test plugin: domain ``trip`` with one tool that asks which city, driven by directives.

The deterministic model (``scripted_model``) extracts ``key=value`` pairs from the execution
text, the last occurrence winning, so a reply can steer the tool:

- ``city=<name>``: the answer the tool needs; without it the tool asks "Which city?".
- ``ask=again``: ask the question again even with a city (the conversation stays waiting).
- ``wait=barrier``: wait until two server processes have reached this point (the directory in
  ``$TOOLWIRE_TEST_SIGNAL_DIR``), so that two replicas apply one round at the same time.
- ``wait=hang``: note the process id in the signal directory, then block (the test kills it).
- ``sleep=<seconds>``: sleep first (time-limit tests).
- ``fail=db``: raise the way a database driver does, with the connection string (and its
  password, ``FAILING_DSN``) in the message (what callers may see of internal errors).
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import structlog
from pydantic import BaseModel

import toolwire
from toolwire import OrchestratorActivatedTool, ToolExecutionResult
from toolwire.plugins import RegisterDomain, RegisterTool
from toolwire.registry import DomainSpec
from toolwire.testing import ScriptedModel
from toolwire.testing.scripted import join_contexts

log = structlog.get_logger(__name__)

SIGNAL_DIR_ENV = "TOOLWIRE_TEST_SIGNAL_DIR"
NOTHING = "No table could be booked."
"""The answer when no tool produced anything (a failed tool, say)."""
FAILING_DSN = "postgresql://booking:hunter2-secret@db.internal.example:5432/tables"
_PAIR = re.compile(r"\b(city|ask|wait|sleep|fail)=([\w.-]+)")


class BookingParams(BaseModel):
    city: str | None = None
    ask: str | None = None
    wait: str | None = None
    sleep: float | None = None
    fail: str | None = None


def extract_pairs(text: str, _instruction: str = "") -> BookingParams:
    """The deterministic "model": the last ``key=value`` of each known key in the text."""
    return BookingParams.model_validate(dict(_PAIR.findall(text)))


class BookingTool(OrchestratorActivatedTool[BookingParams]):
    """Books a table once it knows the city."""

    name = "booking"

    def executable_instruction(self) -> str:
        return "Does the user want to book a table?"

    async def execute_with_result(self, params: BookingParams, text: str) -> ToolExecutionResult:
        if params.sleep:
            await asyncio.sleep(params.sleep)
        if params.fail == "db":
            raise ConnectionError(f"could not connect to {FAILING_DSN}: connection refused")
        if params.wait == "barrier":
            await _barrier()
        elif params.wait == "hang":
            _signal_dir().joinpath(f"hanging-{os.getpid()}").touch()
            log.info("booking_hanging", tool="trip.booking")
            await asyncio.sleep(3600)
        if params.city is None or params.ask == "again":
            return ToolExecutionResult.clarifying_question("Which city?")
        return ToolExecutionResult.context(f"Table booked in {params.city} (pid {os.getpid()}).")


def _signal_dir() -> Path:
    return Path(os.environ[SIGNAL_DIR_ENV])


async def _barrier(parties: int = 2, timeout_s: float = 20.0) -> None:
    directory = _signal_dir()
    directory.joinpath(f"arrived-{os.getpid()}").touch()
    async with asyncio.timeout(timeout_s):
        while len(list(directory.glob("arrived-*"))) < parties:
            await asyncio.sleep(0.02)


@toolwire.hookimpl
def register_domains(register: RegisterDomain) -> None:
    register(DomainSpec(name="trip", description="Table booking (test plugin)."))


@toolwire.hookimpl
def register_tools(register: RegisterTool) -> None:
    register(BookingTool, domain="trip")


def scripted_model() -> ScriptedModel:
    """Every tool suits, parameters come from ``key=value`` pairs, answers join the contexts."""
    return (
        ScriptedModel()
        .on_suitability(lambda _prompt, names: names)
        .on_extract(BookingParams, extract_pairs)
        .on_gatekeeper(True)
        .on_answer(lambda _question, contexts: join_contexts(_question, contexts) or NOTHING)
    )
