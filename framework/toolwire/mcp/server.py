"""A domain as an MCP server (``toolwire mcp serve``), on the SDK's low-level ``Server``.

What a client sees (docs/mcp.md):

- every enabled orchestrator-activated tool of the domain but its ``excluded_tools`` (a call of
  one is an unknown tool), named by its prefixed name
  (``pharma.dosage_info``; MCP tool names may contain dots), its input schema the tool's
  parameter model, its description the tool's description followed by its yes/no question (a
  tool whose description or question raises is left out, logged as ``mcp_tool_left_out``);
- its result the tool's ``ToolExecutionResult``: the text as text content and
  ``{"kind", "text"}`` as structured content (``kind``: ``context``, ``guaranteed`` — a finished
  answer to pass on verbatim —, ``clarification`` — a question for the user; call again with the
  answer in the arguments —, ``terminal``). A tool that raises, or arguments its model rejects,
  give an error result (``isError``), as MCP asks of tool failures (a validator of the model that
  raises, rather than rejects, too: ``its parameter model raised KeyError: ...``, masked);
- ``<domain>.ask``: the whole orchestrator on a message, returning the answer's text and kind,
  the conversation's ``session_id`` (send the next message, a follow-up or the reply to a
  clarifying question, with it), its ``turn`` and ``context`` (what the turn took from the turns
  before, ``Answer.context`` as ``POST /v1/ask`` returns it), its failures
  and its notices (typed: ``context_cut``, ``compression_failed``, ``answer_cut_off``,
  ``clarification_limit``). It shows
  of internal errors what ``POST /v1/ask`` shows, by the same code and
  ``server.expose_error_details``: an answer's failures, and a server-side toolwire error (a
  failed model call), read ``... (error id ...)``, the text logged under that id. It takes a
  place under ``server.max_concurrent_questions`` as ``POST /v1/ask`` does; past it the call is at
  once an error result (``busy: ...``, when to call again), never a wait in a queue. It runs at
  most ``server.request_timeout_s`` (its model calls within 95 % of it), as ``POST /v1/ask``
  does, by the same code: past it the question is cancelled, its place given back, nothing
  stored for the round, and the result is an error in that 504's words (the limit, the setting,
  the last step logged).

A tool runs as the orchestrator would run it: the app's singleton with its injected tools; a
context consumer gets an empty context buffer; its execution text is its arguments as JSON (a
direct call has no user message).
"""

from __future__ import annotations

import json
from importlib import metadata
from typing import TYPE_CHECKING, Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolwire.app import App
from toolwire.conversation import TurnContext
from toolwire.disclosure import disclosed_answer
from toolwire.errors import PLUGIN_FAILURES, ConfigError, ToolwireError, UnknownDomainError
from toolwire.mcp.callers import caller_of
from toolwire.message_text import MessageText
from toolwire.orchestrator.activation import excluded_names
from toolwire.orchestrator.execution import execute
from toolwire.orchestrator.invoke import describe, failed
from toolwire.redaction import redact
from toolwire.run_state import Notice
from toolwire.server.admission import QuestionPlaces
from toolwire.server.problems import ApiError, api_error_for
from toolwire.server.questions import check_message, question_scope, within_request_time
from toolwire.sessions.base import SessionIdText
from toolwire.tools import ChatbotTool, OrchestratorActivatedTool, ResultKind

if TYPE_CHECKING:
    from mcp.server import Server, ServerRequestContext
    from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, Tool

    from toolwire.orchestrator import Answer

log = structlog.get_logger(__name__)

ASK_TOOL = "ask"
"""The short name of the tool that runs the whole orchestrator: ``<domain>.ask``."""


class AskArguments(BaseModel):
    """Ask the domain's chatbot: the whole orchestrator on one message."""

    model_config = ConfigDict(extra="forbid")  # a misspelt session_id must not start a new one

    message: MessageText = Field(
        description="The user's question, a follow-up, or the reply to a clarifying question",
        min_length=1,
    )
    session_id: SessionIdText | None = Field(
        default=None,
        description="To continue a conversation: the session_id of its last answer",
    )


class AskResult(BaseModel):
    """The chatbot's reply: an answer, or a clarifying question to reply to."""

    kind: Literal["answer", "clarification"]
    text: str
    session_id: str | None = Field(
        default=None,
        description="The conversation's id: send the next message with it to continue",
    )
    turn: int = Field(default=1, description="Which turn of the conversation this answers")
    context: TurnContext | None = Field(
        default=None,
        description="What this turn took from the turns before it, as POST /v1/ask's answer "
        "says it (null on a conversation's first turn): the earlier turns read (turns_read), "
        "summaries of older ones (summaries_read), the message rewritten to stand on its own "
        "(standalone, null when it ran as sent), why a rewrite or compression was not used "
        "(notes)",
    )
    guaranteed_contexts: list[str] = Field(default_factory=list)
    failures: list[str] = Field(default_factory=list)
    notices: list[Notice] = Field(
        default_factory=list,
        description="What to know about how the answer was made (context cut for the model, a "
        "compression that failed, the answer cut off at its length limit, a clarifying question "
        "not asked), each with its kind",
    )


