"""The FastAPI application: one toolwire ``App`` per process, shared by every request.

Requests run concurrently: nothing serialises questions, because the tools are stateless
singletons, each question's state lives on its own task tree, and the session store's versions
settle two replicas resuming one conversation (the loser gets 409, the stored task is unchanged).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

import structlog
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from toolwire.app import App
from toolwire.catalogue import ToolRecord, tool_records
from toolwire.disclosure import disclosed_answer, new_error_id
from toolwire.errors import PLUGIN_FAILURES, ConfigError, ToolwireError, UnknownSessionError
from toolwire.events import Event, ModelCallFinished, Observer
from toolwire.llm.guard import ModelRequestsBlockedError
from toolwire.orchestrator import Answer
from toolwire.redaction import redact
from toolwire.server.admission import QuestionAdmission
from toolwire.server.api_pages import install_api_pages
from toolwire.server.auth import ApiKey, authenticated_caller, read_api_keys
from toolwire.server.json_bodies import StrictJsonRoute
from toolwire.server.middleware import BodyLimitMiddleware, RequestContextMiddleware
from toolwire.server.problems import ApiError, api_error_for, install_error_handlers
from toolwire.server.questions import (
    ClientGone,
    check_message,
    client_gone,
    question_scope,
    until_the_client_leaves,
    within_request_time,
)
from toolwire.server.schemas import AskRequest, DomainInfo, ErrorBody, Health, ToolInfo
from toolwire.server.streaming import SSE_MEDIA_TYPE, event_stream_response
from toolwire.server.web_page import install_web_page
from toolwire.settings import ServerSettings
from toolwire.tools import ChatbotTool, ToolKind

log = structlog.get_logger(__name__)

READINESS_PROBE_SESSION = "toolwire-readiness-probe"
"""A session id that never exists: loading it proves the store answers."""
READINESS_TIMEOUT_S = 2.0
MODEL_RETRY_FIRST_DELAY_S = 2.0
"""After the model failed to start at startup, its start is tried again this long after the
failure, then after twice as long each time, up to :data:`MODEL_RETRY_MAX_DELAY_S`."""
MODEL_RETRY_MAX_DELAY_S = 600.0
"""At most ten minutes between tries: a model that cannot load (too little memory) is started
again, and its replica kept waiting for it, a few times an hour, not once a minute."""

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing or wrong bearer token."},
    413: {"model": ErrorBody, "description": "Request body larger than server.max_body_bytes."},
    422: {
        "model": ErrorBody,
        "description": "Invalid body (a key named twice too), or message over the length limit.",
    },
}
_ASK_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    400: {"model": ErrorBody, "description": "Unknown domain or tool name."},
    404: {"model": ErrorBody, "description": "No conversation under this session id."},
    409: {
        "model": ErrorBody,
        "description": "Another request applied this round first; the conversation is intact.",
    },
    415: {"model": ErrorBody, "description": "Body sent without Content-Type: application/json."},
    502: {"model": ErrorBody, "description": "The language model failed."},
    503: {
        "model": ErrorBody,
        "description": "The session store is unreachable, or the server is answering "
        "server.max_concurrent_questions already (`busy`, with `Retry-After`).",
    },
    504: {"model": ErrorBody, "description": "Time limit hit; the body names the step."},
}
_ASK_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_ASK_ERRORS,
    200: {
        "description": "The answer; with `stream` (or, without it, `Accept: text/event-stream`), "
        "Server-Sent Events: one per step, `answer_delta` pieces of the text, then `answer` (this "
        "body) or `error` (an error body with its `status`).",
        "content": {SSE_MEDIA_TYPE: {"schema": {"type": "string"}}},
    },
}


@dataclass
class ServerState:
    """What the routes share: the app (built at startup), the settings, the API keys."""

    app: App | None
    settings: ServerSettings | None
    config_path: str | os.PathLike[str] | None = None
    api_keys: list[ApiKey] = field(default_factory=list)
    owns_app: bool = False
    domain_infos: list[DomainInfo] | None = None
    tool_infos: list[ToolInfo] | None = None
    """The catalogue, described on its first request: the app's domains and tools are fixed
    once it is loaded, so it is not rebuilt (dependency graph included) for every request."""
    model_start: asyncio.Task[None] | None = None
    """The model's start at startup (``create_app(start_model=True)``), while it runs."""
    model_retry: asyncio.Task[None] | None = None
    """The model's start tried again in the background after it failed, while it is."""
    model_failure: tuple[str, str] | None = None
    """Why the model's start at startup failed, and the error id it was logged under; cleared
    once a start tried again succeeds, or a model call does (a question started the model on
    demand)."""

    def ready_app(self) -> App:
        if self.app is None:
            raise ApiError(503, "not_ready", "the server is still starting; retry shortly")
        return self.app

    def ready_settings(self) -> ServerSettings:
        return self.settings if self.settings is not None else ServerSettings()


