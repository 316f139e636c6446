"""The dependency-injection container: one dependency-injector Singleton per enabled tool (SPEC §4).

The Singleton providers are kept in a plain dict: ``dependency_injector.containers`` imports its
``wiring`` module, which imports FastAPI when installed, and ``import toolwire`` must stay light.

Wiring is planned before anything is built, from each tool class's ``__init__`` type hints:

1. an explicit YAML injection (``inject: {param: tool_name}``, short or prefixed) wins;
2. a parameter named ``settings`` receives the YAML settings validated by the tool's
   ``settings_model`` (:func:`validated_settings`, the build's check too), and nothing else;
3. a parameter annotated with a service type (``services``, e.g. ``LanguageModel``) receives it;
4. a parameter annotated with a tool class, or a base class a tool derives from, is autowired by
   type among the *enabled* tools, the tool's own domain first;
5. otherwise a parameter with a default keeps it, and one without is unsatisfiable.

Planning collects every problem (unknown or disabled injection target, ambiguity, unsatisfiable
parameter, invalid settings, cycle with its chain) and raises them together as one
:class:`~toolwire.errors.WiringError`; only a clean plan is turned into providers and built,
eagerly, so a constructor that raises is also reported at start rather than mid-conversation,
and so is an activated tool built without the ``execute_with_result`` it runs through
(``toolwire.tools.execute_method_problems``: checked on the instance, so only an enabled tool
needs one, and one that sets it in ``__init__`` has one). When the build stops before building
(a wiring problem, or the configuration's own: :meth:`ToolContainer.wiring_problems`), each
enabled tool's class is checked instead, so that problem is reported with the others; a class
whose ``__init__`` assigns the method is left to its built tool.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog
from dependency_injector import providers
from pydantic import BaseModel, ConfigDict, ValidationError

from toolwire.config import in_file_order, unknown_key_message
from toolwire.errors import (
    PLUGIN_FAILURES,
    Problem,
    ToolNameError,
    UnknownToolError,
    WiringError,
    describe,
)
from toolwire.registry import (
    LeftOutToolError,
    ToolRegistration,
    ToolRegistry,
    format_loc,
    located,
)
from toolwire.tools import ChatbotTool, execute_method_problems

log = structlog.get_logger(__name__)

SETTINGS_PARAMETER = "settings"
"""The constructor parameter that receives a tool's validated YAML settings."""

_FIX_AMBIGUOUS = "name one explicitly in the tool's YAML: inject: {{{param}: <tool name>}}"


@dataclass
class _Plan:
    """How one tool is built: tool dependencies and fixed values, per constructor parameter."""

    registration: ToolRegistration
    tools: dict[str, str] = field(default_factory=dict)
    """Parameter → qualified name of the injected tool."""
    values: dict[str, object] = field(default_factory=dict)
    """Parameter → service object or validated settings."""


