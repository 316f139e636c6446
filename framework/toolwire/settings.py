"""The sections of ``config/toolwire.yaml`` that configure run time (LLM, orchestrator, sessions,
server). ``toolwire.config`` composes them into the application's configuration model; each
section is owned by the module that uses it and documented field by field."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolwire.task import MAX_TASK_DEPTH

LEAST_HISTORY_TOKENS = 256
"""The smallest ``sessions.history_tokens``: room for a turn or two of a conversation."""


class Section(BaseModel):
    """A configuration section: unknown keys are errors, so a typo never passes silently."""

    model_config = ConfigDict(extra="forbid")

    removed_keys: ClassVar[dict[str, str]] = {}
    """Keys this section had once → what to write instead: such a key is an error that says so."""


ENV_BASE_URL = "TOOLWIRE_LLM_BASE_URL"
"""Overrides ``llm.base_url``."""
ENV_MODEL = "TOOLWIRE_LLM_MODEL"
"""Overrides ``llm.model``."""


def base_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be ``llm.base_url`` (None: it can). An HTTP client reads
    ``localhost:8080`` as a relative path, not a server: without this check it passes ``toolwire
    check`` and the first question fails, "cannot connect to the model server at
    localhost:8080/". The URL itself is not repeated: it may carry a password."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (parsing the port is the check)
    except ValueError as error:  # an unclosed IPv6 bracket, a port out of range
        return f"is not a URL ({error}); write the server's URL, e.g. http://localhost:8080/v1"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (
            "needs an http:// or https:// scheme and a host: write the server's whole URL, "
            "e.g. http://localhost:8080/v1"
        )
    return None


def _in_the_profile(example: str) -> str:
    return (
        f"it is a trait of the model's profile now: set it in llm.profile, e.g. {example} "
        "(docs/models.md, 'Model profiles')"
    )


class LLMSettings(Section):
    """How toolwire reaches a language model (environment variables override the file). What
    differs between model families, not users, is in the model's profile (``profile``)."""

    removed_keys: ClassVar[dict[str, str]] = {
        "structured_output": _in_the_profile("{base: general, structured_output: tools}"),
        "suitability_examples": _in_the_profile("{base: embedded, worked_examples: false}"),
        "max_completion_tokens": _in_the_profile(
            "{base: general, completion_limits: {answer: 2048}}"
        ),
        "completion_limit_field": _in_the_profile(
            "{base: general, completion_limit_field: max_completion_tokens}"
        ),
        "context_window_tokens": _in_the_profile("{base: general, context_window_tokens: 32768}"),
        "prompt_layout": "remove it: every call has the shared-prefix layout",
        "compression_threshold": "it is fixed (toolwire.llm.compression.COMPRESSION_THRESHOLD)",
    }

    provider: str | None = None
    """The model provider: ``openai`` (any OpenAI-compatible server), ``embedded`` (the local
    model), or one a plugin registers with ``register_models``. None: ``openai`` when a base URL
    or an API key is set, else ``embedded``."""
    base_url: str | None = None
    """An OpenAI-compatible endpoint, an http or https URL with a host
    (``http://localhost:8080/v1``); ``TOOLWIRE_LLM_BASE_URL``. None and no API key: the embedded
    local model."""
    model: str | None = None
    """``TOOLWIRE_LLM_MODEL``; defaults to the embedded model's name when it is used."""
    profile: str | dict[str, Any] | None = None
    """The model's profile (``toolwire.llm.profiles``): a registered name (``general``,
    ``embedded``, or one a plugin registers with ``register_model_profiles``), or a mapping
    ``{base: <name>, <trait>: <value>, ...}`` that changes some of its traits (no ``base``: the
    profile the model would get). None: the first profile whose ``models`` patterns match the
    model (the embedded model's name, else ``model``), else ``general``."""
    api_key_env: str = "OPENAI_API_KEY"
    """Name of the environment variable holding the API key (never the key itself)."""
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    temperature: float = Field(default=0.0, ge=0, le=2)
    local_model: str = "qwen2.5-coder-1.5b"
    """The embedded model (no ``base_url``, no API key): ``qwen2.5-coder-1.5b`` (the ``local``
    extra, about 2.1 GB of memory) or ``qwen2.5-coder-0.5b`` (``local-small``, about 0.9 GB)."""
    local_threads: int | None = Field(default=None, gt=0)
    """CPU threads of the embedded model's server; None: every core this process may use."""
    local_prompt_cache_mib: int = Field(default=512, ge=0)
    """RAM the embedded server may keep earlier prompts' KV state in, for reuse by later calls."""
    max_part_tokens: int | None = Field(default=None, gt=0)
    """Most tokens one retrieved part (a tool's result, an MCP tool's result, a page) may take in
    a prompt; a longer part is cut there, with a marker, and the cut is a ``context_cut`` notice
    of the answer (the tool's whole result is kept). None: half of the model profile's
    ``context_window_tokens``; less than it."""

    @field_validator("base_url")
    @classmethod
    def _base_url_is_a_server(cls, value: str | None) -> str | None:
        """Refused when the file is read, at its line (the environment variable's value is
        checked when the app loads: ``toolwire.app``)."""
        if value is not None and (problem := base_url_problem(value)) is not None:
            raise ValueError(problem)
        return value


