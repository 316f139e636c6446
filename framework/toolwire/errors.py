"""The one exception tree of toolwire.

::

    ToolwireError                      every error toolwire raises on purpose
    ├── ConfigError                    a developer's mistake, found at build time; carries problems
    │   ├── ToolDeclarationError       a tool class declared wrongly (no parameter model, bad name)
    │   ├── ToolNameError              a tool name that resolves to no tool or to several
    │   │   ├── UnknownToolError
    │   │   └── AmbiguousToolError
    │   └── WiringError                the container cannot build a singleton (cycle, unsatisfiable)
    ├── PluginError                    a plugin failed to import or raised in a hook
    ├── UnknownDomainError             a question named no installed domain (and no default)
    ├── ModelError                     a language-model call failed after its retries
    │   └── TimeBudgetSpentError       the question's time budget left no time for the call
    ├── McpServerError                 an MCP server cannot be reached, or a call to it failed
    ├── ToolTimeoutError               plugin code did not finish in time (recorded, not raised)
    ├── ToolThreadsExhaustedError      every tool thread is held by a call that ran out of time
    ├── PluginExitError                plugin code raised SystemExit or KeyboardInterrupt in a task
    └── SessionError                   a conversation's stored state cannot be used
        ├── UnknownSessionError        unknown, expired, or another caller's
        ├── UnreadableSessionError     damaged, or written by an incompatible version
        ├── SessionConflictError       another process applied the same round first
        └── SessionStoreUnavailableError  the store cannot be reached (retry later)

Every message says what is wrong, shows the offender, then how to fix it.

``PLUGIN_FAILURES`` is what the orchestrator records as a failing tool or coordinator instead of
letting it end the question.
"""

from __future__ import annotations

