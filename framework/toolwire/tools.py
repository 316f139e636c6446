"""The contracts a plugin author implements (SPEC §2).

A tool is a singleton built by the container: whatever one run needs arrives as arguments (the
parameters, the execution text, a snapshot of the context buffer), never in instance fields.
Tool methods may be plain or ``async``; the orchestrator awaits what needs awaiting and runs plain
methods in a worker thread.
"""

from __future__ import annotations

import inspect
import re
import typing
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Sequence
from enum import StrEnum
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from toolwire.context_buffer import ContextBuffer, PageRef, PromptAndContext
from toolwire.errors import ToolDeclarationError, did_you_mean
from toolwire.llm.prompts import sourced_text
from toolwire.run_state import Clarification, SubtaskDecision
from toolwire.task import TaskInfo, is_coordinator_requested

P = TypeVar("P", bound=BaseModel)

TOOL_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
"""Short tool names and domain names: lower snake case, so ``domain.short`` and its wire form
``domain-short`` are both unambiguous and reversible."""


class ResultKind(StrEnum):
    CONTEXT = "context"
    GUARANTEED = "guaranteed"
    CLARIFICATION = "clarification"
    TERMINAL = "terminal"


class ToolExecutionResult(BaseModel):
    """A tool run's outcome: context, guaranteed context, a clarifying question or an answer."""

    model_config = ConfigDict(frozen=True)

    kind: ResultKind
    text: str
    pages: tuple[PageRef, ...] = ()
    """The pages the context was read from, as data (a search tool's result): tools that build
    on earlier results read them from the buffer (``PromptAndContext.pages``)."""

    @classmethod
    def context(cls, text: str, *, pages: Sequence[PageRef] = ()) -> ToolExecutionResult:
        """Ordinary context for the answer composer (empty text: the tool found nothing)."""
        return cls(kind=ResultKind.CONTEXT, text=text, pages=tuple(pages))

    @classmethod
    def as_guaranteed_context(
        cls, text: str, *, pages: Sequence[PageRef] = ()
    ) -> ToolExecutionResult:
        """A finished answer that must reach the caller verbatim (seed 6.6)."""
        return cls(kind=ResultKind.GUARANTEED, text=text, pages=tuple(pages))

    @classmethod
    def clarifying_question(cls, question: str) -> ToolExecutionResult:
        """Stop the round and ask the user; the reply resumes the same task."""
        return cls(kind=ResultKind.CLARIFICATION, text=question)

    @classmethod
    def terminal(cls, answer: str) -> ToolExecutionResult:
        """A final answer that ends processing of the whole message."""
        return cls(kind=ResultKind.TERMINAL, text=answer)


ToolOutcome = ToolExecutionResult | Awaitable[ToolExecutionResult]


def coordinator_only_instruction(tool_name: str) -> str:
    """The suitability question of a tool that runs only on coordinator-designated tasks."""
    return f"{tool_name}: always false – runs only on coordinator-designated tasks"