def create_app(
    app: App | None = None,
    settings: ServerSettings | None = None,
    *,
    config_path: str | os.PathLike[str] | None = None,
    api_keys: Sequence[ApiKey] | None = None,
    start_model: bool = False,
) -> FastAPI:
    """The HTTP service for ``app``, or for ``App.load(config_path)`` built at startup.

    ``settings`` default to the app's ``server`` configuration section; ``api_keys`` to the keys
    they name, read from the environment at startup. An app passed in stays the caller's to
    close; one built here is closed at shutdown. ``start_model`` (``toolwire serve``): start and
    warm the model at startup (``App.start_model``) in the background; ``/healthz`` answers
    meanwhile, ``/readyz`` says ``starting`` until the model is up (``unavailable`` if its
    start failed, until a start tried again in the background, with a growing pause, or a
    question's model call succeeds), and a question asked meanwhile waits for it.
    """
    state = ServerState(app=app, settings=settings, config_path=config_path)

    @asynccontextmanager
    async def lifespan(_api: FastAPI) -> AsyncIterator[None]:
        if state.app is None:
            state.app = App.load(state.config_path)
            state.owns_app = True
        if state.settings is None:
            state.settings = state.app.config.server
        state.api_keys = list(api_keys) if api_keys is not None else read_api_keys(state.settings)
        log.info(
            "server_started",
            domains=sorted(state.app.domains),
            tools=len(state.app.registry),
            authentication=bool(state.api_keys),
            api_keys=[key.name for key in state.api_keys],
            session_store=state.app.config.sessions.store,
        )
        if start_model:
            state.model_start = asyncio.create_task(_start_model(state.app, state))
        try:
            yield
        finally:
            for task in (state.model_start, state.model_retry):
                if task is not None:  # stopped while the model starts, or waits to try again
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            if state.owns_app:
                await state.app.aclose()
            log.info("server_stopped")

    api = FastAPI(
        title="toolwire",
        summary="Domain chatbots built out of tools.",
        description=(
            "Ask a question with `POST /v1/ask`. Every answer carries the conversation's "
            "`session_id`: send the next message (a follow-up, or the reply to a clarifying "
            "question) with it to continue the conversation; any replica sharing the session "
            "store can take it, for the API key that started the conversation. The "
            "`/v1` endpoints need `Authorization: Bearer <token>` when the server has API keys."
        ),
        version="1",
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc: install_api_pages, off by default
        redoc_url=None,
    )
    api.state.toolwire = state
    install_error_handlers(api)
    api.add_middleware(
        QuestionAdmission,
        limit=lambda: state.ready_settings().max_concurrent_questions,
        path="/v1/ask",
        request_timeout=lambda: state.ready_settings().request_timeout_s,
    )
    api.add_middleware(  # outside the admission: a body slow to come holds no question's place
        BodyLimitMiddleware,
        limit=lambda: state.ready_settings().max_body_bytes,
        timeout=lambda: state.ready_settings().body_timeout_s,
    )
    api.add_middleware(RequestContextMiddleware)  # added last: outermost, sees every response
    api.include_router(_health_router())
    api.include_router(_api_router())
    install_web_page(api)
    install_api_pages(api, lambda: state.ready_settings().api_docs)
    return api


async def _start_model(app: App, state: ServerState) -> None:
    """Start and warm the model (the lifespan's background task); a failure is logged under an
    error id and makes the server unready, with the id, until the start tried again in the
    background (:func:`_retry_model_start`) or a question's model call succeeds (each question
    starts the model on demand, as it would without ``start_model``)."""
    started = time.perf_counter()
    try:
        await app.start_model()
    except (Exception, ModelRequestsBlockedError) as error:
        reason = str(error) or type(error).__name__
        error_id = new_error_id()
        log.error("model_start_failed", detail=reason, error_id=error_id)
        state.model_failure = (reason, error_id)
        app.add_observer(lambda: _recovery_observer(state))
        state.model_retry = asyncio.create_task(_retry_model_start(app, state))
    else:
        log.info("model_ready", seconds=round(time.perf_counter() - started, 2))
    finally:
        state.model_start = None


