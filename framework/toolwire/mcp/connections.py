"""Connections to the declared MCP servers: opened on first call, reused, closed with the app.

Every connection lives in one event loop on a daemon thread of its own, so the same connection
serves callers in any event loop or thread (the CLI's ``asyncio.run``, the HTTP server's loop, a
test's loop, a plain tool method in a worker thread) and ``App.aclose()`` can close it from any of
them. The SDK's client (``ClientSession`` over ``stdio_client`` or ``streamable_http_client``)
keeps its transport open inside one task per server; callers' requests are correlated by the
session, so concurrent calls share the connection.

A call that fails at the transport (the server crashed, the pipe closed, no answer within
``timeout_s``) closes that connection: the next call starts the server again. A stdio server that
exited while idle is noticed before a call is sent to it (its stdout closed), and the call starts
it again. A streamable HTTP server that no longer knows the session (it restarted, or dropped the
session after idling) answers 404 without running the request; the call is then sent once more
in a new session, as the MCP spec asks. A result that does not match the tool's output schema
(the SDK checks it) fails that call only; the connection stays.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import structlog

from toolwire.errors import McpServerError
from toolwire.mcp.bounded_lines import bounded_encoding, too_large
from toolwire.mcp.declarations import McpServerEntry
from toolwire.mcp.records import McpToolResult, RemoteTool, tool_result
from toolwire.orchestrator.invoke import describe
from toolwire.redaction import redact

if TYPE_CHECKING:
    from mcp import ClientSession, MCPError

log = structlog.get_logger(__name__)

T = TypeVar("T")

MAX_TOOL_PAGES = 100
"""Most ``tools/list`` pages read from one server (a paginator that never ends cannot hang)."""
STDERR_TAIL_CHARS = 600
"""How much of a failed server's stderr an error message quotes."""
CLOSE_TIMEOUT_S = 10.0
MAX_REASON_CHARS = 500
"""How much of the SDK's reason a result that does not match its output schema quotes."""
OUTPUT_SCHEMA_FAILURES = (
    "Invalid structured content returned by tool",
    "has an output schema but did not return structured content",
    "Invalid schema for tool",
)
"""What the ``RuntimeError`` of the SDK's own check of a result against the tool's output schema
says (``call_tool``); any other ``RuntimeError`` is the connection's."""
SESSION_LOST = ("session not found", "session terminated")
"""The messages of the error a streamable HTTP call gets when the server answers 404 for the
session (it restarted, or dropped the session after idling; the Python SDK's default is 30
minutes): the server's own JSON-RPC error (the Python and TypeScript SDKs say "Session not
found"), or the SDK client's stand-in for a 404 without one ("Session terminated")."""


