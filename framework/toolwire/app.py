"""The facade: ``App.load()`` builds everything once; questions only walk the orchestrator.

Build order: plugins → configuration → registry → container (every singleton built now) → one
orchestrator per domain (so a mistake only an orchestrator would meet fails ``App.load`` and
``toolwire check``, not the first question). The language model and the session store are
created on first use, so listing tools or checking a configuration never starts a model; nothing
on the per-question path reads configuration files or discovers plugins.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from toolwire.build import build
from toolwire.config import AppConfig, parse_app_config
from toolwire.container import ToolContainer
from toolwire.errors import PLUGIN_FAILURES, ConfigError, Problem, UnknownDomainError
from toolwire.llm.base import LanguageModel
from toolwire.logging import configure_logging
from toolwire.mcp.connections import McpConnections
from toolwire.mcp.discovery import McpDiscovery, McpListing, discover_mcp_tools
from toolwire.plugins import (
    ModelProfileRegistration,
    ModelProvider,
    PluginInfo,
    PluginSet,
    SelectionStepProvider,
    SessionStoreProvider,
    built_by,
    discover,
)
from toolwire.registry import DomainSpec, ToolRegistry
from toolwire.sessions import SessionStore
from toolwire.settings import ENV_BASE_URL, base_url_problem
from toolwire.telemetry import observers_from_environment
from toolwire.tool_threads import PluginRunner
from toolwire.tools import ChatbotTool

if TYPE_CHECKING:
    from toolwire.events import Event, Observer
    from toolwire.llm.profiles import ModelProfile
    from toolwire.orchestrator import Answer, ConversationService, DomainOrchestrator
    from toolwire.orchestrator.streaming import Answered
    from toolwire.selection.state import SelectionStep


class App:
    """A built toolwire application: plugins, configuration, registry and tool singletons."""

    def __init__(
        self,
        *,
        config: AppConfig,
        registry: ToolRegistry,
        domains: dict[str, DomainSpec],
        plugins: list[PluginInfo],
        llm: LanguageModel | None = None,
        session_store: SessionStore | None = None,
        mcp: McpConnections | None = None,
        mcp_discovery: McpDiscovery | None = None,
        model_providers: Mapping[str, ModelProvider] | None = None,
        session_stores: Mapping[str, SessionStoreProvider] | None = None,
        orchestrator_classes: Mapping[str, type[DomainOrchestrator]] | None = None,
        selection_steps: Mapping[str, SelectionStepProvider] | None = None,
        model_profiles: Mapping[str, ModelProfileRegistration] | None = None,
    ) -> None:
        """Use :meth:`load`; this builds the container (every tool singleton) from the registry."""
        self.config = config
        self.model_providers = model_providers
        """Provider name → model provider, as the plugins registered them (``register_models``;
        None: only the built-in ones)."""
        self.session_stores = session_stores
        """Store name → session store, as the plugins registered them
        (``register_session_stores``; None: only the built-in ones)."""
        self.selection_steps = selection_steps
        self.model_profiles = model_profiles
        """Profile name → model profile, as the plugins registered them
        (``register_model_profiles``; None: only the built-in ones)."""
        self._model_profile: ModelProfile | None = None
        """Step name → selection step, as the plugins registered them
        (``register_selection_steps``; None: only the built-in ones)."""
        self.orchestrator_classes = dict(orchestrator_classes or {})
        """Domain name → the orchestrator class the domain names (``orchestrator:``); the others
        get ``DomainOrchestrator``."""
        self.registry = registry
        self.domains = domains
        self.plugins = plugins
        """Every plugin found, including the ones that failed (``error`` set)."""
        self.mcp = mcp if mcp is not None else McpConnections()
        """The connections to the declared MCP servers (opened by the first call of a tool)."""
        self.mcp_discovery = mcp_discovery or McpDiscovery()
        """What the ``mcp_servers:`` declarations gave: tools, and ``problems`` (a server that
        did not start is one; its tools are missing and the rest of the app works)."""
        self._llm = llm
        self._owns_llm = llm is None
        self._session_store = session_store
        self._owns_session_store = session_store is None
        self._conversations: ConversationService | None = None
        self._observers: list[Callable[[], Observer]] = []
        model: object = llm if llm is not None else _DeferredLanguageModel(self)
        self.container = ToolContainer.build(registry, _services(model, self.mcp))
        self.plugin_runner = PluginRunner.of(config.orchestrator)
        """Runs the tools' methods (the tool threads), for every domain and the MCP server."""
        self.orchestrators = _build_orchestrators(self, model)
        """Domain name → its orchestrator, built with the app."""

    @classmethod
    def load(
        cls,
        config_path: str | os.PathLike[str] | None = None,
        *,
        llm: LanguageModel | None = None,
        session_store: SessionStore | None = None,
        plugins: Sequence[object] = (),
        load_entry_points: bool = True,
        mcp_listing: McpListing = McpListing.NEEDED,
    ) -> App:
        """Build the app. Configuration: ``config_path``, else ``$TOOLWIRE_CONFIG``, else
        ``./config/toolwire.yaml`` (a missing default file means the built-in defaults).

        Raises ``PluginError`` for a hook implementation that matches no hook, ``ConfigError``
        listing every configuration problem (plugins that failed to load first), ``WiringError``
        listing every wiring problem.
        A plugin that fails to import or raises in a hook is left out and reported in
        ``app.plugins``; an MCP server that cannot be listed is left out and reported in
        ``app.mcp_discovery.problems``. A declared MCP server is started once to list its tools
        unless its YAML declares them (``mcp_listing``: see ``toolwire.mcp.discovery``).
        """
        configure_logging()
        plugin_set = discover(plugins, load_entry_points=load_entry_points)
        config, problems = parse_app_config(config_path)
        connections = McpConnections(config.mcp_servers)
        mcp_tools = discover_mcp_tools(config, connections, mcp_listing)
        mcp_tools.refuse_taken(plugin_set, config)  # a name a plugin has: that tool left out
        plugin_set = dataclasses.replace(plugin_set, tools=plugin_set.tools + mcp_tools.tools)
        problems = [
            *problems,
            *_registered_name_problems(
                config, plugin_set, store_given=session_store is not None, llm_given=llm is not None
            ),
        ]
        try:
            built = build(plugin_set, config, problems, _wiring_problems)
            app = cls(
                config=config,
                registry=built.registry,
                domains=built.domains,
                plugins=plugin_set.plugins,
                llm=llm,
                session_store=session_store,
                mcp=connections,
                mcp_discovery=mcp_tools,
                model_providers=plugin_set.models,
                session_stores=plugin_set.session_stores,
                orchestrator_classes=built.orchestrators,
                selection_steps=plugin_set.selection_steps,
                model_profiles=plugin_set.model_profiles,
            )
        except BaseException as error:  # a selection step's factory, say: stop the servers
            if isinstance(error, ConfigError):  # a failed plugin or MCP server is the likely cause
                causes = [info.problem() for info in plugin_set.failed] + mcp_tools.problems
                error.add_causes(causes)
            connections.close()
            raise
        for observer in observers_from_environment():  # OpenTelemetry, when OTEL_* ask for it
            app.add_observer(observer)
        return app

    # -- tools ---------------------------------------------------------------------------------

    def tool(self, name: str, domain: str | None = None) -> ChatbotTool[Any]:
        """The singleton of a tool by short or prefixed name (short names: ``domain`` first)."""
        registration = self.registry.resolve(name, domain or self.config.default_domain)
        return self.container.get(registration.qualified_name)

    @property
    def tools(self) -> dict[str, ChatbotTool[Any]]:
        """Prefixed name → singleton, for every enabled tool."""
        return self.container.instances()

    @property
    def plugin_failures(self) -> list[str]:
        """Why plugins failed to load (``plugin 'shop' failed to load: …``), one per plugin."""
        return [info.problem().message for info in self.plugins if info.error is not None]

    def check_domain(self, name: str) -> None:
        """Raise ``UnknownDomainError`` unless ``name`` is a domain of the app (naming the
        plugins that failed to load, a likely cause)."""
        if name not in self.domains:
            raise UnknownDomainError.named(name, self.domains, self.plugin_failures)

    # -- run time ------------------------------------------------------------------------------

    @property
    def llm(self) -> LanguageModel:
        """The language model: the one passed to ``load``, else created from ``config.llm``."""
        if self._llm is None:
            from toolwire.llm import create_language_model

            self._llm = create_language_model(
                self.config.llm, providers=self.model_providers, profile=self.model_profile
            )
        return self._llm

    async def start_model(self) -> None:
        """Start the model now, so that the first question does not wait for it: a model with a
        ``warm_up()`` coroutine runs it (the embedded one starts its server, or finds a running
        ``toolwire model serve`` one, and has it read toolwire's fixed text); any other (a
        remote server) is left as it is. ``toolwire serve`` and ``toolwire chat`` call it as
        they start; ``toolwire ask`` does not (its one question starts the model on demand)."""
        warm_up = getattr(self.llm, "warm_up", None)
        if callable(warm_up):
            await warm_up()

    @property
    def model_profile(self) -> ModelProfile:
        """The model's profile (``llm.profile``, else the one whose ``models`` patterns match
        the configured model, else ``general``): its traits, and the selection steps it pays
        to run. Resolved without starting the model."""
        if self._model_profile is None:
            from toolwire.llm.factory import model_profile

            self._model_profile = model_profile(self.config.llm, profiles=self.model_profiles)
        return self._model_profile

    @property
    def session_store(self) -> SessionStore:
        """Where conversations wait between turns: the one passed in, else ``config.sessions``."""
        if self._session_store is None:
            from toolwire.sessions import create_session_store

            self._session_store = create_session_store(
                self.config.sessions, stores=self.session_stores
            )
        return self._session_store

    async def ask(
        self,
        message: str,
        domain: str | None = None,
        session_id: str | None = None,
        *,
        caller: str | None = None,
    ) -> Answer:
        """Answer a message; with ``session_id`` (an earlier answer's), as the next turn of that
        conversation: a follow-up, or the reply to its clarifying question.

        ``caller`` (the server passes the API key's name) binds a new conversation to it; only
        the same caller can continue it (another gets ``UnknownSessionError``).
        """
        return await self._conversation_service().ask(message, domain, session_id, caller=caller)

    def ask_stream(
        self,
        message: str,
        domain: str | None = None,
        session_id: str | None = None,
        *,
        caller: str | None = None,
    ) -> AsyncGenerator[Event | Answered, None]:
        """:meth:`ask`, watched as it works: an async iterator of the question's typed events
        (``toolwire.events``: tasks, coordinators, the tools chosen and run, model calls, the
        answer's text as the model produces it) as they happen, then ``Answered`` carrying the
        same ``Answer``. A failure is raised from the iterator as ``ask`` raises it; closing the
        iterator early cancels the question, and a round that did not finish stores nothing.

        ::

            async for event in app.ask_stream("Is ibuprofen safe with warfarin?"):
                if isinstance(event, AnswerDelta):  # toolwire.events
                    print(event.text, end="", flush=True)
        """
        return self._conversation_service().ask_stream(message, domain, session_id, caller=caller)

    async def settle(self) -> None:
        """Wait for what toolwire does between turns to finish: the next turn's prompt warmed
        into the model server's cache (the model profile's ``prefix_warming``). Nothing needs
        to call it; a benchmark or a test that times or counts the next turn's calls does."""
        if self._conversations is not None:
            await self._conversations.settle()

    def add_observer(self, start: Callable[[], Observer]) -> None:
        """Watch every question from now on: ``start()`` makes the observer of one question,
        which gets every step event of it (``toolwire.events``); ``toolwire.telemetry`` traces
        questions this way."""
        self._observers.append(start)
        if self._conversations is not None:
            self._conversations.observers.append(start)

    def _conversation_service(self) -> ConversationService:
        if self._conversations is None:
            if not self.domains:  # said before the model is created: it may be missing too
                raise UnknownDomainError.none_installed(self.plugin_failures)
            from toolwire.orchestrator import ConversationService

            self._conversations = ConversationService(
                registry=self.registry,
                domains=self.domains,
                tools=self.tools,
                llm=self.llm,
                store=self.session_store,
                default_domain=self.config.default_domain,
                settings=self.config.orchestrator,
                orchestrators=self.orchestrators,
                observers=self._observers,
                failed_plugins=self.plugin_failures,
                sessions=self.config.sessions,
            )
        return self._conversations

    @property
    def mcp_problems(self) -> list[Problem]:
        """Why declared MCP servers (or some of their tools) are missing, at their YAML lines."""
        return self.mcp_discovery.problems

    async def aclose(self) -> None:
        """Release the model and the session store this app created (not ones passed in), close
        the connections to MCP servers (stopping the ones started as commands), and end the idle
        tool threads. The app can still answer: what it needs is started again."""
        if self._conversations is not None:
            await self._conversations.aclose()
        await self.mcp.aclose()
        self.plugin_runner.release_threads()
        if self._owns_llm and self._llm is not None:
            await self._llm.aclose()
            self._llm = None
        if self._owns_session_store and self._session_store is not None:
            await self._session_store.aclose()
            self._session_store = None
        self._conversations = None


