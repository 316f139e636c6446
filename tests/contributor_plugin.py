"""A plugin as a new contributor writes one: a domain, a CLI command, a model provider and a
session store, each through its hook and nothing else (no edit of toolwire, no private API).

``tests/test_new_contributor.py`` installs it as a distribution with a ``toolwire`` entry point.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from pydantic import BaseModel

import toolwire
from toolwire import ChatbotTool, Clarification, DomainSpec, OrchestratorActivatedTool
from toolwire import ToolExecutionResult as Result
from toolwire.cli import load_app_or_exit
from toolwire.hookspecs import (
    RegisterCommand,
    RegisterDomain,
    RegisterModel,
    RegisterSessionStore,
    RegisterTool,
)
from toolwire.llm import ChatModel, ChatReply, ChatRequest, ModelProfile
from toolwire.sessions import MemorySessionStore, SessionStore, StoredSession
from toolwire.settings import LLMSettings, SessionSettings
from toolwire.testing.fake_openai import default_output

CANNED_ANSWER = "Canned answer: the reminder is set."


class NoParams(BaseModel):
    pass


class ReminderTool(OrchestratorActivatedTool[NoParams]):
    """Sets a reminder; asks for the day when the message names none."""

    name = "reminder"

    def executable_instruction(self) -> str:
        return "Does the user want a reminder?"

    def execute_with_result(self, params: NoParams, text: str) -> Result:
        return Result.clarifying_question("For which day?")

    def execute_with_clarification(
        self, params: NoParams, text: str, clarification: Clarification
    ) -> Result:
        return Result.context(f"reminder set for {clarification.reply}")


class CannedTransport:
    """A model provider's transport: every structured reply is the schema's simplest instance,
    every answer one fixed sentence."""

    def __init__(self) -> None:
        self.purposes: list[str] = []

    async def send(self, request: ChatRequest) -> ChatReply:
        self.purposes.append(request.purpose)
        schema = request.schema.model_json_schema() if request.schema else None
        text = default_output(schema) if schema else CANNED_ANSWER
        return ChatReply(text=text, model="canned-1", prompt_tokens=5, completion_tokens=2)

    async def aclose(self) -> None:
        pass


class LedgerStore(MemorySessionStore):
    """Sessions in memory, with a ledger of the operations made on them."""

    def __init__(self, ttl_s: float) -> None:
        super().__init__(ttl_s)
        self.ledger: list[str] = []

    async def create(
        self, domain: str, conversation: Any, owner: str | None = None
    ) -> StoredSession:
        self.ledger.append("create")
        return await super().create(domain, conversation, owner)

    async def save(self, session: StoredSession) -> StoredSession:
        self.ledger.append("save")
        return await super().save(session)

    async def delete(self, session_id: str) -> None:
        self.ledger.append("delete")
        await super().delete(session_id)


def remind(
    ctx: typer.Context,
    message: Annotated[str, typer.Argument(help="What to be reminded of.")],
    day: Annotated[str, typer.Option(help="The reply to the day question.")] = "Monday",
) -> None:
    """Ask for a reminder and answer its question in one go."""
    app = load_app_or_exit(ctx)

    async def run() -> None:
        first = await app.ask(message, "reminders")
        second = await app.ask(day, session_id=first.session_id)
        typer.echo(f"{first.text} -> {second.text}")
        await app.aclose()

    import asyncio

    asyncio.run(run())


@toolwire.hookimpl
def register_domains(register: RegisterDomain) -> None:
    register(DomainSpec(name="reminders", description="Reminders", rag_tool="reminder"))


@toolwire.hookimpl
def register_tools(register: RegisterTool) -> None:
    tool: type[ChatbotTool[Any]] = ReminderTool
    register(tool)


@toolwire.hookimpl
def register_models(register: RegisterModel) -> None:
    def canned(settings: LLMSettings, environ: Any, profile: ModelProfile) -> ChatModel:
        return ChatModel(CannedTransport(), settings, profile=profile)

    register("canned", canned)


@toolwire.hookimpl
def register_session_stores(register: RegisterSessionStore) -> None:
    def ledger(settings: SessionSettings) -> SessionStore:
        return LedgerStore(settings.ttl_s)

    register("ledger", ledger)


@toolwire.hookimpl
def register_commands(register: RegisterCommand) -> None:
    register(remind)