class McpConnections:
    """The app's connections to its declared MCP servers (see the module docstring)."""

    def __init__(self, servers: Sequence[McpServerEntry] = ()) -> None:
        self.servers: dict[str, McpServerEntry] = {server.name: server for server in servers}
        self._lock = threading.Lock()
        self._loop: _LoopThread | None = None
        self._open: dict[str, _Connection] = {}
        """Server name → its connection; only the loop thread touches it."""

    # -- for tools ---------------------------------------------------------------------------

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> McpToolResult:
        """Call ``tool`` on ``server`` (connecting first if needed)."""
        return await asyncio.wrap_future(self._submit(self._call(server, tool, arguments)))

    def call_sync(self, server: str, tool: str, arguments: dict[str, Any]) -> McpToolResult:
        """:meth:`call` from plain code outside any event loop."""
        return self._submit(self._call(server, tool, arguments)).result()

    # -- for discovery and checks ------------------------------------------------------------

    def list_tools(
        self, servers: Sequence[McpServerEntry]
    ) -> dict[str, list[RemoteTool] | McpServerError]:
        """Start each server, list its tools and stop it again, all at once; bounded by each
        server's ``timeout_s``. A server that fails maps to its error."""
        return self._submit(_list_all(servers)).result()

    # -- closing -----------------------------------------------------------------------------

    def connected(self) -> list[str]:
        """The servers with an open connection (for tests and ``toolwire check``)."""
        return sorted(name for name, connection in self._open.items() if connection.alive)

    async def aclose(self) -> None:
        """Close every connection (stopping ``command`` servers) and the loop thread."""
        if self._loop is not None:
            await asyncio.to_thread(self.close)

    def close(self) -> None:
        """:meth:`aclose` for plain code."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            loop.submit(self._close_all()).result(timeout=CLOSE_TIMEOUT_S * 2)
        finally:
            loop.stop()

    # -- inside the loop thread --------------------------------------------------------------

    def _submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._loop is None:
                self._loop = _LoopThread()
            return self._loop.submit(coroutine)

    async def _call(
        self, server: str, tool: str, arguments: dict[str, Any], *, again: bool = False
    ) -> McpToolResult:
        """Call ``tool``; ``again``: the retry in a new session after the server forgot ours."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        entry = self.servers.get(server)
        if entry is None:
            known = ", ".join(sorted(self.servers)) or "none"
            raise McpServerError(f"no MCP server {server!r} is declared; declared: {known}")
        connection = await self._connection(entry)
        session = await connection.session()
        try:
            result = await asyncio.wait_for(
                session.call_tool(tool, arguments, read_timeout_seconds=entry.timeout_s),
                entry.timeout_s,
            )
        except MCPError as error:
            refused = too_large(error.data)
            if refused is not None:
                log.warning("mcp_result_too_large", server=server, tool=tool, bytes=refused.size)
                size = "" if refused.size is None else f"{refused.size:,} bytes, "
                raise McpServerError(
                    f"MCP tool {tool!r} of server {server!r} returned {size}more than "
                    f"max_result_bytes allows ({refused.limit:,}); ask the tool for less, or "
                    f"raise max_result_bytes of the mcp server {server!r}"
                ) from None
            lost = session_lost(error, entry)
            if lost and not again:  # the request never ran: a new session sends it (MCP spec)
                log.info("mcp_session_lost", server=server, tool=tool, error=error.message)
                await connection.close()
                return await self._call(server, tool, arguments, again=True)
            if not lost and error.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                raise McpServerError(
                    f"mcp server {server!r} refused tool {tool!r}: {error.message}"
                ) from None
            failure: BaseException = error
        except RuntimeError as error:
            if not any(words in str(error) for words in OUTPUT_SCHEMA_FAILURES):
                failure = error  # not the SDK's check of the result: treated as a crash
            else:  # call_tool's own check of the result: the session is fine
                reason = str(error).partition("\n")[0][:MAX_REASON_CHARS]
                raise McpServerError(
                    f"MCP tool {tool!r} of server {server!r} returned a result that does not "
                    f"match its output schema: {reason}"
                ) from None
        except Exception as error:  # a crashed server, a closed pipe, a timeout
            failure = error
        else:
            return tool_result(result)
        stderr = connection.stderr_tail()
        await connection.close()
        log.warning("mcp_call_failed", server=server, tool=tool, error=describe(failure))
        raise McpServerError(
            f"mcp server {server!r} failed during a call of {tool!r}: {_failure(failure, entry)}"
            f"{stderr}; the connection was closed and the next call starts it again"
        ) from None

    async def _connection(self, entry: McpServerEntry) -> _Connection:
        """The server's open connection, or a new one in place of one that was closed or whose
        server exited while idle (that one is closed now, its process reaped)."""
        connection = self._open.get(entry.name)
        if connection is not None and connection.alive:
            return connection
        self._open[entry.name] = fresh = _Connection(entry)
        if connection is not None:
            if not connection.closed:
                log.info("mcp_server_exited", server=entry.name, target=entry.target)
            await connection.close()
        return fresh

    async def _close_all(self) -> None:
        connections, self._open = list(self._open.values()), {}
        await asyncio.gather(*(connection.close() for connection in connections))


class _LoopThread:
    """An event loop running forever on a daemon thread (it never keeps the process alive)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="toolwire-mcp")
        self._thread.daemon = True
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=CLOSE_TIMEOUT_S)
        if not self._thread.is_alive():
            self.loop.close()


class _Connection:
    """One server's session, held open by a task until :meth:`close`."""

    def __init__(self, entry: McpServerEntry) -> None:
        self.entry = entry
        self.closed = False
        """Closed, failed to start, or lost."""
        self._transport_ended: Callable[[], bool] = lambda: False
        self._ready: asyncio.Future[ClientSession] | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stderr: TextIO | None = None
        self._ended_stderr = ""

    @property
    def alive(self) -> bool:
        """Not closed, and its transport open (a stdio server that exited while idle closed its
        stdout: the next call must not be sent to it, and is not its failure)."""
        return not self.closed and not self._transport_ended()

    async def session(self) -> ClientSession:
        """The open session; the first caller opens it, later ones wait for the same one."""
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._hold(self._ready))
            log.info("mcp_connecting", server=self.entry.name, target=self.entry.target)
        try:
            return await asyncio.shield(self._ready)
        except Exception as error:
            self.closed = True
            raise McpServerError(
                f"mcp server {self.entry.name!r} ({self.entry.target}) did not start: "
                f"{_failure(error, self.entry)}{self.stderr_tail()}"
            ) from None

    async def _hold(self, ready: asyncio.Future[ClientSession]) -> None:
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as stderr:
            self._stderr = stderr
            try:
                async with open_session(self.entry, stderr) as (session, ended):
                    self._transport_ended = ended
                    ready.set_result(session)
                    await self._stop.wait()
            except BaseException as error:
                if not ready.done():
                    ready.set_exception(error)
                elif not isinstance(error, asyncio.CancelledError):
                    log.warning(
                        "mcp_connection_lost", server=self.entry.name, error=describe(error)
                    )
            finally:
                self.closed = True
                self._ended_stderr = self.stderr_tail()
                self._stderr = None

    async def close(self) -> None:
        self.closed = True
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, CLOSE_TIMEOUT_S)
            except (TimeoutError, asyncio.CancelledError):
                log.warning("mcp_close_timed_out", server=self.entry.name)

    def stderr_tail(self) -> str:
        """``"; its stderr ended with: …"`` (once the server stopped: as it was then)."""
        stream = self._stderr
        if stream is None or stream.closed:
            return self._ended_stderr
        stream.flush()
        stream.seek(0, os.SEEK_END)
        size = stream.tell()
        stream.seek(max(0, size - STDERR_TAIL_CHARS * 4))
        return _quoted_tail(stream.read())