def _services(model: object, mcp: McpConnections | None) -> dict[type, object]:
    """What the container gives a constructor parameter annotated with its type."""
    return {LanguageModel: model, McpConnections: mcp}


def _wiring_problems(registry: ToolRegistry) -> list[Problem]:
    """The container's wiring problems for ``registry``, nothing built (``build``'s check of the
    injections while the configuration has problems of its own)."""
    return ToolContainer.wiring_problems(registry, _services(None, None))


def _registered_name_problems(
    config: AppConfig, plugin_set: PluginSet, *, store_given: bool = False, llm_given: bool = False
) -> list[Problem]:
    """``llm.provider``, ``llm.profile``, the selection steps and ``sessions.store`` must name
    registered ones, ``llm.local_model`` a model the embedded provider knows when that provider
    serves the questions (the ``openai`` provider a server or a model, when it does), and the
    built-in Redis store needs its extra installed (checked at load, not at the first question;
    ``store_given``, ``llm_given``: the caller passed a store or a model, so the configured one
    is never made and its own settings are not checked)."""
    from toolwire.llm.factory import unknown_provider
    from toolwire.selection.pipeline import unknown_step
    from toolwire.sessions.factory import redis_missing, unknown_store

    problems = _profile_problems(config, plugin_set)
    selection = config.orchestrator.selection
    for index, step in enumerate(selection.steps or ()):
        if step not in plugin_set.selection_steps:
            line = config.line_of("orchestrator", "selection", "steps", index)
            message = unknown_step(step, plugin_set.selection_steps)
            problems.append(Problem(message, config.path, line))
    provider = config.llm.provider
    if provider is not None and provider not in plugin_set.models:
        line = config.line_of("llm", "provider")
        problems.append(Problem(unknown_provider(provider, plugin_set.models), config.path, line))
    elif not llm_given:  # a model passed in serves: the configured one is never made
        problems.extend(_provider_settings_problems(config))
    store = config.sessions.store
    if store not in plugin_set.session_stores:
        line = config.line_of("sessions", "store")
        message = unknown_store(store, plugin_set.session_stores)
        problems.append(Problem(message, config.path, line))
    elif not store_given and (missing := redis_missing(plugin_set.session_stores[store])):
        line = config.line_of("sessions", "store")
        problems.append(Problem(missing, config.path, line))
    return problems