class SelectionSettings(Section):
    """How the model decides which tools suit a task (SPEC §3 step 5; docs/models.md)."""

    removed_keys: ClassVar[dict[str, str]] = {
        key: "list the selection steps in orchestrator.selection.steps instead "
        "(docs/models.md, 'Choosing the selection steps')"
        for key in (
            "mode",
            "choice",
            "parameters_from_choice",
            "confirm",
            "several_requests",
            "action_check",
            "decisive_ratio",
            "decisive_words",
        )
    }

    steps: list[str] | None = None
    """The selection steps, in order, by registered name (``retrieve``, ``choose``, ``call``,
    ``confirm``, ``decisive_words``, the English pack's ``english.several_requests`` and
    ``english.leading_action``, and any a plugin registers). None: the model profile's. A list
    with no step that puts candidates (``retrieve``), the empty list included, is a
    ``ConfigError``: the other steps work on the candidates, so it would select nothing."""
    top_k: int = Field(default=8, ge=1)
    """How many candidates ``retrieve`` puts to the model (a smaller domain: all its tools)."""


class RoutingSettings(Section):
    """Which domain a message goes to when the caller names none (several domains installed)."""

    removed_keys: ClassVar[dict[str, str]] = {
        "decisive_ratio": "it is fixed (toolwire.selection.routing.DECISIVE_RATIO)",
        "decisive_words": "it is fixed (toolwire.selection.routing.DECISIVE_WORDS)",
    }

    enabled: bool = True
    """False: every such message goes to ``default_domain``."""


class OrchestratorSettings(Section):
    """Limits of the per-domain orchestrator."""

    selection: SelectionSettings = Field(default_factory=SelectionSettings)
    routing: RoutingSettings = Field(default_factory=RoutingSettings)

    max_depth: int = Field(default=4, ge=1, le=MAX_TASK_DEPTH)
    """Deepest subtask level processed (the root task is depth 0); at most ``MAX_TASK_DEPTH``,
    the deepest a task tree may nest."""
    deep_search_max_rounds: int = Field(default=3, ge=1)
    subtask_results: Literal["full", "short"] = "full"
    """What the answer reads of each subtask: ``full``, every context its tools returned;
    ``short``, those contexts compressed into one part aware of the subtask's prompt (one model
    call per subtask; :mod:`toolwire.orchestrator.isolation`). docs/orchestrator.md says how the
    default was chosen."""
    max_clarification_rounds: int = Field(default=5, ge=0)
    """Clarifying questions one message may ask the user before its answer (each waits for a
    reply: one round; the next message of the conversation starts counting again). A tool that
    asks beyond them is not passed on: its run is closed as ``skipped``, the rest of the
    question runs and the answer is made from what the tools found, with a
    ``clarification_limit`` notice saying so. 0: no question is ever asked."""
    model_attempts: int = Field(default=1, ge=1)
    """Attempts the orchestrator makes per model call (on ``ModelError`` or invalid output) before
    it records the failure in the trace and carries on without that call's result. 1: the model
    layer already retries transient failures and feeds invalid output back once, and the same
    request at temperature 0 gives the same output."""
    question_budget_s: float | None = Field(default=180.0, gt=0)
    """Seconds one question (one round) may spend on model calls in all: every call draws from
    it, retries included, and the answer keeps the last quarter. None: only ``llm.timeout_s``
    per call. When serving, ``server.request_timeout_s`` bounds it too."""
    tool_threads: int = Field(default=8, ge=1)
    """Threads for tools' and coordinators' plain (blocking) methods, apart from the threads the
    session store and the server use; calls beyond it wait for a free thread."""
    tool_timeout_s: float | None = Field(default=600.0, gt=0)
    """Longest a tool's or coordinator's method may run (waiting for a thread included); then
    it is recorded as failed and the question goes on. The default leaves room for tools that
    call the embedded model on a slow CPU; behind the server, set it below
    ``server.request_timeout_s``, so a stuck tool costs a recorded failure, not the request.
    None: no limit."""


class SessionSettings(Section):
    """Where conversations wait between their turns, and how much of them is kept."""

    store: str = "sqlite"
    """``sqlite`` (a file, ``path``), ``memory`` (this process only), ``redis`` (``redis_url``,
    shared by replicas), or a store a plugin registered (``register_session_stores``)."""
    path: str = ".toolwire/sessions.sqlite3"
    """SQLite file, relative to the working directory."""
    redis_url: str = "redis://127.0.0.1:6379/0"
    ttl_s: int = Field(default=86_400, gt=0)
    """How long a conversation nobody continues is kept (renewed by each turn)."""
    max_turns: int = Field(default=50, ge=1)
    """Turns a conversation keeps: past it the oldest are forgotten (their numbers are not
    reused). Compression (``history_tokens``) may replace turns by a summary before then."""
    history_tokens: int = Field(default=2048, ge=LEAST_HISTORY_TOKENS)
    """How many tokens of earlier turns a turn's follow-up rewrite and answer may read (its
    other calls read none): past it the old turns are compressed once into a summary, and the
    oldest summaries forgotten (the embedded model's window is 8,192)."""
    max_bytes: int = Field(default=262_144, ge=4096)
    """The most a conversation takes in the store: the oldest turns' tool findings go first,
    then the oldest turns; a task waiting for a reply is always kept."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Settings of a store a plugin registered (its factory reads and checks them)."""


