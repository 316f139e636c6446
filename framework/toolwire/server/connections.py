"""uvicorn's HTTP protocols with a deadline for the request head.

uvicorn drops a connection that stays idle between requests (``timeout_keep_alive``), but not
one that connects and then sends nothing, or sends its headers a byte at a time: each would hold
a connection slot forever. These subclasses close a connection whose request head (request line
and headers) is not complete ``head_timeout_s`` after the connection opened or after the first
byte of the request arrived. The body has its own deadline, checked where the body is read
(``toolwire.server.middleware.BodyLimitMiddleware``), which can still answer with a 408.

The httptools protocol is used when httptools is installed (as uvicorn's ``auto`` would), else
the h11 one.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import structlog
from uvicorn.protocols.http.h11_impl import H11Protocol

log = structlog.get_logger("toolwire.server.access")


class _HeadDeadline(asyncio.Protocol):
    """The timer; a subclass arms it when a request begins and disarms it once its head is in.

    A mixin placed before uvicorn's protocol class, so that its methods wrap uvicorn's.
    """

    head_timeout_s: float = 10.0
    _head_timer: asyncio.TimerHandle | None = None
    transport: asyncio.Transport
    client: tuple[str, int] | None

    def _arm_head_deadline(self) -> None:
        if self._head_timer is None:
            loop = asyncio.get_running_loop()
            self._head_timer = loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _disarm_head_deadline(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        client = f"{self.client[0]}:{self.client[1]}" if self.client else None
        log.info(
            "connection_dropped",
            reason="request_head_timeout",
            client=client,
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
        else:
            self._disarm_head_deadline()


def protocol_class(head_timeout_s: float) -> type[asyncio.Protocol]:
    """The HTTP protocol class for uvicorn's ``http`` option, with this head deadline."""
    base: type[asyncio.Protocol]
    try:
        base = _httptools_with_head_deadline()
    except ImportError:  # httptools is optional (uvicorn[standard] on CPython installs it)
        base = H11WithHeadDeadline
    attributes: dict[str, Any] = {"head_timeout_s": head_timeout_s}
    return type(base.__name__, (base,), attributes)


def _httptools_with_head_deadline() -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HttpToolsWithHeadDeadline(_HeadDeadline, HttpToolsProtocol):
        """httptools: its parser says when a request begins and when its head is complete."""

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm_head_deadline()

        def on_headers_complete(self) -> None:
            self._disarm_head_deadline()
            super().on_headers_complete()

    return HttpToolsWithHeadDeadline
