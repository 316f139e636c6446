"""The per-domain orchestrator: SPEC §3 (seed 000, sections 6.1-6.8 and the 6.10 hook).

One round walks the task tree depth-first. For each task that is not closed: the coordinator
chain (step 1-2), its open subtasks in order (3-4), activation (5), its tools in priority order
(6-7), then the gatekeeper and the deep fallback (8). State lives on the tasks, so
a round that stops for a clarifying question resumes exactly where it stopped. Every piece of
that state is the tasks' run state (``TaskInfo.run``, :mod:`toolwire.run_state`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog

from toolwire.context_buffer import PageRef, PromptAndContext
from toolwire.errors import (
    PLUGIN_FAILURES,
    ConfigError,
    ModelError,
    Problem,
    ToolNameError,
    UnknownToolError,
    exits_as_errors,
)
from toolwire.events import (
    ClarificationAsked,
    DeepSearchRound,
    TaskFinished,
    TaskStarted,
    ToolFinished,
    ToolsChosen,
    ToolStarted,
    emit,
    opened,
)
from toolwire.llm.attempts import call_model
from toolwire.llm.base import (
    CallRecord,
    GatekeeperVerdict,
    LanguageModel,
    Purpose,
    RetrievalPlace,
    current_calls,
    domain_prompt,
    retrieval_place,
)
from toolwire.llm.context_limits import ContextIssue, collect_context_issues
from toolwire.llm.history import reading_history
from toolwire.llm.status_bar import status_bar
from toolwire.logging import bound
from toolwire.orchestrator.activation import DomainTools, choose_tools, classify
from toolwire.orchestrator.answer import answer_cut_off
from toolwire.orchestrator.buffer import (
    buffer_of,
    closed_before,
    siblings_so_far,
    snapshot,
    subtree_results,
)
from toolwire.orchestrator.coordinators import (
    NamedCoordinator,
    apply_coordinators,
    decide_conditional,
)
from toolwire.orchestrator.execution import (
    clarified_text,
    execute,
    extract_params,
    known_params,
)
from toolwire.orchestrator.invoke import failed
from toolwire.orchestrator.isolation import answer_contexts
from toolwire.registry import DomainSpec, ToolRegistry, domain_reference_problems
from toolwire.run_state import (
    AgentStatus,
    Clarification,
    DeepSearchProgress,
    GatekeeperRecord,
    Notice,
    SubtaskDecision,
    TaskRun,
    TaskStatus,
    ToolOutcome,
    ToolRun,
    ToolRunState,
)
from toolwire.selection.pipeline import Selection, ToolSelector
from toolwire.selection.selectable import SelectableTool
from toolwire.selection.state import SelectionStep
from toolwire.selection.steps import builtin_steps
from toolwire.settings import OrchestratorSettings
from toolwire.task import ROOT_TASK_NO, TaskInfo, escape_marker
from toolwire.tool_threads import PluginRunner
from toolwire.tools import (
    AgentCoordinator,
    ChatbotTool,
    ClarifiableContextConsumerTool,
    ContextConsumerTool,
    ResultKind,
)

log = structlog.get_logger(__name__)

DETAIL_CHARS = 200
"""How much of a tool's result the trace keeps."""
TERMINAL_SKIP = "not run: an earlier tool gave a terminal answer"

_OUTCOMES: dict[ResultKind, ToolOutcome] = {
    ResultKind.CONTEXT: "context",
    ResultKind.GUARANTEED: "guaranteed",
    ResultKind.TERMINAL: "terminal",
}
"""The trace outcome of a tool's result (a clarifying question waits instead)."""

_may_ask_the_user: ContextVar[bool] = ContextVar("toolwire_may_ask_the_user", default=True)
"""Whether the round being run may still stop for a clarifying question: :meth:`run_round`
sets it from ``orchestrator.max_clarification_rounds`` (a round asks one question at most)."""


_round_root: ContextVar[TaskInfo | None] = ContextVar("toolwire_round_root", default=None)
"""The root task of the round being run (:meth:`run_round` sets it): a context consumer's
snapshot holds the results of every task that closed before its own in the tree."""


@contextmanager
def _asking_allowed(allowed: bool) -> Iterator[None]:
    token = _may_ask_the_user.set(allowed)
    try:
        yield
    finally:
        _may_ask_the_user.reset(token)