def _provider_settings_problems(config: AppConfig) -> list[Problem]:
    """What the first question would find wrong with the provider that serves it: a
    ``TOOLWIRE_LLM_BASE_URL`` that is no server's URL, unless the embedded provider serves
    (it sends nothing there; the file's ``llm.base_url`` is checked as it is read), the
    ``openai`` provider needs a server or a model, the embedded one a ``local_model`` it
    knows."""
    from toolwire.llm.factory import provider_name, resolve_settings
    from toolwire.llm.providers import EMBEDDED, OPENAI, openai_settings_problem

    settings = resolve_settings(config.llm)
    serving = provider_name(settings, os.environ)
    url = os.environ.get(ENV_BASE_URL)
    if serving != EMBEDDED and url and (problem := base_url_problem(url)) is not None:
        return [Problem(f"{ENV_BASE_URL} (llm.base_url): {problem}")]  # an empty one is unset
    if serving == OPENAI and (problem := openai_settings_problem(settings)) is not None:
        return [Problem(problem, config.path, config.line_of("llm"))]
    if serving == EMBEDDED:
        from toolwire.llm.local import local_model_spec

        try:
            local_model_spec(settings.local_model)
        except ConfigError as error:  # what the first question would say, without the line
            return [Problem(str(error), config.path, config.line_of("llm", "local_model"))]
    return []