class ToolResult(BaseModel):
    """A tool's ``ToolExecutionResult``."""

    kind: ResultKind = Field(
        description="context: text for an answer; guaranteed: a finished answer to pass on "
        "verbatim; clarification: a question for the user (call again with the answer in the "
        "arguments); terminal: the final answer"
    )
    text: str


class DomainMcpServer:
    """One domain of ``app`` as an MCP server: ``server`` runs over stdio or streamable HTTP."""

    def __init__(self, app: App, domain: str | None = None) -> None:
        name = domain or app.config.default_domain
        if name is None and len(app.domains) == 1:
            name = next(iter(app.domains))
        if name is None:
            known = ", ".join(sorted(app.domains)) or "none"
            raise UnknownDomainError(f"name the domain to serve with --domain (domains: {known})")
        app.check_domain(name)
        self.app = app
        self.domain = name
        self.ask_name = f"{name}.{ASK_TOOL}"
        instances = app.tools
        excluded = excluded_names(app.domains[name], app.registry)
        activated: dict[str, ChatbotTool[Any]] = {
            registration.qualified_name: instances[registration.qualified_name]
            for registration in app.registry.in_domain(name)
            if isinstance(instances.get(registration.qualified_name), OrchestratorActivatedTool)
            and registration.qualified_name not in excluded
        }
        if self.ask_name in activated:
            raise ConfigError(
                f"tool {self.ask_name!r} would hide the MCP tool that asks the whole chatbot; "
                "rename the tool (the 'name' key of its YAML entry)"
            )
        self.descriptions: dict[str, str] = {}
        """Prefixed name → what a client reads about the tool (:func:`tool_description`)."""
        for qualified_name, tool in activated.items():
            try:
                self.descriptions[qualified_name] = tool_description(tool)
            except PLUGIN_FAILURES as error:  # left out, as the orchestrator leaves it out too
                log.warning("mcp_tool_left_out", tool=qualified_name, error=describe(error))
        self.tools = {
            qualified_name: tool
            for qualified_name, tool in activated.items()
            if qualified_name in self.descriptions
        }
        """Prefixed name → singleton: the enabled orchestrator-activated tools of the domain,
        but its ``excluded_tools``, whose description and question could be read."""
        self.places = QuestionPlaces(lambda: app.config.server.max_concurrent_questions)
        """The questions ``<domain>.ask`` answers at once: ``server.max_concurrent_questions``,
        over stdio too (one client can send many calls at once, each run in its own task)."""
        self.server = self._build_server()

    def listing(self) -> list[Tool]:
        """The MCP tools offered, the ask tool first, then the domain's tools in registry order."""
        from mcp.types import Tool

        domain = self.app.domains[self.domain]
        ask = Tool(
            name=self.ask_name,
            description=(
                f"Ask the {self.domain} chatbot ({domain.description or 'toolwire domain'}): "
                "it chooses and runs the domain's tools and composes the answer. Pass the "
                "session_id of its last answer to continue the conversation (a follow-up such "
                "as 'and its dose?'); when the reply is a clarifying question, ask the user and "
                "call again with their reply as message and the same session_id."
            ),
            input_schema=AskArguments.model_json_schema(),
            output_schema=AskResult.model_json_schema(),
        )
        return [ask] + [
            Tool(
                name=name,
                description=self.descriptions[name],
                input_schema=tool.params_model.model_json_schema(by_alias=True),
                output_schema=ToolResult.model_json_schema(),
            )
            for name, tool in self.tools.items()
        ]

    def _build_server(self) -> Server[Any]:
        from mcp.server import Server
        from mcp.types import ListToolsResult

        tools = ListToolsResult(tools=self.listing())

        async def list_tools(_ctx: ServerRequestContext[Any], _params: Any) -> ListToolsResult:
            return tools

        async def call_tool(
            ctx: ServerRequestContext[Any], params: CallToolRequestParams
        ) -> CallToolResult:
            return await self.call(params.name, params.arguments or {}, caller_of(ctx.request))

        return Server(
            f"toolwire-{self.domain}",
            version=_toolwire_version(),
            instructions=self.app.domains[self.domain].description or None,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )

    async def call(
        self, name: str, arguments: dict[str, Any], caller: str | None = None
    ) -> CallToolResult:
        """Run the ask tool or one of the domain's tools (what ``tools/call`` does).

        ``caller`` (the API key's name over HTTP) binds a conversation ``<domain>.ask`` starts to
        it, as ``toolwire serve`` does: another caller's ``session_id`` is an unknown session.
        """
        from mcp import MCPError
        from mcp.types import INVALID_PARAMS

        if name == self.ask_name:
            return await self._ask(arguments, caller)
        tool = self.tools.get(name)
        if tool is None:
            offered = ", ".join([self.ask_name, *self.tools])
            raise MCPError(INVALID_PARAMS, f"unknown tool {name!r}; this server offers: {offered}")
        try:
            params = tool.params_model.model_validate(arguments)
        except ValidationError as error:
            return _error(f"invalid arguments for {name}: {_validation_message(error)}")
        except PLUGIN_FAILURES as error:  # a validator of the tool's model raised, not rejected
            log.warning("mcp_arguments_failed", tool=name, error=describe(error))
            return _error(f"invalid arguments for {name}: its parameter model {failed(error)}")
        text = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
        log.info("mcp_tool_called", tool=name, caller=caller)
        try:
            outcome = await execute(self.app.plugin_runner, tool, params, text, {}, None)
        except PLUGIN_FAILURES as error:  # the tool's failure is the caller's to see, as a result
            log.warning("mcp_tool_failed", tool=name, error=describe(error))
            return _error(f"tool {name} {failed(error)}")
        return _structured(outcome.text, ToolResult(kind=outcome.kind, text=outcome.text))

    async def _ask(self, arguments: dict[str, Any], caller: str | None) -> CallToolResult:
        try:
            request = AskArguments.model_validate(arguments)
        except ValidationError as error:
            return _error(f"invalid arguments for {self.ask_name}: {_validation_message(error)}")
        try:
            check_message(request.message, self.app.config.server)
        except ApiError as error:
            return _error(f"invalid arguments for {self.ask_name}: {error.message}")
        try:
            place = self.places.take()
        except ApiError as refusal:  # the cap is full: at once, as POST /v1/ask's 503
            return _error(f"{refusal.error}: {refusal.message}")
        with place:
            return await self._answer(request, caller)

    async def _answer(self, request: AskArguments, caller: str | None) -> CallToolResult:
        try:
            answer = await self._asked(request, caller)
        except ApiError as error:  # shown out of the question's scope: the session id as sent
            return _error(error.message)
        verbose = self.app.config.server.expose_error_details
        answer = disclosed_answer(answer, verbose=verbose)
        result = AskResult(
            kind=answer.kind,
            text=answer.text,
            session_id=answer.session_id,
            turn=answer.turn,
            context=answer.context,
            guaranteed_contexts=answer.guaranteed_contexts,
            failures=answer.failures,
            notices=answer.notices,
        )
        text = answer.text
        if answer.kind == "clarification":
            text += (
                f"\n\n[a clarifying question: call {self.ask_name} with the user's reply as "
                f'message and session_id "{answer.session_id}"]'
            )
        return _structured(text, result)

    async def _asked(self, request: AskArguments, caller: str | None) -> Answer:
        """The answer, within ``server.request_timeout_s`` as ``POST /v1/ask``'s, by its code
        (``ApiError``: a toolwire error's or the time limit's, as that response would say)."""
        settings = self.app.config.server
        limit = settings.request_timeout_s
        with question_scope(request.session_id, caller, limit) as progress:
            log.info("mcp_ask", domain=self.domain, resumes=request.session_id is not None)
            question = self.app.ask(request.message, self.domain, request.session_id, caller=caller)
            try:
                return await within_request_time(question, limit, progress)
            except ToolwireError as error:  # logged here, where the session is scrubbed
                raise api_error_for(error, verbose=settings.expose_error_details) from error


def tool_description(tool: ChatbotTool[Any]) -> str:
    """What an MCP client reads about a tool: its description, then its yes/no question."""
    description = tool.description() or type(tool).__name__
    question = tool.executable_instruction()
    return f"{description}\n\nUse it when the answer to this question is yes: {question}".strip()


def _structured(text: str, result: BaseModel) -> CallToolResult:
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(
        content=[TextContent(text=text)], structured_content=result.model_dump(mode="json")
    )


def _error(message: str) -> CallToolResult:
    """An error result; secrets of known shapes are masked, as in every text callers see."""
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(text=redact(message))], is_error=True)


def _validation_message(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or '(arguments)'}: {item['msg']}"
        for item in error.errors()
    )


def _toolwire_version() -> str:
    try:
        return metadata.version("toolwire")
    except metadata.PackageNotFoundError:
        return ""


__all__ = ["ASK_TOOL", "AskArguments", "AskResult", "DomainMcpServer", "ToolResult"]