async def _retry_model_start(app: App, state: ServerState) -> None:
    """Try the model's start again while its failure is recorded: after
    :data:`MODEL_RETRY_FIRST_DELAY_S`, then twice as long each time up to
    :data:`MODEL_RETRY_MAX_DELAY_S`. An unready replica gets no questions behind a load
    balancer, so none of them would ever start the model on demand; this makes it ready again
    once the model starts (a model server that came up, a file that appeared). Cancelled at
    shutdown."""
    delay = MODEL_RETRY_FIRST_DELAY_S
    attempt = 0
    try:
        while state.model_failure is not None:
            await asyncio.sleep(delay)
            failure = state.model_failure
            if failure is None:  # a question's model call succeeded meanwhile
                return
            attempt += 1
            started = time.perf_counter()
            try:
                await app.start_model()
            except ConfigError as error:  # the install or the configuration: no retry mends it
                log.error("model_start_not_retried", detail=str(error), attempt=attempt)
                return
            except (Exception, ModelRequestsBlockedError) as error:
                delay = min(delay * 2, MODEL_RETRY_MAX_DELAY_S)
                log.warning(
                    "model_start_retry_failed",
                    detail=str(error) or type(error).__name__,
                    attempt=attempt,
                    retry_in_s=delay,
                    failed_start_error_id=failure[1],
                )
                continue
            if state.model_failure is not None:
                state.model_failure = None
                log.info(
                    "model_recovered",
                    failed_start_error_id=failure[1],
                    attempt=attempt,
                    seconds=round(time.perf_counter() - started, 2),
                )
    finally:
        state.model_retry = None


def _recovery_observer(state: ServerState) -> Observer:
    """The observer of one question, after the model failed to start at startup: a model call
    that succeeded means the model runs now, so the failure no longer makes ``/readyz`` 503."""

    def observe(event: Event) -> None:
        failure = state.model_failure
        if failure is not None and isinstance(event, ModelCallFinished) and event.record.ok:
            state.model_failure = None
            log.info("model_recovered", failed_start_error_id=failure[1])

    return observe


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.toolwire
    return state


def _health_router() -> APIRouter:
    """``/healthz`` and ``/readyz``, for ``GET`` and ``HEAD`` (the form many load balancers'
    health checks send; it gets the status and headers without the body)."""
    router = APIRouter(tags=["health"])

    async def healthz() -> Health:
        """The process is alive and serving (no dependency is checked)."""
        return Health(status="ok")

    async def readyz(request: Request) -> Health | JSONResponse:
        """The app is built, its model started (when the server starts it: ``toolwire
        serve``) and the session store answers; a load balancer routes here."""
        state = _state(request)
        if state.app is None:
            return JSONResponse(Health(status="starting").model_dump(), status_code=503)
        if state.model_start is not None:
            starting = Health(status="starting", detail="the model is starting")
            return JSONResponse(starting.model_dump(), status_code=503)
        if state.model_failure is not None:
            reason, error_id = state.model_failure
            detail = f"the model did not start (error id {error_id})"
            if state.ready_settings().expose_error_details:
                detail = f"the model did not start: {redact(reason)}"
            failed = Health(status="unavailable", detail=detail)
            return JSONResponse(failed.model_dump(), status_code=503)
        status, health = await session_store_health(
            state.app, verbose=state.ready_settings().expose_error_details
        )
        return health if status == 200 else JSONResponse(health.model_dump(), status_code=status)

    router.add_api_route("/healthz", healthz, methods=["GET"], response_model=Health)
    router.add_api_route(
        "/readyz",
        readyz,
        methods=["GET"],
        response_model=Health,
        responses={503: {"model": Health}},
    )
    for path, endpoint in (("/healthz", healthz), ("/readyz", readyz)):  # left out of the schema:
        router.add_api_route(  # one operation per path and method, and HEAD is GET's twin
            path, endpoint, methods=["HEAD"], response_model=Health, include_in_schema=False
        )
    return router