@contextmanager
def _forgotten(preselected: dict[int, Selection], root: TaskInfo) -> Iterator[None]:
    """The round of ``root``: a selection made for it and not taken is dropped at its end."""
    try:
        yield
    finally:
        preselected.pop(id(root), None)


@contextmanager
def _rooted(root: TaskInfo) -> Iterator[None]:
    token = _round_root.set(root)
    try:
        yield
    finally:
        _round_root.reset(token)


@dataclass(frozen=True)
class Stop:
    """Why a round stopped before the answer: a clarifying question or a terminal answer."""

    kind: Literal["clarification", "terminal"]
    text: str
    tool_name: str


@dataclass(frozen=True)
class RoundResult:
    """What one round produced for the caller."""

    kind: Literal["answer", "clarification"]
    text: str
    guaranteed_contexts: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)


class DomainOrchestrator:
    """Runs SPEC §3 for one domain; shared by all conversations, so it holds no per-question state.

    ``tools`` maps prefixed names to the singletons; the registry resolves short and prefixed
    names. Subclass and override :meth:`get_deep_fallback_tool` to choose the deep fallback in
    code; by default it comes from the domain's ``deep_fallback`` mapping. ``runner`` runs the
    tools' methods (one per app, shared by its domains); by default the orchestrator makes its own
    from ``settings``.
    """

    def __init__(
        self,
        domain: DomainSpec,
        registry: ToolRegistry,
        tools: Mapping[str, ChatbotTool[Any]],
        llm: LanguageModel,
        settings: OrchestratorSettings | None = None,
        runner: PluginRunner | None = None,
        selection_steps: Sequence[SelectionStep] | None = None,
    ) -> None:
        """``selection_steps``: the tool selection's steps, built by the app from
        ``orchestrator.selection.steps`` or the model's profile (None: the settings' steps, or
        the default ones, from toolwire's own)."""
        self.domain = domain
        self.registry = registry
        self.llm = llm
        self.settings = settings or OrchestratorSettings()
        self.runner = runner or PluginRunner.of(self.settings)
        self._tools = dict(tools)
        problems = domain_reference_problems(
            domain, registry, lambda registration: registration.qualified_name in self._tools
        )
        if problems:
            raise ConfigError([Problem(problem) for problem in problems])
        steps = (
            tuple(selection_steps)
            if selection_steps is not None
            else builtin_steps(self.settings.selection)
        )
        self._scope = DomainTools.build(domain, registry, self._tools, steps)
        self._preselected: dict[int, Selection] = {}
        """A root task's selection made before its round (:meth:`run_round`), by the task's id:
        taken by the task or forgotten when the round ends."""
        self._coordinators = [
            NamedCoordinator.of(c.tool)
            for c in sorted(self._scope.activatable(), key=lambda c: c.sort_key)
            if isinstance(c.tool, AgentCoordinator)
        ]
        self._fallback_tools = {
            prompt_type: self._scope.candidate(name).tool
            for prompt_type, name in domain.deep_fallback.items()
        }

    @property
    def selector(self) -> ToolSelector:
        """The domain's tool selection (its tool index and steps), built once with the
        orchestrator; ``await selector.select(task_prompt, llm, attempts)`` runs SPEC §3 step 5
        on its own (``bench/eval_selection.py`` does)."""
        return self._scope.selector

    async def select_first(self, message: str) -> Selection | None:
        """The tool selection the first task of ``message`` would make, made now (for routing;
        hand it to :meth:`run_round` as ``preselected`` and that task takes it). None: the
        domain takes every message without one (it has a retrieval tool, ``rag_tool``, which
        runs for every task, or no selectable tools)."""
        if self._scope.rag is not None or not self._scope.suitability_candidates:
            return None
        task_prompt = escape_marker(message)
        first = {"domain": self.domain.name, "task_no": ROOT_TASK_NO}  # the task made for it
        with bound(**first), self.fixed_text():
            return await self.selector.select(task_prompt, self.llm, self.settings.model_attempts)

    def fixed_text(self) -> AbstractContextManager[None]:
        """Inside the block, every model call's fixed prefix carries the domain's description and
        instructions (the conversation service opens it for a follow-up's rewrite too)."""
        return domain_prompt(self.domain.description, self.domain.instructions)

    def describing_tools(self) -> list[SelectableTool]:
        """The tools that tell what the domain covers, for routing: its selectable tools and
        its retrieval tool."""
        return [*self._scope.selector.catalogue.tools, *self._scope.rag_entry()]

    def tool(self, name: str) -> ChatbotTool[Any]:
        """A built tool by short or prefixed name (short names resolve in this domain first),
        for overrides such as :meth:`get_deep_fallback_tool`; ``ToolNameError`` if none."""
        return self._scope.candidate(name).tool

    # -- hooks ------------------------------------------------------------------------------

    def get_deep_fallback_tool(self, prompt_type: str) -> ChatbotTool[Any] | None:
        """The deep search tool for a prompt type (None: no deep search for it; seed 6.10).

        Looks the type up in the domain's ``deep_fallback`` mapping, then ``"*"``.
        """
        tool = self._fallback_tools.get(prompt_type)
        return tool if tool is not None else self._fallback_tools.get("*")

    def classifies_first(self) -> bool:
        """Whether task "1" is classified before anything runs. False by default: toolwire
        reads ``prompt_type`` only to choose the deep fallback, so the classification call is
        made once the gatekeeper found the context short and the types' fallbacks differ (for
        most questions never). Override to return True in a domain whose coordinators or tools
        read ``prompt_type`` or ``important_words``."""
        return False

    # -- a conversation's rounds ------------------------------------------------------------

    async def new_task(self, message: str) -> TaskInfo:
        """Task "1" for a user's message; classified into the domain's prompt types first only
        when :meth:`classifies_first` says so (otherwise when the deep fallback needs the type,
        :meth:`_fallback_for`), and typed without a call when the domain has one type.

        The message cannot carry the coordinator marker (:func:`escape_marker`): only the
        orchestrator designates tasks.
        """
        message = escape_marker(message)
        run = TaskRun(user_message=message)
        task = TaskInfo(task_no=ROOT_TASK_NO, task_prompt=message, run=run)
        with bound(domain=self.domain.name), self.fixed_text():
            if self.classifies_first() or len(self.domain.prompt_types) < 2:
                await classify(
                    self.llm, task, self.domain.prompt_types, self.settings.model_attempts
                )
        return task

    async def run_round(
        self, root: TaskInfo, *, preselected: Selection | None = None
    ) -> RoundResult:
        """Process the tree (fresh or resumed) and compose the answer unless the round stopped.

        ``preselected``: the root task's tool selection, made already for this message
        (:meth:`select_first`, routing); the root takes it if its prompt is the same.

        Every event logged meanwhile, by toolwire or by a plugin's tool, carries the lineage of
        the step it belongs to: ``domain``, ``task_no``, ``coordinator`` (the one decomposing, or
        the one that created the task) and ``tool``. Every model call of the round, tools'
        included, shares the domain's fixed text. What the model's prompts left out (a part cut
        to fit, a compression that failed) is filed on its task as a notice. Once ``root``'s
        tree (one user message and the replies to its questions) has asked
        ``orchestrator.max_clarification_rounds`` clarifying questions, a tool's further question
        is not asked (:meth:`_decline`); the next message starts a new tree, and a new count.
        """
        asked = sum(len(task.run.clarifications) for task in root.walk())
        if preselected is not None:
            self._preselected[id(root)] = preselected
        with (
            bound(domain=self.domain.name),
            self.fixed_text(),
            collect_context_issues() as issues,
            _asking_allowed(asked < self.settings.max_clarification_rounds),
            _rooted(root),
            _forgotten(self._preselected, root),
        ):
            stop = await self.process(root, depth=0)
            file_context_issues(root, issues)
            if stop is not None and stop.kind == "clarification":
                return RoundResult(
                    "clarification", stop.text, [], root_failures(root), root_notices(root)
                )
            results = subtree_results(root)
            # a blank guaranteed context answers nothing: the answer must not rest on it
            guaranteed = [r.context for r in results if r.guaranteed and r.context.strip()]
            if stop is not None:
                text = stop.text
            else:
                text = await self._compose(root, results, guaranteed, issues)
            return RoundResult("answer", text, guaranteed, root_failures(root), root_notices(root))

    async def process(self, task: TaskInfo, depth: int) -> Stop | None:
        """SPEC §3 steps 1-8 on one task; returns why it stopped, or None once it is closed."""
        if task.run.status.is_closed:
            return None
        lineage = {"task_no": task.task_no}
        if task.owner_coordinator_name is not None:
            lineage["coordinator"] = task.owner_coordinator_name
        with bound(**lineage), opened(TaskStarted.of(task)) as step:
            stop = await self._process(task, depth)
            emit(TaskFinished(step=step, task_no=task.task_no, status=task.run.status))
            return stop

    async def _process(self, task: TaskInfo, depth: int) -> Stop | None:
        if task.run.status is TaskStatus.WAITING_FOR_USER:
            # resumed with the reply: its question is answered, whatever its tools do next (a
            # tool that fails or asks again must not leave it counted as waiting)
            task.run.status = TaskStatus.PENDING
        await apply_coordinators(task, self._coordinators, self.runner)
        stop = await self._process_subtasks(task, depth)
        if stop is not None:
            return stop
        if task.run.status is TaskStatus.PENDING and not task.run.tool_runs:
            task.run.tool_runs.extend(await self._choose_tools(task))
        stop = await self._run_pending(task)
        if stop is not None:
            return stop
        stop = await self._deep_fallback(task, depth)
        if stop is not None:
            return stop
        task.run.status = TaskStatus.DONE
        return None

    # -- step 3: subtasks -------------------------------------------------------------------

    async def _process_subtasks(self, task: TaskInfo, depth: int) -> Stop | None:
        for sub_task in task.sub_tasks:
            run = sub_task.run
            if run.status.is_closed:
                continue
            if depth + 1 > self.settings.max_depth:
                run.status = TaskStatus.FAILED
                message = (
                    f"subtask {sub_task.task_no} not processed: depth limit "
                    f"{self.settings.max_depth} reached"
                )
                run.failures.append(message)
                log.warning("depth_limit_reached", task_no=sub_task.task_no)
                continue
            if sub_task.conditional and run.decision is None:
                owner = self._owner(sub_task)
                await decide_conditional(
                    self.runner, owner, task, sub_task, snapshot(siblings_so_far(task, sub_task))
                )
                log.info("conditional_decided", task_no=sub_task.task_no, decision=run.decision)
                if run.decision is SubtaskDecision.SKIP:
                    run.status = TaskStatus.SKIPPED
                    continue
            stop = await self.process(sub_task, depth + 1)
            if stop is not None:
                return stop
        return None

    def _owner(self, sub_task: TaskInfo) -> AgentCoordinator | None:
        if sub_task.owner_coordinator_name is None:
            return None
        try:
            tool = self._scope.candidate(sub_task.owner_coordinator_name).tool
        except ToolNameError:
            return None
        return tool if isinstance(tool, AgentCoordinator) else None

    # -- steps 5-7: activation and running --------------------------------------------------

    async def _choose_tools(self, task: TaskInfo) -> list[ToolRun]:
        chosen = await choose_tools(
            task,
            llm=self.llm,
            scope=self._scope,
            attempts=self.settings.model_attempts,
            preselected=self._preselected.pop(id(task), None),
        )
        emit(ToolsChosen.of(task, chosen))
        return chosen

    async def _run_pending(self, task: TaskInfo) -> Stop | None:
        """Run the task's activated tools that have not run yet, in their (priority) order."""
        waiting = [run for run in task.run.tool_runs if run.state is not ToolRunState.CLOSED]
        await _all_or_none(self._prepare(task, run) for run in waiting)
        for run in waiting:
            if run.state is ToolRunState.CLOSED:  # its parameters could not be extracted
                continue
            stop = await self._run_one(task, run)
            if stop is not None:
                if stop.kind == "terminal":
                    for later in task.run.tool_runs:
                        if later.state is ToolRunState.PENDING:
                            later.close("skipped", TERMINAL_SKIP)
                return stop
        return None

    async def _prepare(self, task: TaskInfo, run: ToolRun) -> None:
        """Extract parameters for a tool run (kept on it) unless it has them; a run waiting for
        the user's reply extracts them again, from the reply too. It runs in a task of its own
        (:func:`_all_or_none`), so the model's ``SystemExit`` is turned into an error here."""
        if run.params is not None and run.state is ToolRunState.PENDING:
            return
        with bound(tool=run.tool_name), exits_as_errors():
            await self._extract(task, run)

    async def _extract(self, task: TaskInfo, run: ToolRun) -> None:
        try:
            tool = self._tool_of(task, run)
        except ToolNameError as error:
            self._fail(task, run, str(error))
            return
        execution_text = task.execution_text()
        if run.state is ToolRunState.PENDING:
            known = known_params(task, run.tool_name, tool, execution_text)
            if known is not None:  # a coordinator's, or the tool's own: no model call
                run.params = known
                return
        text: str = execution_text
        if run.state is ToolRunState.WAITING:
            text = clarified_text(text, task.run.clarifications)
        try:
            instruction = tool.parameter_instruction()
        except PLUGIN_FAILURES as error:
            self._fail(task, run, f"tool {run.tool_name}: parameter_instruction() {failed(error)}")
            return
        try:
            # a deep search round's status ends the call, after everything else (seed 004)
            with status_bar(execution_text.status):
                params = await extract_params(
                    self.llm,
                    tool.params_model,
                    instruction,
                    text,
                    self.settings.model_attempts,
                    source=tool.external_source,
                )
        except ModelError as error:
            self._fail(task, run, f"parameters could not be extracted: {error}")
            return
        run.params = params.model_dump(mode="json")

    async def _run_one(self, task: TaskInfo, run: ToolRun) -> Stop | None:
        started = ToolStarted(task_no=task.task_no, tool_name=run.tool_name, reason=run.reason)
        with bound(tool=run.tool_name), opened(started) as step:
            stop = await self._execute(task, run)
            emit(ToolFinished(step=step, task_no=task.task_no, record=run.record.model_copy()))
        if stop is not None and stop.kind == "clarification":
            emit(
                ClarificationAsked(
                    task_no=task.task_no, tool_name=stop.tool_name, question=stop.text
                )
            )
        return stop

    async def _execute(self, task: TaskInfo, run: ToolRun) -> Stop | None:
        try:
            tool = self._tool_of(task, run)
        except ToolNameError as error:
            self._fail(task, run, str(error))
            return None
        text = task.execution_text()
        clarification = None
        asked = ""
        if run.state is ToolRunState.WAITING and task.run.clarifications:
            *earlier, answered = task.run.clarifications
            clarification = answered.model_copy(update={"earlier": earlier})
            asked = "".join(
                f"asked {each.question!r}, reply {each.reply!r}; "
                for each in task.run.clarifications
                if each.tool_name == run.tool_name
            )
        results = subtree_results(task)
        # a consumer also gets what closed before the task (seed 6.7); the model's prompts of
        # the task read only its own subtree (SPEC §5: subtasks are isolated contexts)
        closed = closed_before(_round_root.get() or task, task)
        prior_context = snapshot(buffer_of([*closed, *results]))
        place = RetrievalPlace(
            question=task.question(),
            earlier=tuple(result for result in results if result.context.strip()),
            tool_name=tool.name,
            task_no=task.task_no,
            judged_after=run.reason == "rag" and self._judged(task),
        )
        log.info("tool_activated", task_no=task.task_no, tool=run.tool_name, reason=run.reason)
        try:
            params = tool.params_model.model_validate(run.params or {})
            run.ran_with(params)
            with retrieval_place(place):
                result = await execute(
                    self.runner, tool, params, text, prior_context, clarification
                )
        except PLUGIN_FAILURES as error:
            self._fail(task, run, f"{asked}tool {run.tool_name} {failed(error)}")
            return None
        if result.kind is ResultKind.CLARIFICATION and not result.text.strip():
            self._fail(
                task,
                run,
                f"{asked}tool {run.tool_name} asked an empty clarifying question (the user "
                "would wait for a reply to nothing)",
            )
            return None
        if result.kind is ResultKind.CLARIFICATION and _cannot_resume(tool):
            self._fail(
                task,
                run,
                f"tool {run.tool_name} asked {result.text!r}, but a context consumer that asks "
                "must be a ClarifiableContextConsumerTool (its reply continues with the context)",
            )
            return None
        if result.kind is ResultKind.CLARIFICATION and not _may_ask_the_user.get():
            self._decline(task, run, asked, result.text)
            return None
        detail = asked + _kept(result.text)
        if result.kind is ResultKind.CLARIFICATION:
            run.wait(detail)
            task.run.clarifications.append(
                Clarification(tool_name=run.tool_name, question=result.text, execution_text=text)
            )
            task.run.status = TaskStatus.WAITING_FOR_USER
            return Stop("clarification", result.text, run.tool_name)
        run.close(_OUTCOMES[result.kind], detail)
        if result.kind is ResultKind.TERMINAL:
            task.run.status = TaskStatus.DONE
            return Stop("terminal", result.text, run.tool_name)
        task.run.results.append(
            PromptAndContext(
                prompt=text,
                context=result.text,
                tool_name=tool.name,
                task_no=task.task_no,
                guaranteed=result.kind is ResultKind.GUARANTEED,
                pages=result.pages,
            )
        )
        return None

    def _tool_of(self, task: TaskInfo, run: ToolRun) -> ChatbotTool[Any]:
        """The singleton behind a tool run; a deep fallback may come from an overridden
        :meth:`get_deep_fallback_tool` that returns a tool the domain does not register."""
        tool = self._tools.get(run.tool_name)
        if tool is None and run.reason == "deep_fallback":
            tool = next((each for each in self._fallback_candidates(task) if each), None)
        if tool is None or tool.qualified_name != run.tool_name:
            raise UnknownToolError(
                f"tool {run.tool_name!r} activated on task {task.task_no} is no longer "
                "available (disabled since the conversation started?)",
                name=run.tool_name,
                candidates=[],
            )
        return tool

    def _decline(self, task: TaskInfo, run: ToolRun, asked: str, question: str) -> None:
        """A clarifying question beyond ``orchestrator.max_clarification_rounds`` (counted per
        user message: its task tree's) is not asked: the tool's run is closed, the task goes on
        without it, and a notice tells the caller that the answer is made from what the tools
        found."""
        limit = self.settings.max_clarification_rounds
        setting = f"orchestrator.max_clarification_rounds: {limit}"
        run.close("skipped", f"{asked}asked {question[:DETAIL_CHARS]!r}, not passed on ({setting})")
        message = (
            f"tool {run.tool_name} asked {question!r}, which was not passed on: a message gets "
            f"at most {limit} clarifying question(s) before its answer ({setting}); the answer "
            "is made from what the tools found"
        )
        task.run.notify(Notice(kind="clarification_limit", task_no=task.task_no, message=message))
        log.warning(
            "clarification_limit_reached", task_no=task.task_no, tool=run.tool_name, limit=limit
        )

    def _fail(self, task: TaskInfo, run: ToolRun, problem: str) -> None:
        run.close("error", problem)
        task.run.failures.append(problem)
        log.warning("tool_failed", task_no=task.task_no, tool=run.tool_name, problem=problem)

    # -- step 8: gatekeeper and deep fallback ------------------------------------------------

    async def _deep_fallback(self, task: TaskInfo, depth: int) -> Stop | None:
        """Judge the primary retrieval's context; while it falls short, run the deep fallback.

        Only where the RAG tool ran on the task, and only when a deep fallback tool exists for
        the prompt type (otherwise the verdict would change nothing). Each round: the gatekeeper
        judges the task's buffer; if insufficient, the task's deep search progress says what is
        missing (``run.deep_search.missing``) and which pages were consulted, a coordinator
        fallback decomposes the task into search subtasks (adding its round to the progress),
        they run, and the fallback then runs on the task as a tool (a context consumer sees
        their results). At most ``deep_search_max_rounds`` rounds; a later round that adds no
        subtask ends the search, and so do a round whose decomposition fails (raises, runs out
        of time; recorded like a coordinator's failure) and a fallback that spent its own budget
        (``progress.stopped``): it would add nothing, and judging again costs a call past it.
        A round interrupted by a clarification is finished by :meth:`process` before this runs.
        """
        if self._scope.rag is None or not any(
            run.reason == "rag" and run.record.outcome != "error" for run in task.run.tool_runs
        ):
            return None
        if not self._judged(task):
            return None
        progress = task.run.deep_search
        while True:
            rounds = sum(run.reason == "deep_fallback" for run in task.run.tool_runs)
            if rounds >= self.settings.deep_search_max_rounds:
                return None
            try:
                verdict = await self._judge(task)
            except ModelError as error:
                task.run.failures.append(f"context gatekeeper failed, no deep fallback: {error}")
                return None
            log.info(
                "gatekeeper_judged",
                task_no=task.task_no,
                sufficient=verdict.sufficient,
                missing=verdict.missing,
            )
            progress.verdicts.append(
                GatekeeperRecord(sufficient=verdict.sufficient, missing=list(verdict.missing))
            )
            if verdict.sufficient:
                return None
            fallback = await self._fallback_for(task)
            if fallback is None:
                return None
            progress.missing = list(verdict.missing) or [task.question()]  # what was judged
            progress.consulted = _consulted(task)
            emit(
                DeepSearchRound(
                    task_no=task.task_no,
                    round=rounds + 1,
                    tool_name=fallback.qualified_name,
                    missing=list(progress.missing),
                )
            )
            if isinstance(fallback, AgentCoordinator):
                before, records = len(task.sub_tasks), len(task.run.coordinator_runs)
                await apply_coordinators(
                    task, [NamedCoordinator.of(fallback)], self.runner, force=True
                )
                progress = task.run.deep_search  # the fallback's progress, taken back
                if any(r.outcome == "error" for r in task.run.coordinator_runs[records:]):
                    return None  # its decomposition failed (recorded): it would fail again
                if progress.stopped is not None and len(task.sub_tasks) == before:
                    return None  # its budget is spent: judging again would change nothing
                if rounds and len(task.sub_tasks) == before:
                    progress.exhausted = True
                    return None
                _join_round(task.sub_tasks[before:], progress)
            task.run.tool_runs.append(ToolRun.activated(fallback.qualified_name, "deep_fallback"))
            stop = await self._process_subtasks(task, depth)
            if stop is None:
                stop = await self._run_pending(task)
            if stop is not None:
                return stop

    def _judged(self, task: TaskInfo) -> bool:
        """Whether the gatekeeper will judge the task's retrieved context (some prompt type
        of the task has a deep fallback; otherwise its verdict would change nothing)."""
        return any(tool is not None for tool in self._fallback_candidates(task))

    def _fallback_candidates(self, task: TaskInfo) -> list[ChatbotTool[Any] | None]:
        """The deep fallback of the task's prompt type; while the task is not classified (the
        domain has several types), every type's."""
        types = self.domain.prompt_types
        if task.prompt_type or len(types) < 2:
            return [self.get_deep_fallback_tool(task.prompt_type)]
        return [self.get_deep_fallback_tool(prompt_type) for prompt_type in types]

    async def _fallback_for(self, task: TaskInfo) -> ChatbotTool[Any] | None:
        """The task's deep fallback, classifying the task first when its type decides it."""
        candidates = self._fallback_candidates(task)
        if all(tool is candidates[0] for tool in candidates):
            return candidates[0]
        await classify(self.llm, task, self.domain.prompt_types, self.settings.model_attempts)
        return self.get_deep_fallback_tool(task.prompt_type)

    async def _judge(self, task: TaskInfo) -> GatekeeperVerdict:
        """The context gatekeeper's verdict. Nothing retrieved cannot be enough: that needs no
        model call (and a small model cannot wrongly call it sufficient). Once a deep search
        round ran, the verdict decides whether another starts: the call ends with the loop's
        status as it stands now (:func:`_status_now`)."""
        contexts = [result for result in subtree_results(task) if result.context.strip()]
        if not contexts:
            return GatekeeperVerdict(sufficient=False, missing=[task.question()])
        with status_bar(_status_now(task)):
            return await call_model(
                Purpose.GATEKEEPER.value,
                self.settings.model_attempts,
                lambda: self.llm.judge_context(task.question(), contexts),
            )

    # -- step 9: the answer -----------------------------------------------------------------

    async def _compose(
        self,
        root: TaskInfo,
        results: list[PromptAndContext],
        guaranteed: list[str],
        issues: list[ContextIssue],
    ) -> str:
        """The answer text (SPEC §3 step 9). Guaranteed contexts are finished answers: they lead
        the text verbatim. The model composes only when the root task itself holds ordinary
        context beside them; results of subtasks were the guaranteed answer's inputs, and a
        composition over them could contradict it.

        When the model fails to compose, the guaranteed answers are the answer (the failure is
        listed); with none, the ``ModelError`` goes to the caller (HTTP 502): a question answered
        by nothing must not look like a success to monitoring.
        """
        contexts = [result for result in results if result.context]
        own_plain = [r for r in contexts if not r.guaranteed and r.task_no == root.task_no]
        if guaranteed and not own_plain:
            text = "\n\n".join(dict.fromkeys(guaranteed))
        else:
            contexts = await answer_contexts(root, self.llm, self.settings.subtask_results)
            calls_before = len(current_calls())
            try:
                with reading_history():  # the answer must not contradict earlier turns
                    composed = await call_model(
                        Purpose.ANSWER.value,
                        self.settings.model_attempts,
                        lambda: self.llm.answer(root.question(), contexts),
                        is_valid=lambda answer: bool(answer.strip()),
                    )
            except ModelError as error:
                if not guaranteed:
                    raise
                root.run.failures.append(f"answer composition failed: {error}")
                composed = ""
            if composed and _answer_cut_off(current_calls()[calls_before:]):
                root.run.notify(answer_cut_off(with_context=bool(contexts)))
            file_context_issues(root, issues)
            leading = _not_led(list(dict.fromkeys(guaranteed)), composed)
            text = "\n\n".join([*leading, composed] if composed else leading)
        failures = root_failures(root)
        if failures:
            text += f"\n\n(Some steps failed, so this answer may be incomplete: {len(failures)} "
            text += "problem(s); see the trace.)"
        return text


