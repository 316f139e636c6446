"""Conversations: a message in, an ``Answer`` out, the conversation kept between turns."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

import structlog

from toolwire.conversation import (
    Conversation,
    Turn,
    TurnContext,
    bounded,
    history_messages,
    turn_findings,
)
from toolwire.errors import (
    SessionConflictError,
    SessionError,
    SessionStoreUnavailableError,
    UnknownDomainError,
    UnknownSessionError,
    UnreadableSessionError,
    exits_as_errors,
)
from toolwire.events import (
    Event,
    Observer,
    RoundFinished,
    RoundStarted,
    Routed,
    emit,
    observing,
    opened,
)
from toolwire.llm.base import LanguageModel, Usage, collect_calls
from toolwire.llm.budget import question_budget
from toolwire.llm.history import conversation_history
from toolwire.logging import bound
from toolwire.orchestrator.answer import Answer, TaskTrace
from toolwire.orchestrator.buffer import subtree_results
from toolwire.orchestrator.domain_orchestrator import DomainOrchestrator
from toolwire.orchestrator.follow_up import resolve_follow_up, warm_follow_up, warms_follow_ups
from toolwire.orchestrator.streaming import Answered, stream_question
from toolwire.orchestrator.turn_compression import compact, history_tokens
from toolwire.redaction import session_ref
from toolwire.registry import DomainSpec, ToolRegistry
from toolwire.request_progress import note_turn_stored
from toolwire.selection.pipeline import Selection
from toolwire.selection.routing import DomainRouter, RoutingDecision, RoutingRecord
from toolwire.sessions import SessionStore, StoredSession
from toolwire.sessions.base import unknown_session
from toolwire.settings import OrchestratorSettings, SessionSettings
from toolwire.task import TaskInfo, escape_marker
from toolwire.tool_threads import PluginRunner
from toolwire.tools import ChatbotTool

log = structlog.get_logger(__name__)


class ConversationService:
    """``App.ask`` behind the scenes: one :class:`DomainOrchestrator` per domain, built once.

    A message without a ``session_id`` starts a conversation: task "1" of the domain the caller
    names; naming none, of the domain the message is routed to (several domains installed,
    ``orchestrator.routing``), else of the default domain, or the only one. Every answer carries
    the conversation's id; a message sent with it is the conversation's next turn, in the domain
    it started in: the reply to a waiting clarifying question resumes the stored tree exactly
    where it stopped, any other message is a new task, first rewritten to stand on its own. The
    rewrite and the answer read the earlier turns; every other model call reads the task alone
    (:mod:`toolwire.llm.history`). The conversation is kept in the session store,
    within ``sessions.max_turns`` and ``sessions.max_bytes``, for ``sessions.ttl_s`` after its
    last turn. Once a turn is stored, a model whose profile has ``prefix_warming`` reads the
    next turn's rewrite prompt up to its message while the user reads the answer
    (:func:`~toolwire.orchestrator.follow_up.warm_follow_up`); :meth:`settle` waits for it.
    """

    def __init__(
        self,
        *,
        registry: ToolRegistry,
        domains: Mapping[str, DomainSpec],
        tools: Mapping[str, ChatbotTool[Any]],
        llm: LanguageModel,
        store: SessionStore,
        default_domain: str | None = None,
        settings: OrchestratorSettings | None = None,
        orchestrators: Mapping[str, DomainOrchestrator] | None = None,
        observers: Sequence[Callable[[], Observer]] = (),
        failed_plugins: Sequence[str] = (),
        sessions: SessionSettings | None = None,
    ) -> None:
        """``failed_plugins``: why plugins failed to load, named when a domain is unknown;
        ``sessions``: the conversations' bounds."""
        self.store = store
        self.sessions = sessions or SessionSettings()
        self.failed_plugins = list(failed_plugins)
        self.observers = list(observers)
        """Each makes an observer for one question (OpenTelemetry's spans, say)."""
        self.default_domain = default_domain
        self.llm = llm
        self.settings = settings or OrchestratorSettings()
        built = dict(orchestrators or {})  # built beforehand: App.load builds every domain's
        runner = PluginRunner.of(self.settings)  # one set of tool threads for the domains here
        self.orchestrators: dict[str, DomainOrchestrator] = {
            name: DomainOrchestrator(spec, registry, tools, llm, self.settings, runner)
            for name, spec in domains.items()
            if name not in built
        }
        self.orchestrators.update(built)
        self.router = (
            DomainRouter.build(
                {name: o.domain for name, o in self.orchestrators.items()},
                {name: o.describing_tools() for name, o in self.orchestrators.items()},
            )
            if self.settings.routing.enabled and len(self.orchestrators) > 1
            else None
        )
        self._warming: set[asyncio.Task[None]] = set()
        """The warm-ups started between turns and not finished (:meth:`settle`)."""
        self._asking = 0
        """Questions in flight: a warm-up waits for none, so none starts beside another."""
        self._closed = False
        """:meth:`aclose` was called: a turn that ends later starts no warm-up."""

    async def ask(
        self,
        message: str,
        domain: str | None = None,
        session_id: str | None = None,
        *,
        caller: str | None = None,
    ) -> Answer:
        """Answer a message, as the next turn of the conversation ``session_id`` when given.

        ``caller`` names who asks (the server's API key name): a conversation it starts is bound
        to it, and a conversation another caller started is not found (``UnknownSessionError``).
        The round is one step among the question's events (``round_started``,
        ``round_finished``); ``observers`` watch every question. Its model calls share one time
        budget (``orchestrator.question_budget_s``). Plugin code's ``SystemExit`` or
        ``KeyboardInterrupt`` is raised as ``PluginExitError``: callers run the question in a
        task, whose loop (the server's) those two would stop.
        """
        observers = [start() for start in self.observers]
        self._asking += 1
        try:
            return await self._ask(message, domain, session_id, caller, observers)
        finally:
            self._asking -= 1

    async def _ask(
        self,
        message: str,
        domain: str | None,
        session_id: str | None,
        caller: str | None,
        observers: list[Observer],
    ) -> Answer:
        resumed = session_id is not None
        with exits_as_errors(), observing(*observers):
            try:  # first the conversation, so that the round starts knowing its turn
                stored = (
                    await self._continued(session_id, domain, caller)
                    if session_id is not None
                    else None
                )
            except BaseException as error:  # no conversation to continue: a round of no turn
                with opened(RoundStarted(resumed=resumed)) as step:
                    emit(RoundFinished(step=step, error=type(error).__name__))
                raise
            turn = stored.conversation.next_number if stored is not None else 1
            with opened(RoundStarted(resumed=resumed, turn=turn)) as step:
                try:
                    answer = await self._answer(message, domain, stored, caller, turn)
                except BaseException as error:  # cancelled included: the watchers close the round
                    emit(RoundFinished(step=step, turn=turn, error=type(error).__name__))
                    raise
                emit(RoundFinished.of(answer, step))
                return answer

    def ask_stream(
        self,
        message: str,
        domain: str | None = None,
        session_id: str | None = None,
        *,
        caller: str | None = None,
    ) -> AsyncGenerator[Event | Answered, None]:
        """:meth:`ask`, watched: its events as they happen, then ``Answered`` (the same
        ``Answer``); see :mod:`toolwire.orchestrator.streaming`."""
        return stream_question(lambda: self.ask(message, domain, session_id, caller=caller))

    async def _answer(
        self,
        message: str,
        domain: str | None,
        stored: StoredSession | None,
        caller: str | None,
        number: int,
    ) -> Answer:
        """Turn ``number``: of the conversation ``stored``, or the first of a new one."""
        routing: RoutingRecord | None = None
        decision: RoutingDecision | None = None
        preselected: Selection | None = None
        session_id = stored.session_id if stored is not None else None
        resumed = {"session": session_ref(session_id)} if session_id is not None else {}
        with (
            collect_calls() as calls,
            bound(**resumed),
            question_budget(self.settings.question_budget_s),
        ):
            if stored is None:
                if domain is None and self.router is not None:
                    attempts = self.settings.model_attempts
                    decision = await self.router.route(
                        message, self.llm, attempts, select=self._select_first
                    )
                    routing = decision.record
                    emit(Routed(routing=routing.model_copy(deep=True)))
                    domain = routing.domain
                orchestrator = self.orchestrator(domain, routed=routing is not None)
                if decision is not None and decision.selected_in == orchestrator.domain.name:
                    preselected = decision.selection  # made for this message in this domain
                conversation = Conversation()
            else:
                orchestrator = self.orchestrator(stored.domain)
                conversation = stored.conversation
                if conversation.pending is not None:  # the reply to its clarifying question
                    _give_reply(conversation.pending, message, stored.session_id)
            context: TurnContext | None = None
            if conversation.has_history:
                if conversation.pending is not None:  # a reply: its answer reads them as they are
                    context = TurnContext.of(conversation)
                else:
                    conversation, context = await self._compacted(conversation, message)
            with conversation_history(history_messages(conversation)):
                root = await self._turn_task(orchestrator, conversation, message, context)
                earlier = {id(r) for r in subtree_results(root)}  # stored with an earlier turn
                if routing is not None and routing.failure:
                    root.run.failures.append(routing.failure)
                result = await orchestrator.run_round(root, preselected=preselected)
            found = [r for r in subtree_results(root) if id(r) not in earlier]
            turn = Turn(
                number=number,
                message=message,
                standalone=context.standalone if context is not None else None,
                kind=result.kind,
                answer=result.text,
                findings=turn_findings([(r.tool_name, r.context, r.guaranteed) for r in found]),
            )
            kept = self._kept(conversation, turn, root if result.kind == "clarification" else None)
            stored = await self._store(
                stored, orchestrator.domain.name, kept, caller, turn.number
            )
            self._warm_next_turn(orchestrator, stored.session_id, kept)
        log.info(
            "question_answered",
            domain=orchestrator.domain.name,
            kind=result.kind,
            turn=turn.number,
            llm_calls=len(calls),
            failures=len(result.failures),
        )
        return Answer(
            kind=result.kind,
            text=result.text,
            session_id=stored.session_id,
            turn=turn.number,
            context=context,
            domain=orchestrator.domain.name,
            guaranteed_contexts=result.guaranteed_contexts,
            failures=result.failures,
            notices=result.notices,
            trace=TaskTrace.of(root),
            routing=routing,
            usage=Usage.of(calls),
            model_calls=list(calls),
        )

    def _warm_next_turn(
        self, orchestrator: DomainOrchestrator, session_id: str, conversation: Conversation
    ) -> None:
        """Start warming the next turn's rewrite prompt, in the background and outside this
        question (its budget, its observers, its calls): when the model warms prefixes, no
        other question is in flight (it would wait for the warm-up's batch), the next message
        will be rewritten (no clarifying question waits), and it will read the history as
        stored (no compression first)."""
        if (
            self._closed
            or self._asking > 1
            or not warms_follow_ups(self.llm)
            or conversation.pending is not None
            or history_tokens(conversation) > self.sessions.history_tokens
        ):
            return
        warming = asyncio.create_task(
            self._warm(orchestrator, session_id, conversation), context=contextvars.Context()
        )
        self._warming.add(warming)
        warming.add_done_callback(self._warming.discard)

    async def _warm(
        self, orchestrator: DomainOrchestrator, session_id: str, conversation: Conversation
    ) -> None:
        with (
            bound(session=session_ref(session_id)),
            orchestrator.fixed_text(),
            conversation_history(history_messages(conversation)),
        ):
            try:
                await warm_follow_up(self.llm)
            except asyncio.CancelledError:
                raise
            except BaseException:  # SystemExit too: raised in a task it would stop the loop
                log.exception("prefix_warming_failed")  # a warm-up only saves time

    async def settle(self) -> None:
        """Wait for the warm-ups started between turns to finish (a user reading the answer)."""
        while self._warming:
            await asyncio.gather(*self._warming, return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel the warm-ups in flight, and start none after: nobody will send the turns they
        prepare here."""
        self._closed = True
        for warming in self._warming:
            warming.cancel()
        await asyncio.gather(*self._warming, return_exceptions=True)

    async def _continued(
        self, session_id: str, domain: str | None, caller: str | None
    ) -> StoredSession:
        """The stored conversation ``session_id``, if ``caller`` may continue it in ``domain``.

        Who may continue it is decided before anything else about it: a damaged conversation is
        said to be damaged to its owner alone, and every ``UnknownSessionError`` is built here by
        one function, so another caller's id, an unknown id and an expired one read alike even
        through a store that wraps another (whose own error may name the inner store)."""
        with bound(session=session_ref(session_id)):
            try:
                stored = await self.store.load(session_id)
            except UnknownSessionError:
                raise unknown_session(self.store, session_id, keyed=caller is not None) from None
            except UnreadableSessionError as error:
                self._check_access(session_id, error.owner, error.domain, caller, domain)
                raise
            except (SessionConflictError, SessionStoreUnavailableError):
                raise  # says nothing about the conversation
            except SessionError:  # a plugin's store that does not say whose conversation it was
                self._check_access(session_id, None, None, caller, domain)
                raise
            self._check_access(session_id, stored.owner, stored.domain, caller, domain)
        return stored

    def _check_access(
        self,
        session_id: str,
        owner: object,
        stored_domain: object,
        caller: str | None,
        domain: str | None,
    ) -> None:
        """Refuse a conversation ``caller`` did not start (as an unknown session), or one of
        another domain than the ``domain`` asked for. ``owner`` and ``stored_domain`` are as
        stored, possibly damaged: a damaged owner is no caller's."""
        if owner != caller:
            log.warning("session_owner_mismatch", owner=owner, caller=caller)
            raise unknown_session(self.store, session_id, keyed=caller is not None)
        if isinstance(stored_domain, str) and domain is not None and domain != stored_domain:
            raise SessionError(
                f"session {session_id!r} belongs to domain {stored_domain!r}, not "
                f"{domain!r}; omit the domain when continuing the conversation"
            )

    async def _turn_task(
        self,
        orchestrator: DomainOrchestrator,
        conversation: Conversation,
        message: str,
        context: TurnContext | None,
    ) -> TaskInfo:
        """The task tree this turn runs: the waiting one with the reply set, or a new task (for
        a later turn, of the message made to stand on its own, noted in ``context``)."""
        if conversation.pending is not None:
            return conversation.pending
        if context is None:
            return await orchestrator.new_task(message)
        with orchestrator.fixed_text():
            resolved = await resolve_follow_up(self.llm, message, self.settings.model_attempts)
        if resolved.rewritten:
            context.standalone = resolved.text
        if resolved.failure is not None:
            context.notes.append(resolved.failure)
        return await orchestrator.new_task(resolved.text)

    async def _compacted(
        self, conversation: Conversation, message: str
    ) -> tuple[Conversation, TurnContext]:
        """The conversation with old turns compressed once if its history passed
        ``sessions.history_tokens``, and the record of what this turn reads from it."""
        budget = self.sessions.history_tokens
        compacted = await compact(self.llm, conversation, escape_marker(message), budget)
        context = TurnContext.of(compacted.conversation)
        if compacted.note is not None:
            context.notes.append(compacted.note)
        return compacted.conversation, context

    def _kept(
        self, conversation: Conversation, turn: Turn, pending: TaskInfo | None
    ) -> Conversation:
        """The conversation after ``turn``, within its bounds."""
        grown = conversation.model_copy(
            update={"turns": [*conversation.turns, turn], "pending": pending}
        )
        return bounded(grown, max_turns=self.sessions.max_turns, max_bytes=self.sessions.max_bytes)

    async def _select_first(self, domain: str, message: str) -> Selection | None:
        """Routing's question which tools of ``domain`` take ``message``."""
        return await self.orchestrators[domain].select_first(message)

    def orchestrator(self, domain: str | None, *, routed: bool = False) -> DomainOrchestrator:
        """The orchestrator of ``domain``, the default domain, or the only domain.

        ``routed``: ``domain`` came from routing (None: the message fits no domain)."""
        name = domain or self.default_domain
        if name is None and len(self.orchestrators) == 1:
            name = next(iter(self.orchestrators))
        if name is None and not self.orchestrators:
            raise UnknownDomainError.none_installed(self.failed_plugins)
        if name is None:
            installed = ", ".join(sorted(self.orchestrators))
            why = (
                "the message fits none of the installed domains"
                if routed
                else ("several domains are installed")
            )
            raise UnknownDomainError(
                f"{why} ({installed}) and no default domain is configured; pass a domain or set "
                "default_domain"
            )
        if name not in self.orchestrators:
            raise UnknownDomainError.named(name, self.orchestrators, self.failed_plugins)
        return self.orchestrators[name]

    async def _store(
        self,
        stored: StoredSession | None,
        domain: str,
        conversation: Conversation,
        caller: str | None,
        turn: int,
    ) -> StoredSession:
        """Store the turn ``turn``. A write once begun is finished even when the question is
        cancelled meanwhile (a request's time limit, a client gone): a store's thread or Redis
        script would go on regardless, and the caller's error must say what was stored
        (:func:`~toolwire.request_progress.note_turn_stored`)."""
        writing = asyncio.ensure_future(self._write(stored, domain, conversation, caller))
        try:
            return await asyncio.shield(writing)
        except asyncio.CancelledError:
            await asyncio.wait([writing])  # the store goes on with it: learn its outcome
            raise
        finally:
            if writing.done() and not writing.cancelled() and writing.exception() is None:
                note_turn_stored(turn)

    async def _write(
        self,
        stored: StoredSession | None,
        domain: str,
        conversation: Conversation,
        caller: str | None,
    ) -> StoredSession:
        """Store the turn: a new conversation, or the next turn of ``stored``. A store that
        fails now fails after the turn's tools ran, and its error says so: "nothing was
        changed" would not be true (a Redis write that timed out may even have been applied)."""
        try:
            if stored is None:
                return await self.store.create(domain, conversation, owner=caller)
            return await self._save_turn(stored, conversation)
        except SessionStoreUnavailableError as error:
            raise SessionStoreUnavailableError.storing_turn(error) from error
        except UnknownSessionError:  # it expired during the turn: said as a load would say it
            if stored is None:
                raise
            keyed = caller is not None
            raise unknown_session(self.store, stored.session_id, keyed=keyed) from None

    async def _save_turn(self, stored: StoredSession, conversation: Conversation) -> StoredSession:
        """Apply a turn with optimistic concurrency: of two replicas continuing the same
        conversation only the first save succeeds; the other gets ``SessionConflictError``, and
        the store keeps what the first one left. A conversation that expired or was deleted
        during the turn is ``UnknownSessionError``, as its id would be for the next message."""
        return await self.store.save(stored.model_copy(update={"conversation": conversation}))


def _give_reply(root: TaskInfo, reply: str, session_id: str) -> None:
    """Set the reply on the one question the stored conversation waits for.

    A round stops at its first clarifying question, so a stored tree with several is damaged
    (edited, or written by something else), not a conversation the reply could continue.
    """
    waiting = [task.run.pending_clarification for task in root.walk()]
    questions = [question for question in waiting if question is not None]
    if len(questions) != 1:
        state = (
            "holds no task waiting for a reply"
            if not questions
            else f"is inconsistent: {len(questions)} tasks wait for a reply, but a reply can "
            "answer only one"
        )
        raise SessionError(
            f"the stored conversation of session {session_id!r} {state}; start a new "
            "conversation without a session id"
        )
    questions[0].reply = escape_marker(reply)  # users designate no tasks