class ToolContainer:
    """Every enabled tool as a singleton, built once, plus who is injected into whom."""

    def __init__(
        self,
        singletons: dict[str, providers.Singleton[ChatbotTool[Any]]],
        registrations: dict[str, ToolRegistration],
        graph: dict[str, list[str]],
    ) -> None:
        """Use :meth:`build`; this only keeps what it produced."""
        self._singletons = singletons
        self._registrations = registrations
        self._graph = graph

    @classmethod
    def build(
        cls, registry: ToolRegistry, services: Mapping[type, object] = types.MappingProxyType({})
    ) -> ToolContainer:
        """Plan, check and build every enabled tool; raise one WiringError listing all problems."""
        plans, problems = _checked_plans(registry, services)
        if problems:
            raise WiringError(in_file_order([*problems, *_class_execute_method_problems(registry)]))

        singletons: dict[str, providers.Singleton[ChatbotTool[Any]]] = {
            name: providers.Singleton(
                _construct,
                plan.registration,
                **{param: providers.Object(value) for param, value in plan.values.items()},
            )
            for name, plan in plans.items()
        }
        for name, plan in plans.items():
            singletons[name].add_kwargs(
                **{param: singletons[target] for param, target in plan.tools.items()}
            )
            log.info(
                "tool_wired",
                tool=name,
                injects=list(plan.tools.values()),
                provided=sorted(plan.values),
            )
        built = cls(
            singletons,
            {name: plan.registration for name, plan in plans.items()},
            {name: list(plan.tools.values()) for name, plan in plans.items()},
        )
        built.instantiate_all()
        return built

    @staticmethod
    def wiring_problems(
        registry: ToolRegistry, services: Mapping[type, object] = types.MappingProxyType({})
    ) -> list[Problem]:
        """The injections' problems :meth:`build` would raise, nothing built and settings left
        out: the wiring of the registry a configuration's valid part gave, reported beside that
        configuration's own problems (which include its settings' problems); and each enabled
        tool's class that has no ``execute_with_result`` it runs through (the check of a built
        tool, made on its class: see :func:`_class_execute_method_problems`)."""
        problems = _checked_plans(registry, services, settings=False)[1]
        return [*problems, *_class_execute_method_problems(registry)]

    def get(self, qualified_name: str) -> ChatbotTool[Any]:
        """The singleton of an enabled tool, by its prefixed name."""
        provider = self._singletons.get(qualified_name)
        if provider is None:
            raise UnknownToolError(
                f"no enabled tool {qualified_name!r} in the container; "
                f"enabled tools: {', '.join(self._graph) or '(none)'}",
                name=qualified_name,
                candidates=list(self._graph),
            )
        return provider()

    def instances(self) -> dict[str, ChatbotTool[Any]]:
        """Prefixed name → singleton, for every enabled tool in registry order."""
        return {name: self.get(name) for name in self._graph}

    def graph(self) -> dict[str, list[str]]:
        """Prefixed name → prefixed names of the tools injected into it (parameter order)."""
        return {name: list(targets) for name, targets in self._graph.items()}

    def instantiate_all(self) -> None:
        """Build every singleton now; a constructor that raises, or an activated tool built
        without the ``execute_with_result`` it runs through, becomes a WiringError.

        Every tool is attempted; a tool whose dependency failed is not reported again (its
        dependency's failure is the cause).
        """
        problems: list[Problem] = []
        causes: list[BaseException] = []
        failed: set[str] = set()
        for name in _dependency_order(self._graph):
            if any(target in failed for target in self._graph[name]):
                failed.add(name)
                continue
            try:
                tool = self.get(name)
            except PLUGIN_FAILURES as error:  # any constructor failure (sys.exit() too) is the
                # author's to see, located
                # the cause stays chained to the WiringError; a log line carries no traceback
                log.error("tool_build_failed", tool=name, error=describe(error))
                failed.add(name)
                causes.append(error)
                registration = self._registrations[name]
                problems.append(
                    _problem(
                        registration,
                        f"building tool {name!r} ({_class_path(registration)}) failed: "
                        f"{describe(error)}",
                    )
                )
                continue
            # checked built: one that sets execute_with_result in __init__ has one
            missing = _execute_method_problem(self._registrations[name], tool)
            if missing is not None:
                problems.append(missing)
        if problems:
            raise WiringError(in_file_order(problems)) from (causes[0] if causes else None)

    def reset(self) -> None:
        """Drop every singleton; the next :meth:`get` builds it again (for tests)."""
        for singleton in self._singletons.values():
            singleton.reset()


def _construct(registration: ToolRegistration, **kwargs: Any) -> ChatbotTool[Any]:
    """Build one tool and bind the identity its registration gives it."""
    instance = registration.tool_class(**kwargs)
    instance.name = registration.short_name
    instance.domain = registration.domain
    instance.priority = registration.priority
    if registration.own_event_loop is not None:
        instance.own_event_loop = registration.own_event_loop
    return instance


def _checked_plans(
    registry: ToolRegistry, services: Mapping[type, object], *, settings: bool = True
) -> tuple[dict[str, _Plan], list[Problem]]:
    planner = _Planner(registry, services, settings=settings)
    plans = planner.plan()
    return plans, planner.problems + _cycle_problems(plans)