def _not_led(guaranteed: list[str], composed: str) -> list[str]:
    """The guaranteed answers to put before the composed one: all but those it already opens
    with, in their order, so that a model repeating them does not show them twice. Only whole
    ones count (followed by a space or the end): a composition that merely mentions one, or
    opens with a longer word ("No" before "Nothing"), may contradict it, so it leads."""
    rest = composed.lstrip()
    for index, exact in enumerate(guaranteed):
        if not re.match(re.escape(exact) + r"(\s|$)", rest):
            return guaranteed[index:]
        rest = rest[len(exact) :].lstrip()
    return []


async def _all_or_none(steps: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run the steps side by side; when one raises, the others are cancelled (and awaited)
    before the error goes on, so none of them calls the model after the question ended."""
    tasks = [asyncio.ensure_future(step) for step in steps]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for each in tasks:
            each.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _kept(text: str) -> str:
    """What the trace keeps of a tool's result: ``DETAIL_CHARS`` of it, "…" saying it was cut."""
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS] + "…"


def _answer_cut_off(calls: Sequence[CallRecord]) -> bool:
    """Whether the answer call that produced the answer (the last one; earlier attempts
    failed) stopped at its completion limit. Seen in the question's call records: the
    ``LanguageModel.answer`` contract returns the text alone."""
    answers = [call for call in calls if call.purpose == Purpose.ANSWER.value]
    return bool(answers) and answers[-1].truncated


