"""A test plugin: domain ``trip`` with one tool that asks which city, driven by directives.

The deterministic model (``scripted_model``) extracts ``key=value`` pairs from the execution
text, the last occurrence winning, so a reply can steer the tool:

- ``city=<name>``: the answer the tool needs; without it the tool asks "Which city?".
- ``ask=again``: ask the question again even with a city (the conversation stays waiting).
- ``wait=barrier``: wait until two server processes have reached this point (the directory in
  ``$TOOLWIRE_TEST_SIGNAL_DIR``), so that two replicas apply one round at the same time.
- ``wait=hang``: note the process id in the signal directory, then block (the test kills it).
- ``wait=stuck``: block until the file ``release`` appears in the signal directory.
- ``sleep=<seconds>``: sleep first (time-limit tests).
- ``fail=db``: raise the way a database driver does, with the connection string (and its
  password, ``FAILING_DSN``) in the message (what callers may see of internal errors).
- ``exit=<code>``: call ``sys.exit(code)``, as a careless tool might.
- ``wide=<chars>``: add a JSON object of about that many characters, none of them a space, to
  the result (output longer than the trace keeps, text that does not wrap at spaces).

A later turn's message is rewritten as a follow-up: "there" becomes ``city=<the city an earlier
turn booked in>``; any other message stands on its own.

The tool is a plain (blocking) method, so it runs in the orchestrator's tool threads.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import structlog
from pydantic import BaseModel

import toolwire
from toolwire import OrchestratorActivatedTool, ToolExecutionResult
from toolwire.hookspecs import RegisterDomain, RegisterTool
from toolwire.llm.history import current_history
from toolwire.orchestrator.follow_up import StandaloneTask
from toolwire.registry import DomainSpec
from toolwire.testing import ScriptedModel

log = structlog.get_logger(__name__)

SIGNAL_DIR_ENV = "TOOLWIRE_TEST_SIGNAL_DIR"
NOTHING = "No table could be booked."
"""The answer when no tool produced anything (a failed tool, say)."""
FAILING_DSN = "postgresql://booking:hunter2-secret@db.internal.example:5432/tables"
_PAIR = re.compile(r"\b(city|ask|wait|sleep|fail|exit|wide)=([\w.-]+)")


class BookingParams(BaseModel):
    city: str | None = None
    ask: str | None = None
    wait: str | None = None
    sleep: float | None = None
    fail: str | None = None
    exit: int | None = None
    wide: int | None = None


def extract_pairs(text: str, _instruction: str = "") -> BookingParams:
    """The deterministic "model": the last ``key=value`` of each known key in the text."""
    return BookingParams.model_validate(dict(_PAIR.findall(text)))


class BookingTool(OrchestratorActivatedTool[BookingParams]):
    """Books a table once it knows the city."""

    name = "booking"

    def executable_instruction(self) -> str:
        return "Does the user want to book a table?"

    def execute_with_result(self, params: BookingParams, text: str) -> ToolExecutionResult:
        if params.sleep:
            time.sleep(params.sleep)
        if params.fail == "db":
            raise ConnectionError(f"could not connect to {FAILING_DSN}: connection refused")
        if params.wait == "barrier":
            _barrier()
        elif params.wait == "hang":
            _signal_dir().joinpath(f"hanging-{os.getpid()}").touch()
            log.info("booking_hanging", tool="trip.booking")
            time.sleep(3600)
        elif params.wait == "stuck":
            _wait_for(lambda: _signal_dir().joinpath("release").exists(), timeout_s=60.0)
        if params.exit is not None:
            sys.exit(params.exit)
        if params.city is None or params.ask == "again":
            return ToolExecutionResult.clarifying_question("Which city?")
        booked = f"Table booked in {params.city} (pid {os.getpid()})."
        if params.wide:
            wide = {"booking": {"seats": "4" * params.wide}}
            booked += " " + json.dumps(wide, separators=(",", ":"))
        return ToolExecutionResult.context(booked)


def _signal_dir() -> Path:
    return Path(os.environ[SIGNAL_DIR_ENV])


def _barrier(parties: int = 2) -> None:
    directory = _signal_dir()
    directory.joinpath(f"arrived-{os.getpid()}").touch()
    _wait_for(lambda: len(list(directory.glob("arrived-*"))) >= parties, timeout_s=20.0)


def _wait_for(condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"test plugin: waited {timeout_s} s in vain")
        time.sleep(0.02)


@toolwire.hookimpl
def register_domains(register: RegisterDomain) -> None:
    register(DomainSpec(name="trip", description="Table booking (test plugin)."))


@toolwire.hookimpl
def register_tools(register: RegisterTool) -> None:
    register(BookingTool, domain="trip")


def standalone(text: str, _instruction: str = "") -> dict[str, str]:
    """The follow-up rewrite: a later turn's message stands on its own, except that the word
    "there" means the city an earlier turn booked a table in (``city=<it>``), as a model reading
    the earlier turns would rewrite it."""
    earlier = " ".join(str(message["content"]) for message in current_history())
    booked = re.findall(r"booked in ([\w.-]+?)\.? \(pid", earlier)
    if not booked:
        return {"task": text}
    return {"task": re.sub(r"\bthere\b", f"city={booked[-1]}", text)}


def scripted_model() -> ScriptedModel:
    """Every tool suits, parameters come from ``key=value`` pairs, a later turn's message stands
    on its own ("there" becomes the city booked before, :func:`standalone`), answers join the
    contexts."""
    return (
        ScriptedModel()
        .on_suitability(lambda _prompt, names: names)
        .on_extract(BookingParams, extract_pairs)
        .on_extract(StandaloneTask, standalone)  # follow-ups
        .on_gatekeeper(True)
        .on_answer(lambda _question, contexts: "\n".join(c.context for c in contexts) or NOTHING)
    )