def _profile_problems(config: AppConfig, plugin_set: PluginSet) -> list[Problem]:
    """``llm.profile`` must resolve (a registered name, valid traits; located at the key that is
    wrong), ``llm.max_part_tokens`` and ``sessions.history_tokens`` fit its window, and the
    selection steps it names (when ``orchestrator.selection.steps`` names none) be
    registered."""
    from toolwire.llm.factory import profile_order, profiled_model_name, resolve_settings
    from toolwire.llm.profiles import ProfileError, part_limit_problem, resolve_profile
    from toolwire.orchestrator.turn_compression import history_budget_problem

    settings = resolve_settings(config.llm)
    model = profiled_model_name(settings, os.environ)
    try:
        profile = resolve_profile(settings.profile, model, profile_order(plugin_set.model_profiles))
    except ProfileError as error:
        line = config.line_of("llm", "profile", *error.key)
        return [Problem(str(error), config.path, line)]
    problems = []
    if (problem := part_limit_problem(settings.max_part_tokens, profile)) is not None:
        problems.append(Problem(problem, config.path, config.line_of("llm", "max_part_tokens")))
    if (problem := history_budget_problem(config.sessions.history_tokens, profile)) is not None:
        line = config.line_of("sessions", "history_tokens")
        problems.append(Problem(problem, config.path, line))
    if config.orchestrator.selection.steps is None:
        line = config.line_of("llm", "profile")
        for step in profile.selection_steps:
            if step not in plugin_set.selection_steps:
                known = ", ".join(sorted(plugin_set.selection_steps))
                message = (
                    f"llm.profile: the model profile's selection step {step!r} is not "
                    f"registered (registered: {known}); name the steps in "
                    "orchestrator.selection.steps instead"
                )
                problems.append(Problem(message, config.path, line))
    return problems