class _Planner:
    """Decides, for every constructor parameter of every enabled tool, what it receives."""

    def __init__(
        self, registry: ToolRegistry, services: Mapping[type, object], *, settings: bool = True
    ) -> None:
        self.registry = registry
        self.services = services
        self.settings = settings
        """Whether settings are validated (False: only the injections are planned)."""
        self.enabled = [reg for reg in registry if reg.enabled]
        self.problems: list[Problem] = []
        self._by_type: dict[type, list[ToolRegistration]] = {}

    def plan(self) -> dict[str, _Plan]:
        return {reg.qualified_name: self._plan_tool(reg) for reg in self.enabled}

    def _plan_tool(self, registration: ToolRegistration) -> _Plan:
        plan = _Plan(registration)
        tool_class = registration.tool_class
        try:
            hints = typing.get_type_hints(tool_class.__init__)
        except Exception as error:  # NameError/TypeError from an unresolvable annotation
            self._fail(
                registration,
                f"cannot read the constructor type hints of {_class_path(registration)}: "
                f"{type(error).__name__}: {error}; make every annotation importable from the "
                "class's module",
            )
            return plan
        parameters = _constructor_parameters(tool_class)
        for unknown in sorted(set(registration.injections) - set(parameters)):
            self._fail(
                registration,
                f"inject names parameter {unknown!r}, but {_class_path(registration)}.__init__ "
                f"has no such parameter (it has: {', '.join(parameters) or 'none'})",
            )
        if self.settings and registration.settings and SETTINGS_PARAMETER not in parameters:
            self._fail(
                registration,
                f"settings are given, but {_class_path(registration)}.__init__ takes no "
                "'settings' parameter, so they would be ignored; accept settings: "
                "<YourSettingsModel> or remove them",
            )
        for name, parameter in parameters.items():
            self._plan_parameter(plan, parameter, hints.get(name, inspect.Parameter.empty))
        return plan

    def _plan_parameter(
        self, plan: _Plan, parameter: inspect.Parameter, annotation: object
    ) -> None:
        registration = plan.registration
        name = parameter.name
        has_default = parameter.default is not inspect.Parameter.empty
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY and not has_default:
            self._fail(
                registration,
                f"parameter {name!r} of {_class_path(registration)}.__init__ is positional-only; "
                "the container passes arguments by name, so make it a regular parameter",
            )
            return
        if name in registration.injections:
            target = self._explicit(registration, name, annotation)
            if target is not None:
                plan.tools[name] = target
            return
        if name == SETTINGS_PARAMETER and not self.settings:
            return
        wanted = _unwrap_optional(annotation)
        if name == SETTINGS_PARAMETER:
            settings_model = registration.tool_class.settings_model
            if settings_model is not None:
                self._plan_settings(plan, settings_model)
                return
            if registration.settings:
                self._fail(
                    registration,
                    f"settings are given, but {_class_path(registration)} declares no "
                    "settings_model to validate them; set settings_model = <YourSettingsModel>",
                )
                return
            if isinstance(wanted, type) and issubclass(wanted, BaseModel) and not has_default:
                model_name = wanted.__qualname__
                self._fail(
                    registration,
                    f"parameter 'settings: {model_name}' of {_class_path(registration)}.__init__ "
                    "receives settings only from the class's settings_model, and it declares "
                    f"none; set settings_model = {model_name}",
                )
                return
        services = self._matching_services(wanted)
        if len(services) == 1:
            plan.values[name] = self.services[services[0]]
            return
        if services:
            names = ", ".join(sorted(key.__qualname__ for key in services))
            self._fail(
                registration,
                f"parameter {name!r} of {_class_path(registration)}.__init__ matches several "
                f"services ({names}); annotate it with the exact service type",
            )
            return
        of_type = [reg for reg in self._tools_of_type(wanted) if reg is not registration]
        if of_type:
            target = self._autowire(registration, name, wanted, of_type, has_default)
            if target is not None:
                plan.tools[name] = target
            return
        if has_default:
            return
        left_out = self.registry.left_out_of_class(wanted)
        if left_out is not None:
            self._fail(
                registration,
                f"parameter {_describe(name, annotation)} of {_class_path(registration)}.__init__ "
                f"cannot be satisfied: {left_out.reason()}",
                follow_on=True,
            )
            return
        self._fail(
            registration,
            f"parameter {_describe(name, annotation)} of {_class_path(registration)}.__init__ "
            "cannot be satisfied: no enabled tool and no service matches it; register a tool of "
            "that type, pass the service to App.load, name a tool with inject: "
            f"{{{name}: <tool name>}}, or give the parameter a default",
        )

    def _explicit(
        self, registration: ToolRegistration, param: str, annotation: object
    ) -> str | None:
        wanted = registration.injections[param]
        try:
            target = self.registry.resolve(wanted, domain=registration.domain)
        except ToolNameError as error:
            self._fail(
                registration,
                f"inject {param}: {wanted!r}: {error}",
                follow_on=isinstance(error, LeftOutToolError),
            )
            return None
        if not target.enabled:
            self._fail(
                registration,
                f"inject {param}: {wanted!r} names {target.qualified_name!r}, which is disabled; "
                "enable it or inject another tool",
            )
            return None
        expected = _unwrap_optional(annotation)
        if _definitely_not_a(target.tool_class, expected):
            self._fail(
                registration,
                f"inject {param}: {wanted!r} names {target.qualified_name!r} "
                f"({_class_path(target)}), which is not a {_type_name(expected)} as "
                f"{_class_path(registration)}.__init__ requires",
            )
            return None
        return target.qualified_name

    def _plan_settings(self, plan: _Plan, model: type[BaseModel]) -> None:
        registration = plan.registration
        try:
            plan.values[SETTINGS_PARAMETER] = validated_settings(model, registration.settings)
        except ValidationError as error:
            for loc, message in settings_problems(model, error):
                self._fail(
                    registration,
                    f"settings of {registration.qualified_name!r} ({model.__qualname__}): "
                    f"{format_loc(loc) or '(settings)'}: {message}",
                )

    def _matching_services(self, wanted: object) -> list[type]:
        """Service types that satisfy ``wanted``: the very type, else its subclasses."""
        exact = [key for key in self.services if key is wanted]
        return exact or [key for key in self.services if _is_subclass(key, wanted)]

    def _tools_of_type(self, wanted: object) -> list[ToolRegistration]:
        """Registered tools (enabled or not) whose class is ``wanted`` or derives from it.

        Every real subclass has ``wanted`` in its MRO, so an index of the registered classes' MROs
        answers in constant time; only a type no MRO contains (a protocol, an ABC with virtually
        registered classes) falls back to ``issubclass`` over all tools, cached per annotation.
        """
        if not isinstance(wanted, type) or wanted is object:
            return []
        if not self._by_type:
            for reg in self.registry:
                for klass in reg.tool_class.__mro__:
                    self._by_type.setdefault(klass, []).append(reg)
        if wanted not in self._by_type:
            self._by_type[wanted] = [
                reg for reg in self.registry if _is_subclass(reg.tool_class, wanted)
            ]
        return self._by_type[wanted]

    def _autowire(
        self,
        registration: ToolRegistration,
        param: str,
        wanted: object,
        of_type: list[ToolRegistration],
        has_default: bool,
    ) -> str | None:
        """The one enabled tool of ``of_type``, own domain first; report why there is none."""
        enabled = [reg for reg in of_type if reg.enabled]
        local = [reg for reg in enabled if reg.domain == registration.domain]
        candidates = local or enabled
        if len(candidates) == 1:
            return candidates[0].qualified_name
        if candidates:
            names = ", ".join(reg.qualified_name for reg in candidates)
            self._fail(
                registration,
                f"parameter {param!r} of {_class_path(registration)}.__init__ "
                f"({_type_name(wanted)}) matches several tools: {names}; "
                + _FIX_AMBIGUOUS.format(param=param),
            )
            return None
        disabled = [reg.qualified_name for reg in of_type if not reg.enabled]
        if disabled and not has_default:
            self._fail(
                registration,
                f"parameter {param!r} of {_class_path(registration)}.__init__ "
                f"({_type_name(wanted)}) needs {', '.join(disabled)}, which is disabled; "
                "enable it, inject another tool, or give the parameter a default",
            )
        return None

    def _fail(
        self, registration: ToolRegistration, message: str, *, follow_on: bool = False
    ) -> None:
        """A problem of ``registration``; ``follow_on``: it follows from a tool left out for
        problems of its own (listed after them: ``toolwire.registry.FollowOnProblem``)."""
        self.problems.append(_problem(registration, message, follow_on=follow_on))