@asynccontextmanager
async def open_session(
    entry: McpServerEntry, stderr: TextIO
) -> AsyncIterator[tuple[ClientSession, Callable[[], bool]]]:
    """An initialized ``ClientSession`` to the server, and whether its transport has ended (a
    stdio server that exited: the transport closed its end of the read stream); the transport
    closes on exit."""
    import httpx2
    from anyio.streams.memory import MemoryObjectReceiveStream
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    from toolwire.mcp.bounded_bodies import bound_bodies

    async with AsyncExitStack() as stack:
        if entry.transport == "stdio":
            argv = entry.argv
            parameters = StdioServerParameters(
                command=argv[0],
                args=argv[1:],
                env=entry.env or None,
                cwd=entry.cwd,
                encoding=bounded_encoding(entry.max_result_bytes),
            )
            streams = await stack.enter_async_context(stdio_client(parameters, errlog=stderr))
        else:
            client = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=_auth_headers(entry),
                    timeout=httpx2.Timeout(entry.timeout_s),
                    event_hooks={"response": [bound_bodies(entry.max_result_bytes)]},
                )
            )
            streams = await stack.enter_async_context(
                streamable_http_client(
                    str(entry.url), http_client=client, max_sse_event_size=entry.max_result_bytes
                )
            )
        session = await stack.enter_async_context(
            ClientSession(*streams, read_timeout_seconds=entry.timeout_s)
        )
        await asyncio.wait_for(session.initialize(), entry.timeout_s)
        read = streams[0]

        def ended() -> bool:
            if not isinstance(read, MemoryObjectReceiveStream):  # HTTP: its client is ours
                return False
            return read.statistics().open_send_streams == 0

        yield session, ended


def session_lost(error: MCPError, entry: McpServerEntry) -> bool:
    """Whether a call over HTTP failed because the server no longer knows its session."""
    return entry.transport == "http" and error.message.strip().lower() in SESSION_LOST


def _auth_headers(entry: McpServerEntry) -> dict[str, str]:
    if entry.bearer_token_env is None:
        return {}
    token = os.environ.get(entry.bearer_token_env, "").strip()  # a file's trailing newline
    if not token:
        raise McpServerError(
            f"the environment variable {entry.bearer_token_env} (bearer_token_env) is not set; "
            "set it to the server's token"
        )
    return {"Authorization": f"Bearer {token}"}


async def _list_all(
    servers: Sequence[McpServerEntry],
) -> dict[str, list[RemoteTool] | McpServerError]:
    results = await asyncio.gather(*(_list_one(server) for server in servers))
    return {server.name: result for server, result in zip(servers, results, strict=True)}


async def _list_one(entry: McpServerEntry) -> list[RemoteTool] | McpServerError:
    from mcp.types import PaginatedRequestParams

    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as stderr:
        try:
            async with asyncio.timeout(entry.timeout_s):
                async with open_session(entry, stderr) as (session, _ended):
                    tools: list[RemoteTool] = []
                    cursor: str | None = None
                    for _page in range(MAX_TOOL_PAGES):
                        params = PaginatedRequestParams(cursor=cursor) if cursor else None
                        listed = await session.list_tools(params=params)
                        tools += [
                            RemoteTool(
                                name=tool.name,
                                description=tool.description or "",
                                input_schema=tool.input_schema,
                            )
                            for tool in listed.tools
                        ]
                        cursor = listed.next_cursor
                        if not cursor:
                            break
                    return tools
        except McpServerError as error:
            return error
        except Exception as error:  # the server's failure, reported at its declaration
            stderr.seek(0)
            quoted = _quoted_tail(stderr.read())
            return McpServerError(
                f"cannot list its tools ({entry.target}): {_failure(error, entry)}{quoted}"
            )


def _quoted_tail(stderr: str) -> str:
    """``"; its stderr ended with: …"`` (secrets of known shapes masked), or nothing."""
    tail = redact(stderr[-STDERR_TAIL_CHARS:].strip())
    return f"; its stderr ended with: {tail}" if tail else ""


def _failure(error: BaseException, entry: McpServerEntry) -> str:
    """An exception as a message: timeouts name the limit, task groups their first cause."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, TimeoutError):
        return f"no answer within {entry.timeout_s:g} s (timeout_s)"
    return describe(error)
