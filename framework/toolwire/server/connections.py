"""uvicorn's HTTP protocols with a deadline and a size limit for the request head.

uvicorn drops a connection that stays idle between requests (``timeout_keep_alive``), but not
one that connects and then sends nothing, or sends its headers a byte at a time: each would hold
a connection slot forever. These subclasses close a connection whose request head (request line
and headers) is not complete ``head_timeout_s`` after the connection opened or after the first
byte of the request arrived. The body has its own deadline, checked where the body is read
(``toolwire.server.middleware.BodyLimitMiddleware``), which can still answer with a 408.

uvicorn's httptools protocol also buffers a head of any size (megabytes a second from one
client until the deadline): a head that grows past ``max_header_bytes`` is answered with 431 and
the connection closed. The h11 protocol gets the same limit.

Two more bounds on a client that stops reading: a response it never took off the connection is
dropped with the connection when the idle timeout between requests strikes (uvicorn's own
``close()`` waited for the unsent bytes forever), and each request's scope carries
:data:`ABORT_EXTENSION`, with which the question admission drops a response still being sent
when the question's time is up (``toolwire.server.admission``).

The httptools protocol is used when httptools is installed (as uvicorn's ``auto`` would), else
the h11 one.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import structlog
from uvicorn.protocols.http.h11_impl import H11Protocol

from toolwire.server.problems import ApiError

log = structlog.get_logger("toolwire.server.access")

READ_CHUNK_BYTES = 256 * 1024
"""The most an asyncio transport hands a protocol at once (``data_received``)."""

ABORT_EXTENSION = "toolwire.abort_connection"
"""The key, in a request scope's ``extensions``, of a callable that drops the request's
connection at once (its unsent bytes discarded)."""


class _HeadDeadline(asyncio.Protocol):
    """The timer and the byte count of a request head; a subclass arms the timer when a request
    begins and disarms it once its head is in, and calls :meth:`_head_received` after feeding
    each chunk to its parser.

    A mixin placed before uvicorn's protocol class, so that its methods wrap uvicorn's.
    """

    head_timeout_s: float = 10.0
    max_header_bytes: int = 32_768
    _head_timer: asyncio.TimerHandle | None = None
    _head_bytes: int = 0
    transport: asyncio.Transport
    client: tuple[str, int] | None

    def _arm_head_deadline(self) -> None:
        if self._head_timer is None:
            loop = asyncio.get_running_loop()
            self._head_timer = loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _disarm_head_deadline(self) -> None:
        self._head_bytes = 0
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_received(self, size: int) -> None:
        """``size`` bytes were fed to the parser; while the head is still incomplete they were
        all part of it: past ``max_header_bytes`` the client gets 431 and is disconnected."""
        if self._head_timer is None or self.transport.is_closing():
            return
        self._head_bytes += size
        if self._head_bytes <= self.max_header_bytes:
            return
        log.info(
            "connection_dropped",
            reason="request_head_too_large",
            client=self._client_text(),
            received_bytes=self._head_bytes,
            limit_bytes=self.max_header_bytes,
        )
        self._disarm_head_deadline()
        self.transport.write(_head_too_large(self.max_header_bytes))
        self.transport.close()

    def _client_text(self) -> str | None:
        return f"{self.client[0]}:{self.client[1]}" if self.client else None

    def _offer_abort(self) -> None:
        """Put :data:`ABORT_EXTENSION` into the current request's scope."""
        scope: dict[str, Any] | None = getattr(self, "scope", None)
        if scope is not None:
            scope.setdefault("extensions", {})[ABORT_EXTENSION] = self._abort

    def _abort(self) -> None:
        if not self.transport.is_closing() or self.transport.get_write_buffer_size():
            log.info(
                "connection_dropped",
                reason="response_not_read",
                client=self._client_text(),
                unsent_bytes=self.transport.get_write_buffer_size(),
            )
        self.transport.abort()

    def timeout_keep_alive_handler(self) -> None:
        """Idle since its last response: a connection whose client has not read that response
        yet is dropped (``close()`` would wait for the client to read it, for ever)."""
        if self.transport.get_write_buffer_size():
            self._abort()
            return
        super().timeout_keep_alive_handler()  # type: ignore[misc]

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        log.info(
            "connection_dropped",
            reason="request_head_timeout",
            client=self._client_text(),
            timeout_s=self.head_timeout_s,
        )
        self.transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)


class H11WithHeadDeadline(_HeadDeadline, H11Protocol):
    """h11: the head is in once the peer's state leaves IDLE."""

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            self._arm_head_deadline()  # part of a head: the deadline runs from its first byte
            self._head_received(len(data))
        else:
            self._disarm_head_deadline()
            self._offer_abort()  # the request's scope is made; its task has not run yet


def protocol_class(head_timeout_s: float, max_header_bytes: int = 32_768) -> type[asyncio.Protocol]:
    """The HTTP protocol class for uvicorn's ``http`` option, with this head deadline and
    size limit (pass :func:`h11_event_limit` as uvicorn's ``h11_max_incomplete_event_size``)."""
    base: type[asyncio.Protocol]
    try:
        base = _httptools_with_head_deadline()
    except ImportError:  # httptools is optional (uvicorn[standard] on CPython installs it)
        base = H11WithHeadDeadline
    attributes: dict[str, Any] = {
        "head_timeout_s": head_timeout_s,
        "max_header_bytes": max_header_bytes,
    }
    return type(base.__name__, (base,), attributes)


def h11_event_limit(max_header_bytes: int) -> int:
    """h11's own limit on an incomplete head, set above ``max_header_bytes`` by one read, so
    that the 431 above answers first (h11's would be a bare 400)."""
    return max_header_bytes + READ_CHUNK_BYTES


def _head_too_large(limit: int) -> bytes:
    error = ApiError(
        431,
        "headers_too_large",
        f"the request line and headers are over {limit} bytes (server.max_header_bytes); send "
        "fewer or shorter headers",
        details={"limit_bytes": limit},
    )
    body = error.body().model_dump_json().encode()
    head = (
        "HTTP/1.1 431 Request Header Fields Too Large\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


def _httptools_with_head_deadline() -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HttpToolsWithHeadDeadline(_HeadDeadline, HttpToolsProtocol):
        """httptools: its parser says when a request begins and when its head is complete."""

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._head_received(len(data))

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm_head_deadline()

        def on_headers_complete(self) -> None:
            self._disarm_head_deadline()
            self._offer_abort()
            super().on_headers_complete()

    return HttpToolsWithHeadDeadline