def _constructor_parameters(tool_class: type[ChatbotTool[Any]]) -> dict[str, inspect.Parameter]:
    """The named parameters of ``__init__`` (no ``self``, no ``*args``/``**kwargs``)."""
    if tool_class.__init__ is object.__init__:
        return {}
    signature = inspect.signature(tool_class.__init__)
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    parameters = list(signature.parameters.values())[1:]
    return {p.name: p for p in parameters if p.kind not in variadic}


def validated_settings(model: type[BaseModel], settings: Mapping[str, Any]) -> BaseModel:
    """A tool's YAML ``settings`` as its ``settings_model``; ``ValidationError`` (see
    :func:`settings_problems`) for a wrong value or a key the model does not read.

    The one check of a tool's settings, the build's (which locates each problem at its YAML
    line) and the container's. :func:`strict_settings_model` decides, and the instance is then
    made of ``model`` itself: an instance of the stricter subclass would not equal, nor pickle
    as, one the tool's author makes."""
    strict_settings_model(model).model_validate(settings)
    return model.model_validate(settings)


@functools.cache
def strict_settings_model(model: type[BaseModel]) -> type[BaseModel]:
    """``model``, refusing the keys it does not take. pydantic's default drops them silently, so a
    misspelt key would leave its setting at the default unnoticed; what counts as a key (a field
    name, an alias, a validation alias) is pydantic's own decision. A model that sets ``extra``
    itself (``"allow"``, ``"ignore"`` or ``"forbid"``) decides on its own, and so does a nested
    model for the keys under it."""
    if "extra" in model.model_config:
        return model
    namespace = {"model_config": ConfigDict(extra="forbid"), "__module__": model.__module__}
    strict: type[BaseModel] = type(model.__name__, (model,), namespace)
    return strict