import difflib
import traceback
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the configuration, located where a developer can find it."""

    message: str
    path: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        if self.path is None:
            return self.message
        if self.line is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}: {self.message}"


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"did you mean 'class'? "`` when one of ``known`` is close to the misspelt ``name``,
    else ``""``: the hint of every unknown name in a message (a key, a hook, a setting)."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def describe(error: BaseException) -> str:
    """``"RuntimeError: boom"``: how an exception raised by plugin code reads in a failure.

    Its text is the plugin's: an ``__str__`` that raises must not turn the report of one failing
    tool or plugin into a crash of the whole question (or of ``toolwire plugins``).
    """
    try:
        message = str(error)
    except PLUGIN_FAILURES:
        message = "(its message cannot be shown: str() of it raised)"
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


class ToolwireError(Exception):
    """Root of every error toolwire raises on purpose."""


class ConfigError(ToolwireError):
    """A developer's mistake found while building the app; lists every problem, not just one."""

    def __init__(self, problems: str | Problem | list[Problem]) -> None:
        if isinstance(problems, str):
            problems = [Problem(problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: list[Problem] = list(problems)
        super().__init__(self._text())

    def add_causes(self, causes: list[Problem]) -> None:
        """List ``causes`` first: problems found earlier that may explain these (a plugin that
        failed to load leaves its domain undeclared)."""
        self.problems[:0] = causes
        self.args = (self._text(), *self.args[1:])

    def _text(self) -> str:
        return "\n".join(str(problem) for problem in self.problems)


class ToolDeclarationError(ConfigError):
    """A tool class is declared in a way toolwire cannot use."""


class ToolNameError(ConfigError):
    """A tool name resolves to no tool or to more than one."""

    def __init__(self, message: str, *, name: str, candidates: list[str]) -> None:
        self.name = name
        self.candidates = candidates
        super().__init__(message)


class UnknownToolError(ToolNameError):
    """No registered tool has this name."""


class AmbiguousToolError(ToolNameError):
    """A short name matches tools of several domains and none in the current one."""


class WiringError(ConfigError):
    """The container cannot build one or more singletons (cycle, unsatisfiable parameter)."""


class PluginError(ToolwireError):
    """A plugin failed to import or raised inside a hook."""

    def __init__(
        self, plugin: str, message: str, *, path: str | None = None, line: int | None = None
    ) -> None:
        self.plugin = plugin
        self.problem = Problem(f"plugin {plugin!r}: {message}", path, line)
        """The message located at the offending hook implementation, when it is known."""
        super().__init__(str(self.problem))


class UnknownDomainError(ToolwireError):
    """A question names a domain that is not installed, or none while no default is set."""

    @classmethod
    def named(
        cls, name: str, known: Iterable[str], failed_plugins: Sequence[str] = ()
    ) -> UnknownDomainError:
        """The error for ``name``, not among the ``known`` domains, said the same way by every
        front door (CLI, HTTP, MCP, ``App.ask``). ``failed_plugins`` (why plugins failed to
        load) are named too: a plugin that failed to load is the likely cause."""
        cause = f" ({'; '.join(failed_plugins)}; see toolwire plugins)" if failed_plugins else ""
        installed = ", ".join(sorted(known)) or "none"
        return cls(f"unknown domain {name!r}{cause}; installed domains: {installed}")

    @classmethod
    def none_installed(cls, failed_plugins: Sequence[str] = ()) -> UnknownDomainError:
        """The error for a question while no domain is installed (naming the plugins that
        failed to load, the likely cause)."""
        cause = f" ({'; '.join(failed_plugins)}; see toolwire plugins)" if failed_plugins else ""
        return cls(
            f"no domain is installed, so no question can be answered{cause}: install a domain "
            "plugin (pip install toolwire-<domain>) or declare a domain under domains: in "
            "config/toolwire.yaml"
        )


class ModelError(ToolwireError):
    """A language-model call failed (transport, timeout, invalid output) after its retries."""

    def __init__(self, purpose: str, message: str) -> None:
        self.purpose = str(purpose)  # a Purpose is shown by its value
        self.detail = message
        super().__init__(f"model call for {self.purpose!r} failed: {message}")


class FunctionCallingRefusedError(ModelError):
    """The model server refused a request that offered functions to call: its tool calling is
    off or unknown (llama.cpp without ``--jinja``, vLLM without ``--enable-auto-tool-choice``,
    an Ollama model without tool support). The choice then falls back to a constrained one."""


class TimeBudgetSpentError(ModelError):
    """The question's time budget has too little left for another model call: not retried."""


class McpServerError(ToolwireError):
    """An external MCP server cannot be started or reached, or a call to it failed."""


class ToolTimeoutError(ToolwireError):
    """A tool's or coordinator's method did not finish within ``orchestrator.tool_timeout_s``.

    The orchestrator records it like any other failure of the tool; a plain method's thread is
    abandoned and keeps its place in the tool threads until the method returns.
    """

    def __init__(self, method: str, timeout_s: float) -> None:
        self.method = method
        self.timeout_s = timeout_s
        super().__init__(
            f"{method} did not finish within {timeout_s:g} s (orchestrator.tool_timeout_s); "
            "make it faster or raise the limit"
        )


class ToolThreadsExhaustedError(ToolwireError):
    """Every tool thread is held by a call whose caller stopped waiting (it ran out of time or
    its request was cancelled) and that has not returned: a plain method cannot run now.

    Recorded like a failure of the tool that could not run; the threads come back as the stuck
    calls return.
    """

    def __init__(self, threads: int) -> None:
        self.threads = threads
        super().__init__(
            f"all {threads} tool threads are held by calls that ran out of time and have not "
            "returned (orchestrator.tool_threads); find the tool that hangs in the log "
            "(plugin_call_timed_out), or raise the limit"
        )


PLUGIN_FAILURES: tuple[type[BaseException], ...] = (Exception, SystemExit, KeyboardInterrupt)
"""What plugin code may raise that toolwire records as that plugin's failure and goes on.

Beside every ``Exception``: ``SystemExit`` and ``KeyboardInterrupt``, which plugin code raises by
calling ``sys.exit()`` or by mistake (a real Ctrl-C reaches an asyncio program as a cancellation,
and plain methods run in worker threads, which signals never interrupt). Every other
``BaseException`` passes through: ``asyncio.CancelledError`` (a cancelled request, a time limit, a
shutdown), ``GeneratorExit``, and test outcomes such as pytest's and ``UnscriptedCallError``.
"""


class PluginExitError(ToolwireError):
    """Plugin code (a session store, a model, a tool's hook) raised ``SystemExit`` or
    ``KeyboardInterrupt`` while a question ran in a task.

    asyncio re-raises those two from a task into its event loop, which stops the loop and the
    server with it, before anything that awaits the task sees them; raised in their place, this
    ends the one question like any other failure.
    """

    def __init__(self, error: SystemExit | KeyboardInterrupt) -> None:
        frames = traceback.extract_tb(error.__traceback__)
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        super().__init__(
            f"plugin code raised {describe(error)}{where} while answering a question; the "
            "question was stopped: plugin code should raise an exception, not exit"
        )


@contextmanager
def exits_as_errors() -> Iterator[None]:
    """Around the body of a task that runs plugin code: its ``SystemExit`` or
    ``KeyboardInterrupt`` raised as :class:`PluginExitError`, whose docstring says why."""
    try:
        yield
    except (SystemExit, KeyboardInterrupt) as error:
        raise PluginExitError(error) from error


class SessionError(ToolwireError):
    """A conversation's stored state cannot be used."""


class UnknownSessionError(SessionError):
    """The session id names no stored conversation this caller may continue.

    An unknown id, an expired conversation and another caller's conversation read alike, so an
    API key cannot learn that another tenant's conversation exists. ``store`` names the store
    that was asked and ``ttl_s`` its time-to-live, when the store knows them (``keyed``: the
    caller has an API key, so the conversation may be another key's); ``location`` (a
    SQLite store's file) is not in the message, which may reach a remote caller: the command
    line shows it, so a user who ran from another working directory sees that another file was
    opened.
    """

    def __init__(
        self,
        session_id: str,
        *,
        store: str | None = None,
        location: str | None = None,
        ttl_s: float | None = None,
        keyed: bool = True,
    ) -> None:
        self.session_id = session_id
        self.store = store
        self.location = location
        self.ttl_s = ttl_s
        where = f" in {store}" if store else ""
        kept = (
            f" (a conversation is kept {_seconds(ttl_s)} s after its last turn: sessions.ttl_s)"
            if ttl_s is not None
            else ""
        )
        another_key = " or was started under another API key" if keyed else ""
        super().__init__(
            f"no conversation is stored under session id {session_id!r}{where}: it is unknown"
            f"{',' if keyed else ' or'} expired{kept}{another_key}; omit the session id to start "
            "a new conversation"
        )


def _seconds(value: float) -> str:
    """``86,400`` (whole seconds) or ``0.5``: a duration as the documentation writes it."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,}"


class UnreadableSessionError(SessionError):
    """A stored conversation that no longer reads (damaged, or written by an incompatible
    version).

    It carries the ``owner`` and ``domain`` as they were stored (either may be damaged too):
    only the conversation's owner may learn that it is damaged; to every other caller it is an
    unknown session, as if it did not exist.
    """

    def __init__(self, message: str, *, owner: object = None, domain: object = None) -> None:
        self.owner = owner
        self.domain = domain
        super().__init__(message)


class SessionConflictError(SessionError):
    """Another process applied a round of the same session first (optimistic concurrency)."""

    def __init__(self, session_id: str, expected_version: int, actual_version: int) -> None:
        self.session_id = session_id
        self.expected_version = expected_version
        self.actual_version = actual_version
        super().__init__(
            f"session {session_id!r} was changed by another request while this message was "
            f"answered (expected version {expected_version}, found {actual_version}): the other "
            "request's turn was stored and this one was not; send this message again with the "
            "same session id to make it the next turn"
        )


class SessionStoreUnavailableError(SessionError):
    """The session store cannot be reached or failed.

    Raised while a conversation was being loaded, nothing was changed. Raised while a turn was
    being stored (``while_storing``: :meth:`storing_turn`), the tools of the turn had run and
    its answer could not be stored; a store that timed out (Redis) may have stored it after all.
    """

    def __init__(self, message: str, *, while_storing: bool = False) -> None:
        self.while_storing = while_storing
        super().__init__(message)

    @classmethod
    def storing_turn(cls, error: SessionStoreUnavailableError) -> SessionStoreUnavailableError:
        """``error``, raised while a turn was being stored, saying what that means for the turn:
        the user must not read it as "nothing happened" (a tool may have booked or sent)."""
        return cls(f"storing this turn failed: {STORING_TURN_FAILED}; {error}", while_storing=True)


STORING_TURN_FAILED = (
    "its answer could not be stored and its tools may have run (a store that timed out may have "
    "stored the answer after all)"
)
"""What a store's failure while storing a turn means for the user; every front door says it."""