def _status_now(task: TaskInfo) -> AgentStatus | None:
    """The task's deep search status as the gatekeeper reads it after a round: the latest
    round's, with the model calls and the pages consulted counted now (None: no round ran)."""
    rounds = task.run.deep_search.rounds
    if not rounds:
        return None
    return rounds[-1].model_copy(
        update={"calls_made": len(current_calls()), "consulted": _consulted(task)}
    )


def _consulted(task: TaskInfo) -> list[PageRef]:
    """Every page the results of the task and its subtasks came from (the task's own first),
    once each."""
    pages = (page for each in task.walk() for result in each.run.results for page in result.pages)
    return list(dict.fromkeys(pages))


def _join_round(new: list[TaskInfo], progress: DeepSearchProgress) -> None:
    """The subtasks the deep fallback just made for its latest round search in that round: they
    run with its status (the model reads it, the search tools read its pages)."""
    latest = progress.rounds[-1] if progress.rounds else None
    if latest is None:
        return
    numbers = {
        number
        for search in latest.searches
        for number in (search.neighbor_task_no, search.search_task_no)
        if number is not None
    }
    for sub_task in new:
        if sub_task.task_no in numbers:
            sub_task.run.search_round = latest


def _cannot_resume(tool: ChatbotTool[Any]) -> bool:
    """A plain context consumer has no way to continue a clarification round (seed 6.7),
    unless its author overrode ``execute_with_clarification``."""
    return (
        isinstance(tool, ContextConsumerTool)
        and not isinstance(tool, ClarifiableContextConsumerTool)
        and type(tool).execute_with_clarification is ChatbotTool.execute_with_clarification
    )


def file_context_issues(root: TaskInfo, issues: list[ContextIssue]) -> None:
    """Move what the prompts left out onto the tasks the parts belong to (the root when the
    task is not in the tree) as notices, each once: a part cut for the gatekeeper and again for
    the answer is one notice."""
    tasks = {task.task_no: task for task in root.walk()}
    for issue in issues:
        task = tasks.get(issue.task_no, root)
        task.run.notify(issue.notice().model_copy(update={"task_no": task.task_no}))
    issues.clear()


def root_failures(root: TaskInfo) -> list[str]:
    """Every failure and notice recorded in the tree, each prefixed with its task number."""
    return [f"task {task.task_no}: {line}" for task in root.walk() for line in task.run.reported()]


def root_notices(root: TaskInfo) -> list[Notice]:
    """Every notice filed in the tree, in tree order."""
    return [notice for task in root.walk() for notice in task.run.notices]