def settings_problems(
    model: type[BaseModel], error: ValidationError
) -> list[tuple[tuple[str | int, ...], str]]:
    """What :func:`validated_settings` refused, as (key path under ``settings``, message): an
    unknown key is said as the configuration loader says one."""
    return [
        (
            tuple(item["loc"]),
            unknown_key_message(model, item["loc"])
            if item["type"] == "extra_forbidden"
            else str(item["msg"]),
        )
        for item in error.errors()
    ]


def _unwrap_optional(annotation: object) -> object:
    """``X | None`` → ``X``; anything else unchanged."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        arguments = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(arguments) == 1:
            return arguments[0]
    return annotation


def _definitely_not_a(candidate: type, expected: object) -> bool:
    """Whether ``candidate`` is known not to satisfy the class ``expected`` (unknown: False)."""
    if not isinstance(expected, type):
        return False
    try:
        return not issubclass(candidate, expected)
    except TypeError:  # a protocol that is not runtime-checkable: trust the explicit choice
        return False


def _type_name(annotation: object) -> str:
    return annotation.__qualname__ if isinstance(annotation, type) else repr(annotation)


def _is_subclass(candidate: type, wanted: object) -> bool:
    if not isinstance(wanted, type) or wanted is object:
        return False
    try:
        return issubclass(candidate, wanted)
    except TypeError:  # e.g. a protocol with data members cannot be checked structurally
        return False


def _cycle_problems(plans: Mapping[str, _Plan]) -> list[Problem]:
    """One problem per dependency cycle, with its chain, reported once however it is entered."""
    problems: list[Problem] = []
    seen_cycles: set[frozenset[str]] = set()
    done: set[str] = set()

    def visit(name: str, stack: list[str]) -> None:
        if name in stack:
            chain = [*stack[stack.index(name) :], name]
            key = frozenset(chain)
            if key not in seen_cycles:
                seen_cycles.add(key)
                problems.append(
                    _problem(
                        plans[name].registration,
                        f"dependency cycle: {' -> '.join(chain)}; remove one of these constructor "
                        "parameters (call that tool through the orchestrator instead)",
                    )
                )
            return
        if name in done:
            return
        stack.append(name)
        for target in plans[name].tools.values():
            visit(target, stack)
        stack.pop()
        done.add(name)

    for name in plans:
        visit(name, [])
    return problems


def _dependency_order(graph: Mapping[str, list[str]]) -> list[str]:
    """Tools with their dependencies first (the graph is known to be acyclic)."""
    order: list[str] = []
    placed: set[str] = set()

    def place(name: str) -> None:
        if name in placed:
            return
        placed.add(name)
        for target in graph[name]:
            place(target)
        order.append(name)

    for name in graph:
        place(name)
    return order


def _execute_method_problem(
    registration: ToolRegistration, tool: ChatbotTool[Any] | type[ChatbotTool[Any]]
) -> Problem | None:
    """The registration's missing ``execute_with_result``, if it lacks one: checked on its
    built ``tool``, or, when nothing is built, on its class (``execute_method_problems`` leaves
    a class whose ``__init__`` assigns the method to its built tool)."""
    missing = execute_method_problems(tool)
    if not missing:
        return None
    return _problem(registration, f"tool class {_class_path(registration)}: {'; '.join(missing)}")


def _class_execute_method_problems(registry: ToolRegistry) -> list[Problem]:
    """:func:`_execute_method_problem` of each enabled tool's class: what
    :meth:`ToolContainer.instantiate_all` would find, when the build stops before it runs."""
    problems = (
        _execute_method_problem(registration, registration.tool_class)
        for registration in registry
        if registration.enabled
    )
    return [problem for problem in problems if problem is not None]


def _problem(registration: ToolRegistration, message: str, *, follow_on: bool = False) -> Problem:
    return located(
        registration.location(), f"{registration.qualified_name}: {message}", follow_on=follow_on
    )


def _class_path(registration: ToolRegistration) -> str:
    tool_class = registration.tool_class
    return f"{tool_class.__module__}.{tool_class.__qualname__}"


def _describe(name: str, annotation: object) -> str:
    if annotation is inspect.Parameter.empty:
        return repr(name)
    return f"'{name}: {_type_name(annotation)}'"


__all__ = ["ToolContainer"]