class ApiKeySettings(Section):
    """One API key of the HTTP service: a name (logged, and bound to the conversations the key
    starts) and the environment variable holding the token (never the token itself)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    token_env: str = Field(min_length=1)


_HOST_VALUE = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::(?:\d{1,5}|\*))?"
)
"""A ``Host`` header value (a name, an IPv4 or a bracketed IPv6 address, and an optional port),
or one with ``:*`` for any port: the forms of ``server.mcp_allowed_hosts``."""


class ServerSettings(Section):
    """The HTTP service (``toolwire serve``)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    token_env: str = "TOOLWIRE_API_TOKEN"
    """Environment variable holding the bearer token of the key named ``default``; unset means no
    such key (and no authentication unless ``api_keys`` name others)."""
    api_keys: list[ApiKeySettings] = Field(default_factory=list)
    """Further named keys (one per tenant or client); each variable must be set."""
    max_body_bytes: int = Field(default=65_536, gt=0)
    max_message_chars: int = Field(default=8_000, gt=0)
    request_timeout_s: float = Field(default=120.0, gt=0)
    """Longest a question (``POST /v1/ask``, streamed or not, and the MCP ``<domain>.ask`` tool)
    runs: then it is cancelled, nothing is stored for its round, and the answer is 504 ``timeout``
    (over MCP an error result saying so). Its model calls end within 95 % of it."""
    header_timeout_s: float = Field(default=10.0, gt=0)
    """A connection whose request line and headers are not in this long after it opened (or
    after the request's first byte) is closed."""
    max_header_bytes: int = Field(default=32_768, ge=1_024)
    """A request line and headers longer than this get 431 and the connection is closed."""
    body_timeout_s: float = Field(default=10.0, gt=0)
    """A request whose body is not in this long after its headers gets 408 and is closed (a
    body is at most ``max_body_bytes``: 64 kB take well under a second on any working link)."""
    keep_alive_s: int = Field(default=75, gt=0)
    """An idle connection between requests is closed after this long: longer than a load
    balancer's idle timeout (60 s on AWS's ALB, nginx's ``keepalive_timeout``), so that the
    balancer, not the server, closes a connection it keeps for reuse (else it may send a request
    on a connection the server is closing, and its client gets a 502)."""
    max_connections: int = Field(default=1_000, gt=0)
    """Open connections (and requests in flight) beyond this get 503 straight away."""
    max_concurrent_questions: int = Field(default=8, gt=0)
    """Questions (``POST /v1/ask``, streamed or not, and the MCP ``<domain>.ask`` tool) answered at
    once by this process; one more gets 503 ``busy`` with ``Retry-After`` (over MCP an error
    result saying so) straight away instead of waiting in a queue."""
    sse_keep_alive_s: float = Field(default=15.0, gt=0)
    """A streamed answer silent this long (the model thinking) gets a keep-alive comment, so
    that proxies in front of the server do not close the connection."""
    expose_error_details: bool = False
    """Show callers the text of internal errors (secret shapes still masked) instead of a generic
    reason and an error id: only for a deployment whose callers are trusted."""
    api_docs: bool = False
    """Serve the interactive API pages ``/docs`` (Swagger UI) and ``/redoc``. They load their
    scripts and styles from a CDN, so they need the internet and are off by default;
    ``/openapi.json`` describes the API either way."""
    mcp_allowed_hosts: list[str] = Field(default_factory=list)
    """``toolwire mcp serve --http`` on a loopback address (where the MCP SDK's DNS-rebinding
    protection accepts only ``Host: 127.0.0.1:*``, ``localhost:*`` and ``[::1]:*``): further
    ``Host`` values to accept, each exact (``mcp.example.com``, ``mcp.example.com:8443``) or
    with any port (``mcp.example.com:*``), as a proxy on the same host that keeps the client's
    ``Host`` sends them; an ``Origin`` of the same host (``http://`` or ``https://``) is
    accepted too. Any other ``Host`` gets 421. On another address no ``Host`` is checked."""

    @field_validator("mcp_allowed_hosts")
    @classmethod
    def _host_values(cls, hosts: list[str]) -> list[str]:
        for host in hosts:
            if not _HOST_VALUE.fullmatch(host):
                raise ValueError(
                    f"{host!r} is not a Host header value: write a host name or address, with "
                    "a port or ':*' for any port (mcp.example.com, mcp.example.com:*, "
                    "[::1]:8443), without a scheme or a path"
                )
        return hosts