def _snake_case(class_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", class_name).lower()


def _params_model_from_generic(cls: type) -> type[BaseModel] | None:
    """The pydantic model bound to ``ChatbotTool[P]`` anywhere in the class's bases."""
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            for argument in typing.get_args(base):
                if isinstance(argument, type) and issubclass(argument, BaseModel):
                    return argument
    return None


class ChatbotTool(ABC, Generic[P]):
    """A tool: a suitability question, a parameter model and an execution method.

    Declare the parameters as the generic argument (``ChatbotTool[MyParams]``) or as the class
    attribute ``params_model``. ``name`` defaults to the snake-case class name and ``priority`` to
    100; the YAML declaration may override both per instance.
    """

    name: str
    """Short name, unique within the tool's domain (``get_name()`` in the original)."""
    priority: int = 100
    """Lower runs first, both among coordinators and among activated tools."""
    domain: str = ""
    """Set by the container when the tool is registered."""
    params_model: ClassVar[type[BaseModel]]
    settings_model: ClassVar[type[BaseModel] | None] = None
    """Optional pydantic model that the YAML ``settings`` mapping is validated against."""
    examples: ClassVar[Sequence[str]] = ()
    """Sample user messages this tool answers. Optional: tool selection indexes them beside the
    tool's name, description, suitability question and parameter fields; YAML ``examples`` replace
    them per declaration."""
    coordinator_only: ClassVar[bool] = False
    """True for a tool that runs only on coordinator-designated tasks (``required_tool_names``),
    never on a user's question: its suitability question always answers no (seed 6.4), so the
    orchestrator spends no model call on it, and a small model cannot wrongly answer yes."""
    external_source: ClassVar[str | None] = None
    """Where the tool's own text comes from when that is outside the trusted configuration (an
    MCP server's tool: ``"mcp server <name>"``), else None. The prompts then show its description,
    its question, the summary in its parameter instruction and its parameters' descriptions as
    external content of that source (SPEC §5, ``toolwire.llm.prompts.external_content``): data,
    never instructions. None (a plugin's tool): shown as written."""
    own_event_loop: bool = False
    """True: the tool's ``async`` methods run in a tool thread, on an event loop of that thread,
    so one that blocks (``time.sleep``, CPU work) holds only that thread, and
    ``orchestrator.tool_timeout_s`` still ends it for the question. Such a method must not use
    objects made on the app's loop: the injected ``LanguageModel``, an ``httpx.AsyncClient`` or
    ``asyncio.Lock`` made in ``__init__`` (make them inside the call). The YAML ``own_event_loop``
    sets it per declaration. Plain methods always run in a tool thread."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = _snake_case(cls.__name__).removesuffix("_tool") or cls.__name__.lower()
        if "params_model" not in cls.__dict__:
            generic_model = _params_model_from_generic(cls)
            if generic_model is not None:
                cls.params_model = generic_model

    @property
    def qualified_name(self) -> str:
        """``"<domain>.<short name>"`` once registered, the short name before."""
        return f"{self.domain}.{self.name}" if self.domain else self.name

    @abstractmethod
    def executable_instruction(self) -> str:
        """The yes/no suitability question the model answers for this tool on a task prompt.

        A tool that must run only on coordinator-designated tasks returns a question that always
        answers no (``coordinator_only_instruction(self.name)``) and sets ``coordinator_only``.
        """

    def description(self) -> str:
        """What the tool does, in a sentence: the class docstring's first paragraph by default.

        Tool selection indexes it and shows it to the model beside the suitability question.
        """
        doc = inspect.cleandoc(type(self).__doc__ or "")  # a class's own docstring only
        return " ".join(doc.split("\n\n", 1)[0].split())

    def parameter_instruction(self) -> str:
        """What the model is told when it fills ``params_model`` from the execution text.

        Kept apart from the suitability question, which for a coordinator-only tool always
        answers no and would mislead the extraction. The default names the tool and its purpose
        (the class docstring's first line); the fields' descriptions in the parameter model carry
        the rest. Override it when the parameters need more guidance. For a tool with an
        ``external_source`` the purpose is shown as external content of that source.
        """
        summary = (type(self).__doc__ or "").strip().splitlines()
        shown = sourced_text(self.external_source, summary[0].strip()) if summary else ""
        purpose = f" ({shown})" if summary else ""
        return f"Fill in the parameters for the tool {self.name!r}{purpose} from the text."

    def params_from_text(self, text: str) -> P | None:
        """Parameters the tool reads from the execution text itself, without the model; None
        (the default): the model extracts them. A search tool whose query is the request
        returns them here, and saves a model call on every task it runs on."""
        return None

    def execute_with_result(self, params: P, text: str) -> ToolOutcome:
        """Run the tool on parameters extracted from ``text`` (the execution text)."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement execute_with_result(params, text)"
        )

    def execute_with_clarification(
        self, params: P, text: str, clarification: Clarification
    ) -> ToolOutcome:
        """Continue after the user answered this tool's clarifying question.

        ``params`` were extracted again from the execution text plus the question and the reply.
        The default simply runs the tool again with them.
        """
        return self.execute_with_result(params, text)

    def is_coordinator_requested(self, text: str) -> bool:
        """Whether ``text`` carries a coordinator-designated task (seed 6.6)."""
        return is_coordinator_requested(text)


class OrchestratorActivatedTool(ChatbotTool[P], ABC):
    """A tool that takes part in the orchestrator's activation (suitability test, priority).

    Tools that are not orchestrator-activated are reachable only by direct injection (seed 6.8).
    """


class AgentCoordinator(ABC):
    """A tool that may decompose a task into subtasks before the suitability test (seed 6.1)."""

    @abstractmethod
    def decompose_into_subtasks(self, task: TaskInfo) -> TaskInfo | Awaitable[TaskInfo]:
        """Return the *same* task: unchanged when not relevant, else with a longer
        ``task_prompt`` and/or filled ``sub_tasks``. Never set ``owner_coordinator_name``."""

    def decide_conditional_subtask(
        self, parent: TaskInfo, next_subtask: TaskInfo, completed_so_far: ContextBuffer
    ) -> SubtaskDecision | Awaitable[SubtaskDecision]:
        """Whether a conditional subtask runs, given its siblings' results so far (seed 6.4)."""
        return SubtaskDecision.RUN


class ContextConsumerTool(ChatbotTool[P], ABC):
    """A tool that needs the context buffer: run only through ``execute_with_prior_context``."""

    def execute_with_result(self, params: P, text: str) -> ToolOutcome:
        raise TypeError(
            f"{type(self).__name__} is a context consumer: call "
            "execute_with_prior_context(params, text, prior_context) instead"
        )

    @abstractmethod
    def execute_with_prior_context(
        self, params: P, text: str, prior_context: ContextBuffer
    ) -> ToolOutcome:
        """Run with a snapshot of the buffer: earlier tools of this round and subtask results."""


class ClarifiableContextConsumerTool(ContextConsumerTool[P], ABC):
    """A context consumer whose clarification round also continues with the context."""

    def execute_with_clarification(
        self, params: P, text: str, clarification: Clarification
    ) -> ToolOutcome:
        raise TypeError(
            f"{type(self).__name__} is a clarifiable context consumer: call "
            "execute_with_clarification_and_prior_context(...) instead"
        )

    @abstractmethod
    def execute_with_clarification_and_prior_context(
        self,
        params: P,
        text: str,
        clarification: Clarification,
        prior_context: ContextBuffer,
    ) -> ToolOutcome:
        """Continue after the user's reply, with a fresh snapshot of the buffer."""


class ToolKind(StrEnum):
    """What a tool class takes part in; ``toolwire tools --json`` lists these."""

    ACTIVATED = "activated"
    COORDINATOR = "coordinator"
    CONTEXT_CONSUMER = "context_consumer"
    CLARIFIABLE = "clarifiable"


def tool_kinds(tool_class: type) -> list[ToolKind]:
    """The kinds of a tool class, in a fixed order."""
    checks = [
        (ToolKind.ACTIVATED, OrchestratorActivatedTool),
        (ToolKind.COORDINATOR, AgentCoordinator),
        (ToolKind.CONTEXT_CONSUMER, ContextConsumerTool),
        (ToolKind.CLARIFIABLE, ClarifiableContextConsumerTool),
    ]
    return [kind for kind, base in checks if issubclass(tool_class, base)]


def _schema_problems(params: type[BaseModel]) -> list[str]:
    """The model fills a tool's parameters from their JSON schema: a parameter model that has
    none (a ``Callable`` field, an arbitrary type) would fail every question that activates it."""
    try:
        params.model_json_schema(by_alias=True)
    except Exception as error:  # pydantic's PydanticInvalidForJsonSchema, or a broken model
        why = str(error).splitlines()[0] if str(error) else type(error).__name__
        return [
            f"its parameter model {params.__qualname__} has no JSON schema ({why}); give its "
            "fields JSON types (str, int, float, bool, lists, nested models)"
        ]
    return []


def _examples_problems(examples: object) -> list[str]:
    """``examples`` must be a list or tuple of messages. A string is a sequence of strings too,
    so type checkers pass ``examples = ("Book a room")``, the one-message tuple without its
    comma, which selection would index letter by letter."""
    if isinstance(examples, str):
        return [
            f"its examples is the string {examples!r}, not a tuple of messages; "
            f"write examples = ({examples!r},) with the trailing comma"
        ]
    if not isinstance(examples, list | tuple) or not all(isinstance(e, str) for e in examples):
        return [f"its examples {examples!r} is not a list or tuple of strings"]
    return []


def abstract_method_problems(tool_class: type) -> list[str]:
    """The abstract methods the class leaves unimplemented, each with the closest method the
    class does define (a misspelt one leaves the abstract one in place)."""
    abstract = sorted(getattr(tool_class, "__abstractmethods__", ()))
    if not abstract:
        return []
    defined = _own_methods(tool_class)
    missing = ", ".join(name + _close_method(name, defined) for name in abstract)
    return [f"it leaves abstract methods unimplemented: {missing}"]


def execute_method_problems(tool: ChatbotTool[Any] | type[ChatbotTool[Any]]) -> list[str]:
    """The missing ``execute_with_result`` of a tool the orchestrator runs through it (see
    :func:`runs_execute_with_result`), with the closest method the class defines; ``[]`` when
    the tool has one. The base's is not abstract (a tool reached only by injection never runs
    it) and raises ``NotImplementedError``, so a tool that misspells it would load, pass
    ``toolwire check`` and fail at the first question that activates it.

    ``tool`` is a built instance (one that sets ``self.execute_with_result`` in ``__init__``
    has one) or a class. The container checks each enabled tool once it is built; a disabled
    one (work in progress) is never built, so it needs none. :func:`validate_tool_class` runs
    when a class is registered, before the YAML says whether it is enabled, and leaves this out.

    A class is what the container checks when the build stops for other problems, before any
    tool is built: one whose own ``__init__``, or an ancestor's other than toolwire's bases,
    assigns ``execute_with_result`` (see :func:`_init_sets_execute_with_result`) cannot be told
    apart from a tool that lacks one, so it gives ``[]`` and its built tool decides.
    """
    tool_class = tool if isinstance(tool, type) else type(tool)
    if not runs_execute_with_result(tool):
        return []
    if tool_class.execute_with_result is not ChatbotTool.execute_with_result:
        return []
    if isinstance(tool, type):
        if _init_sets_execute_with_result(tool):
            return []
    elif "execute_with_result" in getattr(tool, "__dict__", {}):
        return []
    return [
        "it does not define execute_with_result(params, text)"
        + _close_method("execute_with_result", _own_methods(tool_class))
        + ": an activated tool runs through it, and the base's raises NotImplementedError"
    ]


def _init_sets_execute_with_result(tool_class: type) -> bool:
    """Whether the class's ``__init__``, or an ancestor's other than toolwire's bases, may
    assign ``execute_with_result``: its source names it (a cheap look, not a parse). An
    ``__init__`` whose source cannot be read (defined in a REPL, generated) may, too: only its
    built tool can tell (``object``'s and other builtins' never do)."""
    for klass in tool_class.__mro__:
        init = vars(klass).get("__init__")
        if init is None or _is_toolwires(klass) or klass.__module__ == "builtins":
            continue
        try:
            if "execute_with_result" in inspect.getsource(init):
                return True
        except (OSError, TypeError):
            return True
    return False


def runs_execute_with_result(tool: ChatbotTool[Any] | type[ChatbotTool[Any]]) -> bool:
    """Whether the orchestrator may run the tool through ``execute_with_result``: an activated
    tool does, unless it is a context consumer (``execute_with_prior_context`` runs instead) or
    a coordinator that sets ``coordinator_only`` (never a selection candidate: it decomposes).
    A coordinator that is not ``coordinator_only`` is a candidate like any activated tool, and
    runs ``execute_with_result`` when it is chosen."""
    tool_class = tool if isinstance(tool, type) else type(tool)
    if not issubclass(tool_class, OrchestratorActivatedTool):
        return False
    if issubclass(tool_class, ContextConsumerTool):
        return False
    return not (issubclass(tool_class, AgentCoordinator) and tool.coordinator_only)


def _is_toolwires(klass: type) -> bool:
    """Whether ``klass`` is one of toolwire's own classes (a base a tool derives from)."""
    return klass.__module__ == "toolwire" or klass.__module__.startswith("toolwire.")


def _own_methods(tool_class: type) -> set[str]:
    """The methods the author added, overriding none of toolwire's: the candidates for a
    misspelt one (``execute_with_clarification`` is an override, never a misspelling). Every
    toolwire base's methods are left out, wherever in toolwire the base is defined
    (``toolwire.search``'s tool bases too)."""
    theirs = {name for klass in tool_class.__mro__ if _is_toolwires(klass) for name in vars(klass)}
    return {
        name
        for klass in tool_class.__mro__
        if not _is_toolwires(klass)
        for name, value in vars(klass).items()
        if callable(value) and not name.startswith("__") and name not in theirs
    }


def _close_method(name: str, defined: set[str]) -> str:
    """`` (did you mean 'execute_with_results'?)`` when the class defines a method close to
    ``name``, else ``""``."""
    hint = did_you_mean(name, sorted(defined)).strip()
    return f" ({hint})" if hint else ""


def validate_tool_class(tool_class: object, *, where: str = "") -> type[ChatbotTool[Any]]:
    """Check a tool class when it is registered, so mistakes surface at start, not mid-chat.

    What the class alone decides (abstract methods, parameter model, name, priority, examples);
    a missing ``execute_with_result`` is the container's check of an enabled, built tool
    (:func:`execute_method_problems`)."""
    location = f" ({where})" if where else ""
    if not (isinstance(tool_class, type) and issubclass(tool_class, ChatbotTool)):
        raise ToolDeclarationError(
            f"{tool_class!r}{location} is not a ChatbotTool subclass; "
            "derive it from toolwire.ChatbotTool[YourParams] or OrchestratorActivatedTool"
        )
    problems = abstract_method_problems(tool_class)
    params = getattr(tool_class, "params_model", None)
    if not (isinstance(params, type) and issubclass(params, BaseModel)):
        problems.append(
            "it has no parameter model; declare it as ChatbotTool[MyParams] "
            "or set params_model = MyParams (a pydantic BaseModel)"
        )
    else:
        problems.extend(_schema_problems(params))
    settings = tool_class.settings_model
    is_model = isinstance(settings, type) and issubclass(settings, BaseModel)
    if settings is not None and not is_model:
        problems.append("settings_model must be a pydantic BaseModel subclass or None")
    priority: object = tool_class.priority
    if not isinstance(priority, int) or isinstance(priority, bool):
        problems.append(
            f"its priority {priority!r} is a {type(priority).__name__}, not a whole number"
        )
    if not TOOL_NAME_PATTERN.match(tool_class.name):
        problems.append(
            f"its default name {tool_class.name!r} is not lower snake case ([a-z][a-z0-9_]*)"
        )
    problems.extend(_examples_problems(tool_class.examples))
    if problems:
        raise ToolDeclarationError(
            f"tool class {tool_class.__module__}.{tool_class.__qualname__}{location}: "
            + "; ".join(problems)
        )
    return tool_class


__all__ = [
    "AgentCoordinator",
    "ChatbotTool",
    "ClarifiableContextConsumerTool",
    "ContextConsumerTool",
    "OrchestratorActivatedTool",
    "PromptAndContext",
    "ResultKind",
    "ToolExecutionResult",
    "ToolKind",
    "abstract_method_problems",
    "coordinator_only_instruction",
    "execute_method_problems",
    "runs_execute_with_result",
    "tool_kinds",
    "validate_tool_class",
]