async def session_store_health(app: App, *, verbose: bool) -> tuple[int, Health]:
    """Whether ``app``'s session store answers (loading a session that never exists, within
    :data:`READINESS_TIMEOUT_S`): 200 ``ready``, or 503 ``unavailable`` with the reason behind
    an error id (the reason itself, masked, when ``verbose``). ``/readyz`` of both servers."""
    try:
        async with asyncio.timeout(READINESS_TIMEOUT_S):
            await app.session_store.load(READINESS_PROBE_SESSION)
    except UnknownSessionError:
        return 200, Health(status="ready", detail=f"session store: {app.config.sessions.store}")
    except Exception as error:  # any failure of the probe means "not ready", with the reason
        reason = str(error) or type(error).__name__
        error_id = new_error_id()
        log.warning("readiness_failed", detail=reason, error_id=error_id)
        detail = f"session store unreachable (error id {error_id})"
        if verbose:
            detail = f"session store unreachable: {redact(reason)}"
        return 503, Health(status="unavailable", detail=detail)
    return 200, Health(status="ready")


def _api_router() -> APIRouter:
    router = APIRouter(
        prefix="/v1",
        tags=["chat"],
        dependencies=[Depends(authenticated_caller)],
        route_class=StrictJsonRoute,  # a JSON body naming a key twice is a 422
    )

    @router.post("/ask", response_model=Answer, responses=_ASK_RESPONSES)
    async def ask(
        body: AskRequest,
        request: Request,
        caller: Annotated[str | None, Depends(authenticated_caller)],
    ) -> Answer | StreamingResponse:
        """Answer a message, or continue the conversation named by ``session_id`` (only the API
        key that started a conversation can continue it; for any other it does not exist).

        With ``"stream": true``, or ``Accept: text/event-stream`` and no ``stream`` in the body,
        the answer comes as Server-Sent Events: each step as it happens, the answer's text as the
        model writes it, then the same ``Answer`` (docs/server.md, "Streaming")."""
        state = _state(request)
        app, settings = state.ready_app(), state.ready_settings()
        check_message(body.message, settings)
        streamed = (
            body.stream
            if "stream" in body.model_fields_set  # what the body says, the header only without it
            else SSE_MEDIA_TYPE in request.headers.get("accept", "")
        )
        if streamed:
            return event_stream_response(app, body, caller, settings)
        limit = settings.request_timeout_s
        with question_scope(body.session_id, caller, limit) as progress:
            question = app.ask(body.message, body.domain, body.session_id, caller=caller)
            try:
                answer = await within_request_time(
                    until_the_client_leaves(request.receive, question), limit, progress
                )
                return disclosed_answer(answer, verbose=settings.expose_error_details)
            except ToolwireError as error:  # logged here, where the session is scrubbed
                raise api_error_for(error, verbose=settings.expose_error_details) from error
            except ClientGone:
                raise client_gone(progress) from None

    @router.get("/domains", response_model=list[DomainInfo], responses=_ERRORS)
    async def domains(request: Request) -> list[DomainInfo]:
        """The domains this server answers for."""
        state = _state(request)
        if state.domain_infos is None:
            state.domain_infos = _domain_infos(state.ready_app())
        return state.domain_infos

    @router.get("/tools", response_model=list[ToolInfo], responses=_ERRORS)
    async def tools(request: Request) -> list[ToolInfo]:
        """Every registered tool, in registry order."""
        state = _state(request)
        if state.tool_infos is None:
            state.tool_infos = _tool_infos(state.ready_app())
        return state.tool_infos

    return router


def _domain_infos(app: App) -> list[DomainInfo]:
    return [
        DomainInfo(
            name=spec.name,
            description=spec.description,
            plugin=spec.plugin,
            prompt_types=spec.prompt_types,
            tools=[reg.qualified_name for reg in app.registry.in_domain(spec.name)],
            default=spec.name == app.config.default_domain,
        )
        for spec in app.domains.values()
    ]


def _tool_infos(app: App) -> list[ToolInfo]:
    """``toolwire tools --json``'s records (:func:`tool_records`) plus the suitability question."""
    instances = app.tools
    return [
        ToolInfo(**record.model_dump(), instruction=_instruction(instances, record))
        for record in tool_records(app)
    ]


def _instruction(instances: Mapping[str, ChatbotTool[Any]], record: ToolRecord) -> str | None:
    """The suitability question of an enabled, orchestrator-activated tool (None when asking it
    fails: the orchestrator records that on every question; the catalogue stays available)."""
    instance = instances.get(record.qualified_name)
    if instance is None or ToolKind.ACTIVATED not in record.kinds:
        return None
    try:
        return instance.executable_instruction()
    except PLUGIN_FAILURES:
        log.exception("tool_instruction_failed", tool=record.qualified_name)
        return None