def _selection_steps(app: App) -> tuple[SelectionStep, ...] | None:
    """The selection steps every domain runs, built from what the plugins registered (None: the
    app was built without them, so the orchestrators use toolwire's own). A factory that raises
    is a ``PluginError`` at its ``register(...)`` line, as a model's or a store's is; a list
    that cannot work is a ``ConfigError`` where it was written (the model profile's list: at
    ``llm.profile``)."""
    if app.selection_steps is None:
        return None
    from toolwire.selection.pipeline import make_steps
    from toolwire.selection.state import SelectionStep

    config = app.config
    settings = config.orchestrator.selection
    factories = {
        name: functools.partial(built_by, step, "selection step", SelectionStep)
        for name, step in app.selection_steps.items()
    }
    key = (
        ("orchestrator", "selection", "steps") if settings.steps is not None else ("llm", "profile")
    )
    return make_steps(
        factories,
        settings,
        app.model_profile.selection_steps,
        path=config.path,
        line=config.line_of(*key) if config.path else None,
    )


def _build_orchestrators(app: App, llm: object) -> dict[str, DomainOrchestrator]:
    """Every domain's orchestrator, or one ``ConfigError`` naming each domain that cannot have
    one (an error the orchestrator would otherwise raise at the domain's first question)."""
    from toolwire.orchestrator import DomainOrchestrator

    built: dict[str, DomainOrchestrator] = {}
    problems: list[Problem] = []
    steps = _selection_steps(app)
    for name, spec in app.domains.items():
        try:
            orchestrator_class = app.orchestrator_classes.get(name, DomainOrchestrator)
            built[name] = orchestrator_class(
                spec,
                app.registry,
                app.tools,
                cast(LanguageModel, llm),
                app.config.orchestrator,
                app.plugin_runner,
                steps,
            )
        except ConfigError as error:
            problems += error.problems
        except PLUGIN_FAILURES as error:  # a plugin's tool broke it: report it, by domain
            problems.append(
                Problem(
                    f"domain {name!r}: its orchestrator cannot be built "
                    f"({type(error).__name__}: {error}); check the domain's tools and their "
                    "priorities"
                )
            )
    if problems:
        raise ConfigError(problems)
    return built


class _DeferredLanguageModel:
    """Stands in for ``app.llm`` in tool constructors, so building the tools starts no model.

    The first attribute a tool uses creates the app's model; every call goes to that one model.
    """

    def __init__(self, app: App) -> None:
        self._app = app

    def __getattr__(self, name: str) -> Any:
        return getattr(self._app.llm, name)
