"""Run-time commands: ``toolwire ask`` (one message) and ``toolwire chat`` (a REPL)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.tree import Tree

from toolwire.app import App
from toolwire.cli.live import LiveView, watch
from toolwire.cli.state import ConfigOption, load_app_or_exit
from toolwire.cli.text import empty_problem, literal, not_utf8, session_id_problem
from toolwire.conversation import TurnContext
from toolwire.disclosure import disclosed_answer
from toolwire.errors import (
    SessionConflictError,
    SessionError,
    SessionStoreUnavailableError,
    ToolwireError,
    UnknownSessionError,
)
from toolwire.events import Event, ModelProgress, observing
from toolwire.hookspecs import RegisterCommand, hookimpl
from toolwire.orchestrator import Answer, TaskTrace
from toolwire.printable import printable
from toolwire.selection.routing import RoutingRecord
from toolwire.selection.trace import SelectionRecord

DomainOption = Annotated[
    str | None,
    typer.Option(
        "--domain",
        help="The domain to ask (without it the message is routed to the domain it is about, "
        "else default_domain).",
    ),
]
TraceFlag = Annotated[
    bool,
    typer.Option(
        "--trace",
        help="Draw the task tree after the answer, with the details of failures (without it a "
        "failure shows an error id; its details are in the log).",
    ),
]

EXIT_WORDS = frozenset({"exit", "quit", ":q"})
NEW_CONVERSATION = "new"
"""The chat line that starts a new conversation (the turns before are no longer read)."""
PROCESS_STORES = frozenset({"memory"})
"""Session stores (``sessions.store``) whose conversations end with the process: a later
``toolwire ask --session`` is another process and cannot find them."""


def load_app(ctx: typer.Context, config: Path | None) -> App:
    """Build the app for a command (tests replace this to inject plugins and a scripted model)."""
    return load_app_or_exit(ctx, config)


def ask(
    ctx: typer.Context,
    message: Annotated[
        str, typer.Argument(help="The question, a follow-up, or the reply to a clarification.")
    ],
    domain: DomainOption = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Continue this conversation (a follow-up, or the reply to its question).",
        ),
    ] = None,
    trace: TraceFlag = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print the Answer as JSON.")] = False,
    config: ConfigOption = None,
) -> None:
    """Ask one question; the answer prints the conversation's id to continue it with.

    The embedded model is started for the question, unless 'toolwire model serve' keeps it
    running.
    """
    problem = (
        empty_problem(message, "the message")
        or not_utf8(message, "the message")
        or (session and session_id_problem(session))
    )
    if problem:
        _refuse(problem)
    app = load_app(ctx, config)
    console = Console(highlight=False)
    view = LiveView(console, Console(stderr=True, highlight=False), stream_text=not json_output)
    try:
        answer = asyncio.run(_ask_once(app, message, domain, session, view))
    except ToolwireError as error:
        _fail(error)
    answer = disclosed_answer(answer, verbose=trace)
    if json_output:
        typer.echo(answer.model_dump_json(indent=2))
        return
    show_answer(console, answer, trace=trace, streamed=view.text)
    store = app.config.sessions.store
    if answer.session_id and store in PROCESS_STORES:  # on stderr: stdout stays the answer
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"[dim](the conversation is not kept: sessions.store is {store!r}, "
            "this process only; sessions.store: sqlite keeps it for toolwire ask --session)[/dim]"
        )
    elif answer.kind == "clarification":
        console.print(f'[dim]Reply with: toolwire ask "…" --session {answer.session_id}[/dim]')
    elif answer.session_id:  # on stderr: stdout stays the answer alone
        hint = f'[dim]Follow up with: toolwire ask "…" --session {answer.session_id}[/dim]'
        Console(stderr=True, highlight=False).print(hint)


def chat(
    ctx: typer.Context,
    domain: DomainOption = None,
    trace: TraceFlag = False,
    config: ConfigOption = None,
) -> None:
    """Talk to a domain: one conversation, each line a turn that remembers the ones before (a
    clarifying question is answered by your next line); 'new' starts a new conversation.

    The embedded model is started before the first prompt (or a running 'toolwire model serve'
    server is used), so the first question does not wait for it.
    """
    app = load_app(ctx, config)
    if domain is not None:  # said now, not after the user typed the first message
        try:
            app.check_domain(domain)
        except ToolwireError as error:
            _fail(error)
    console = Console(highlight=False)
    # One event loop for every question, the prompt read in the main thread between them: a
    # Ctrl-C at the prompt ends the chat at once (read in a worker thread, it left the process
    # waiting for that thread's line at exit).
    with asyncio.Runner() as runner:
        try:
            _start_model(runner, app, console)
            console.print(
                "[dim]Ask away; 'new' starts a new conversation; an empty line, 'exit' or Ctrl-D "
                "ends the chat.[/dim]"
            )
            _chat(runner, app, console, domain, trace)
        except ToolwireError as error:  # at start-up: each turn's own is printed by _chat
            _fail(error)
        finally:
            runner.run(app.aclose())


def _start_model(runner: asyncio.Runner, app: App, console: Console) -> None:
    """Start the model before the first prompt: a line when its server starts, its assembly's
    progress (a fresh install) and a line when it is ready, with the time (``LiveView``)."""
    err = Console(stderr=True, highlight=False)
    view = LiveView(console, err, stream_text=False)

    def show(event: Event) -> None:
        if isinstance(event, ModelProgress) and event.stage == "starting":
            err.print(f"[dim]starting the embedded model {literal(event.model)}…[/dim]")
        view.show(event)

    async def start() -> None:
        with observing(show):  # here: the runner's tasks run in a context of its own
            await app.start_model()

    with view:
        runner.run(start())


async def _ask_once(
    app: App, message: str, domain: str | None, session: str | None, view: LiveView
) -> Answer:
    try:
        return await watch(app, message, domain, session, view)
    finally:
        await app.aclose()


def _chat(
    runner: asyncio.Runner, app: App, console: Console, domain: str | None, trace: bool
) -> None:
    session_id: str | None = None
    waiting = False
    while True:
        prompt = "reply> " if waiting else "you> "
        try:
            with settling(runner, app):
                line = console.input(prompt).strip()
        except EOFError:
            return
        if not line or line.lower() in EXIT_WORDS:
            return
        if line.lower() == NEW_CONVERSATION:
            session_id, waiting = None, False
            console.print("[dim](a new conversation)[/dim]")
            continue
        problem = not_utf8(line, "that line")
        if problem:
            console.print(problem, markup=False)
            continue
        ask_domain = None if session_id else domain
        view = LiveView(console, Console(stderr=True, highlight=False), stream_text=True)
        try:
            answered = runner.run(watch(app, line, ask_domain, session_id, view))
        except ToolwireError as error:  # this turn failed; the conversation goes on, if it can
            if view.text:
                console.print()  # ends the streamed text's line
            _print_error(error)
            if session_id is not None and conversation_lost(error):
                session_id, waiting = None, False
                console.print("[dim](a new conversation starts with your next message)[/dim]")
            continue
        answer = disclosed_answer(answered, verbose=trace)
        session_id, waiting = answer.session_id, answer.kind == "clarification"
        show_answer(console, answer, trace=trace, streamed=view.text)


def conversation_lost(error: ToolwireError) -> bool:
    """Whether ``error`` says the conversation cannot be continued (unknown, expired or
    damaged), so every later turn on it would fail the same way; a conflict or an unreachable
    store is worth sending the message again."""
    if isinstance(error, UnknownSessionError):
        return True
    retry = (SessionConflictError, SessionStoreUnavailableError)
    return isinstance(error, SessionError) and not isinstance(error, retry)


@contextmanager
def settling(runner: asyncio.Runner, app: App) -> Iterator[None]:
    """While the main thread reads the prompt, the runner's loop runs in a thread of its own
    until the app has settled (``App.settle``: the embedded model warms the next turn's prompt
    while the user types; with the loop stopped it would wait for the next question). Leaving
    the block stops that thread; a warm-up still in flight goes on in the next question, whose
    first call cancels it."""
    stop = asyncio.Event()

    async def until_settled_or_stopped() -> None:
        stopping = asyncio.ensure_future(stop.wait())
        settled = asyncio.ensure_future(app.settle())
        await asyncio.wait({stopping, settled}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()

    thread = threading.Thread(
        target=runner.run, args=(until_settled_or_stopped(),), name="toolwire-settle", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        runner.get_loop().call_soon_threadsafe(stop.set)
        thread.join()


def show_answer(console: Console, answer: Answer, *, trace: bool, streamed: str = "") -> None:
    """The answer (or question), guaranteed contexts, failures, and optionally the task tree.

    ``streamed``: the model's text already printed as it was written; what the final answer
    adds to it (guaranteed contexts that lead it) follows it, and a final text that replaced it
    (the composition failed) is printed whole."""
    shown = streamed.strip()
    if answer.kind == "clarification":
        console.print(f"[bold yellow]?[/bold yellow] {literal(answer.text)}")
    elif shown and shown in answer.text:
        console.print()  # ends the streamed text's line
    else:
        if shown:
            console.print("\n[dim](the answer, as it stands:)[/dim]")
        console.print(literal(answer.text))
    written = shown if shown and shown in answer.text else answer.text
    for text in answer.guaranteed_contexts:
        if text not in written:
            console.print(f"[green]▌[/green] {literal(text)}")
    for failure in answer.failures:
        console.print(f"[red]failed:[/red] {literal(failure)}")
    if trace:
        if answer.routing is not None:
            console.print(routing_line(answer.routing))
        if answer.context is not None:
            console.print(turn_line(answer.turn, answer.context), markup=False)
        console.print(trace_tree(answer.trace))
        for call in answer.model_calls:
            console.print(
                f"[dim]model {call.purpose}: {call.latency_ms:.0f} ms, {call.prompt_tokens} "
                f"prompt ({_cached(call.cached_prompt_tokens, call.prompt_tokens)}, "
                f"{call.shared_prefix_chars} chars of prefix shared), {call.completion_tokens} "
                f"completion{' (cut off at the limit)' if call.truncated else ''}"
                f"{'' if call.ok else ' — failed: ' + literal(call.error or '')}[/dim]"
            )
        usage = answer.usage
        console.print(
            f"[dim]{usage.llm_calls} model call(s), {usage.prompt_tokens} prompt tokens "
            f"({_cached(usage.cached_prompt_tokens, usage.prompt_tokens)}), "
            f"{usage.completion_tokens} completion tokens[/dim]"
        )


def _cached(cached: int, prompt: int) -> str:
    """``"900 cached = 90%"``: prompt tokens the server took from its cache."""
    return f"{cached} cached = {cached / prompt:.0%}" if prompt else f"{cached} cached"


def routing_line(routing: RoutingRecord) -> str:
    """How a message that named no domain was routed: the domain, who decided, the scores."""
    scores = ", ".join(f"{s.domain} {s.score:.2f}" for s in routing.scores) or "no match"
    where = routing.domain or "no domain fits (the default domain answers)"
    line = f"[cyan]routed[/cyan] to {literal(where)} by {routing.decided_by} [dim]({scores})[/dim]"
    if routing.failure:
        line += f" [red]{literal(routing.failure)}[/red]"
    return line


def trace_tree(task: TaskTrace, tree: Tree | None = None) -> Tree:
    """The task tree as ``rich`` draws it: coordinators, subtasks, decisions, tools, failures."""
    label = f"[bold]task {task.task_no}[/bold] [{_status_style(task)}]{task.status.value}[/]"
    if task.decision is not None:
        label += f" [cyan](conditional: {task.decision.value})[/cyan]"
    if task.prompt_type:
        label += f" [dim]type={literal(task.prompt_type)}[/dim]"
    question = task.user_message or task.task_prompt
    label += f"  {literal(_short(question))}"
    node = tree.add(label) if tree is not None else Tree(label)
    if question != task.task_prompt:
        rewritten = literal(_short(task.task_prompt))
        node.add(f"[dim]task prompt after the coordinators: {rewritten}[/dim]")
    if task.owner_coordinator_name:
        required = ", ".join(task.required_tool_names)
        node.add(
            f"[dim]owner {literal(task.owner_coordinator_name)}"
            + (f", required {literal(required)}" if required else "")
            + "[/dim]"
        )
    for run in task.coordinators:
        detail = f": {literal(run.detail)}" if run.detail else ""
        node.add(
            f"[magenta]coordinator[/magenta] {literal(run.coordinator_name)} {run.outcome}{detail}"
        )
    for sub_task in task.sub_tasks:
        trace_tree(sub_task, node)
    if task.selection is not None:
        _selection_node(node, task.selection)
    for tool in task.tools:
        style = "red" if tool.outcome == "error" else "blue"
        detail = f" — {literal(_short(tool.detail))}" if tool.detail else ""
        node.add(
            f"[{style}]tool[/{style}] {literal(tool.tool_name)} ({tool.reason}) "
            f"{tool.outcome}{detail}"
        )
    for note in task.notes:
        node.add(f"[dim]{literal(note)}[/dim]")
    shown = {tool.detail for tool in task.tools if tool.outcome == "error"}
    for failure in task.failures:
        if failure not in shown:
            node.add(f"[red]failed: {literal(failure)}[/red]")
    return node


def _selection_node(parent: Tree, selection: SelectionRecord) -> None:
    """How the tools were chosen: each candidate with its retrieval score and why it was or was
    not activated, names the model gave that were no candidates, a failed step."""
    activated = ", ".join(selection.activated) or "no tool"
    node = parent.add(
        f"[cyan]selection[/cyan] {literal(selection.describe())} → {literal(activated)}"
    )
    for candidate in selection.candidates:
        node.add(
            f"[dim]{literal(candidate.tool_name)} (score {candidate.score:.2f}): "
            f"{literal(selection.why(candidate.tool_name))}[/dim]"
        )
    if selection.ignored:
        node.add(f"[dim]not candidates, ignored: {literal(', '.join(selection.ignored))}[/dim]")


def _status_style(task: TaskTrace) -> str:
    return {"done": "green", "failed": "red", "waiting_for_user": "yellow"}.get(
        task.status.value, "dim"
    )


def _short(text: str, limit: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _fail(error: ToolwireError) -> NoReturn:
    _print_error(error)
    raise typer.Exit(1)


def _print_error(error: ToolwireError) -> None:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    err.print(printable(str(error)), markup=False)
    if isinstance(error, UnknownSessionError) and error.location:
        err.print(f"(the session store read: {printable(error.location)})", markup=False)


def _refuse(problem: str) -> NoReturn:
    """A command line that cannot be used as given: say why, exit 2 (as for a usage error)."""
    Console(stderr=True, highlight=False, soft_wrap=True).print(problem, markup=False)
    raise typer.Exit(2)


@hookimpl
def register_commands(register: RegisterCommand) -> None:
    """``toolwire ask`` and ``toolwire chat``."""
    register(ask)
    register(chat)


def turn_line(turn: int, context: TurnContext) -> str:
    """What a later turn took from the turns before, in one line of the trace."""
    read = [f"summary of turns {each}" for each in context.summaries_read]
    read += [f"turn {number}" for number in context.turns_read]
    line = f"turn {turn}, reading {', '.join(read) or 'no earlier turn'}"
    if context.standalone is not None:
        line += f"; run as {context.standalone!r}"
    return "; ".join([line, *context.notes])
