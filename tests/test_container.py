"""The DI container: autowiring, explicit injection, services, settings and build errors."""

from __future__ import annotations

import inspect
import sys
from abc import ABC, abstractmethod
from typing import Any

import pytest
from pydantic import BaseModel
from structlog.testing import capture_logs

from toolwire.container import ToolContainer
from toolwire.errors import UnknownToolError, WiringError
from toolwire.llm.base import LanguageModel
from toolwire.registry import SourceLocation, ToolRegistration, ToolRegistry
from toolwire.tools import ChatbotTool, ToolExecutionResult

YAML = "config/toolwire.yaml"


class Label(BaseModel):
    label: str = ""


class _Tool(ChatbotTool[Label]):
    def executable_instruction(self) -> str:
        return f"{self.name}: always false"

    def execute_with_result(self, params: Label, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context("")


# --- the seed 6.8 pair: one tool calls another's method directly -------------------------------


class SubstanceLookupTool(_Tool):
    def resolve_substance_groups(self, label: str, pages: list[str]) -> list[list[str]]:
        return [[part.strip().lower() for part in label.split("+")], *([page] for page in pages)]


class InteractionAnalysisTool(_Tool):
    def __init__(self, substance_lookup: SubstanceLookupTool) -> None:
        self.substance_lookup = substance_lookup

    def analyze_candidate(self, label: str) -> list[list[str]]:
        return self.substance_lookup.resolve_substance_groups(label, ["leaflet"])


# --- typed collaborators ----------------------------------------------------------------------


class Searcher(ABC):
    """A capability some tools have; a consumer asks for it by this base class."""

    @abstractmethod
    def search(self, query: str) -> str: ...


class WebSearchTool(_Tool, Searcher):
    def search(self, query: str) -> str:
        return f"web:{query}"


class SearchUserTool(_Tool):
    def __init__(self, searcher: Searcher) -> None:
        self.searcher = searcher


class ChainedSearchTool(_Tool, Searcher):
    """A searcher that delegates to another searcher."""

    def __init__(self, searcher: Searcher) -> None:
        self.searcher = searcher

    def search(self, query: str) -> str:
        return self.searcher.search(query)


class OptionalLookupUserTool(_Tool):
    def __init__(self, substance_lookup: SubstanceLookupTool | None = None) -> None:
        self.substance_lookup = substance_lookup


class CycleATool(_Tool):
    def __init__(self, b: CycleBTool) -> None:
        self.b = b


class CycleBTool(_Tool):
    def __init__(self, a: CycleATool) -> None:
        self.a = a


class NeedsNumberTool(_Tool):
    def __init__(self, retries: int) -> None:
        self.retries = retries


class DefaultNumberTool(_Tool):
    def __init__(self, retries: int = 3) -> None:
        self.retries = retries


class Clock:
    def now(self) -> str:
        return "real"


class FixedClock(Clock):
    def now(self) -> str:
        return "fixed"


class OtherClock(Clock):
    pass


class ServiceUserTool(_Tool):
    def __init__(self, llm: LanguageModel, clock: Clock) -> None:
        self.llm = llm
        self.clock = clock


class LimitSettings(BaseModel):
    limit: int
    label: str = "default"


class SettingsTool(_Tool):
    settings_model = LimitSettings

    def __init__(self, settings: LimitSettings) -> None:
        self.settings = settings


class BrokenTool(_Tool):
    def __init__(self) -> None:
        raise RuntimeError("database unreachable")


class ExitingTool(_Tool):
    def __init__(self) -> None:
        sys.exit("no licence key")


class UnprintableError(Exception):
    """An exception whose text cannot be read: its ``__str__`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("no text")


class UnprintableTool(_Tool):
    def __init__(self) -> None:
        raise UnprintableError


class BrokenUserTool(_Tool):
    def __init__(self, broken: BrokenTool) -> None:
        self.broken = broken


# --- helpers ----------------------------------------------------------------------------------


def reg(
    tool_class: type[ChatbotTool[Any]],
    short_name: str,
    domain: str = "pharma",
    *,
    line: int | None = None,
    **fields: Any,
) -> ToolRegistration:
    source = SourceLocation(YAML, line) if line is not None else None
    return ToolRegistration(
        short_name=short_name,
        domain=domain,
        tool_class=tool_class,
        plugin="tests",
        priority=fields.pop("priority", 100),
        source=source,
        **fields,
    )


def registry(*registrations: ToolRegistration) -> ToolRegistry:
    built = ToolRegistry()
    for registration in registrations:
        built.add(registration)
    return built


def wiring_problems(*registrations: ToolRegistration, **kwargs: Any) -> list[str]:
    with pytest.raises(WiringError) as caught:
        ToolContainer.build(registry(*registrations), **kwargs)
    return [str(problem) for problem in caught.value.problems]


# --- tests ------------------------------------------------------------------------------------


def test_seed_6_8_interaction_analysis_calls_the_lookup_singleton_directly() -> None:
    container = ToolContainer.build(
        registry(
            reg(InteractionAnalysisTool, "interaction_analysis", priority=10),
            reg(SubstanceLookupTool, "substance_lookup", priority=20),
        )
    )

    analysis = container.get("pharma.interaction_analysis")
    assert isinstance(analysis, InteractionAnalysisTool)
    assert analysis.substance_lookup is container.get("pharma.substance_lookup")
    assert analysis.analyze_candidate("Ibuprofen + Paracetamol") == [
        ["ibuprofen", "paracetamol"],
        ["leaflet"],
    ]


def test_identity_from_the_registration_is_bound_on_each_instance() -> None:
    container = ToolContainer.build(
        registry(reg(SubstanceLookupTool, "lookup", "vet", priority=7)),
    )

    tool = container.get("vet.lookup")
    assert (tool.name, tool.domain, tool.priority, tool.qualified_name) == (
        "lookup",
        "vet",
        7,
        "vet.lookup",
    )
    assert SubstanceLookupTool.name == "substance_lookup"  # class default untouched


def test_singletons_are_built_once_and_reset_builds_them_again() -> None:
    container = ToolContainer.build(
        registry(
            reg(InteractionAnalysisTool, "interaction_analysis"),
            reg(SubstanceLookupTool, "substance_lookup"),
        )
    )
    lookup = container.get("pharma.substance_lookup")

    assert container.get("pharma.substance_lookup") is lookup
    assert container.instances() == {
        "pharma.interaction_analysis": container.get("pharma.interaction_analysis"),
        "pharma.substance_lookup": lookup,
    }

    container.reset()
    fresh_analysis = container.get("pharma.interaction_analysis")
    assert isinstance(fresh_analysis, InteractionAnalysisTool)
    assert fresh_analysis.substance_lookup is not lookup
    assert fresh_analysis.substance_lookup is container.get("pharma.substance_lookup")


def test_autowires_by_a_base_class_the_tool_derives_from() -> None:
    container = ToolContainer.build(
        registry(reg(SearchUserTool, "search_user"), reg(WebSearchTool, "web_search"))
    )

    user = container.get("pharma.search_user")
    assert isinstance(user, SearchUserTool)
    web_search: object = container.get("pharma.web_search")
    assert user.searcher is web_search
    assert user.searcher.search("x") == "web:x"


def test_autowiring_prefers_the_tools_own_domain() -> None:
    container = ToolContainer.build(
        registry(
            reg(SubstanceLookupTool, "substance_lookup", "pharma"),
            reg(SubstanceLookupTool, "substance_lookup", "vet"),
            reg(InteractionAnalysisTool, "interaction_analysis", "vet"),
        )
    )

    assert container.graph()["vet.interaction_analysis"] == ["vet.substance_lookup"]


def test_autowiring_falls_back_to_a_single_tool_of_another_domain() -> None:
    container = ToolContainer.build(
        registry(
            reg(SubstanceLookupTool, "substance_lookup", "pharma"),
            reg(InteractionAnalysisTool, "interaction_analysis", "vet"),
        )
    )

    assert container.graph()["vet.interaction_analysis"] == ["pharma.substance_lookup"]


def test_several_candidates_without_an_explicit_name_is_an_error_listing_them() -> None:
    problems = wiring_problems(
        reg(SubstanceLookupTool, "lookup_a"),
        reg(SubstanceLookupTool, "lookup_b"),
        reg(InteractionAnalysisTool, "interaction_analysis", line=12),
    )

    assert len(problems) == 1
    assert problems[0].startswith(f"{YAML}:12: pharma.interaction_analysis: ")
    assert "matches several tools: pharma.lookup_a, pharma.lookup_b" in problems[0]
    assert "inject: {substance_lookup: <tool name>}" in problems[0]


def test_explicit_injection_by_short_name_resolves_the_ambiguity() -> None:
    container = ToolContainer.build(
        registry(
            reg(SubstanceLookupTool, "lookup_a"),
            reg(SubstanceLookupTool, "lookup_b"),
            reg(
                InteractionAnalysisTool,
                "interaction_analysis",
                injections={"substance_lookup": "lookup_b"},
            ),
        )
    )

    analysis = container.get("pharma.interaction_analysis")
    assert isinstance(analysis, InteractionAnalysisTool)
    assert analysis.substance_lookup is container.get("pharma.lookup_b")


def test_explicit_injection_by_prefixed_name_overrides_autowiring() -> None:
    container = ToolContainer.build(
        registry(
            reg(SubstanceLookupTool, "substance_lookup", "pharma"),
            reg(SubstanceLookupTool, "substance_lookup", "vet"),
            reg(
                InteractionAnalysisTool,
                "interaction_analysis",
                "pharma",
                injections={"substance_lookup": "vet.substance_lookup"},
            ),
        )
    )

    assert container.graph()["pharma.interaction_analysis"] == ["vet.substance_lookup"]


def test_bad_explicit_injections_are_reported() -> None:
    problems = wiring_problems(
        reg(SubstanceLookupTool, "substance_lookup"),
        reg(WebSearchTool, "web_search"),
        reg(
            InteractionAnalysisTool,
            "wrong_type",
            injections={"substance_lookup": "web_search"},
            line=3,
        ),
        reg(
            InteractionAnalysisTool,
            "unknown_target",
            injections={"substance_lookup": "substanse_lookup"},
            line=8,
        ),
        reg(
            InteractionAnalysisTool,
            "unknown_param",
            injections={"lookup": "substance_lookup"},
            line=13,
        ),
    )

    assert len(problems) == 3
    wrong_type, unknown_target, unknown_param = problems
    assert wrong_type.startswith(f"{YAML}:3: pharma.wrong_type: inject substance_lookup:")
    assert "pharma.web_search" in wrong_type
    assert "not a SubstanceLookupTool" in wrong_type
    assert unknown_target.startswith(f"{YAML}:8: ")
    assert "unknown tool 'substanse_lookup'" in unknown_target
    assert "did you mean" in unknown_target
    assert unknown_param.startswith(f"{YAML}:13: ")
    assert "no such parameter" in unknown_param
    assert "substance_lookup" in unknown_param


def test_a_cycle_is_reported_once_with_its_chain() -> None:
    problems = wiring_problems(
        reg(CycleATool, "a", line=1),
        reg(CycleBTool, "b", line=5),
    )

    assert problems == [
        f"{YAML}:1: pharma.a: dependency cycle: pharma.a -> pharma.b -> pharma.a; remove one of "
        "these constructor parameters (call that tool through the orchestrator instead)"
    ]


def test_autowiring_never_injects_a_tool_into_itself_but_naming_itself_is_a_cycle() -> None:
    problems = wiring_problems(reg(ChainedSearchTool, "chained", line=2))
    assert len(problems) == 1
    assert "'searcher: Searcher'" in problems[0]
    assert "cannot be satisfied" in problems[0]

    problems = wiring_problems(
        reg(ChainedSearchTool, "chained", injections={"searcher": "chained"}, line=2)
    )
    assert len(problems) == 1
    assert problems[0].startswith(
        f"{YAML}:2: pharma.chained: dependency cycle: pharma.chained -> pharma.chained;"
    )


def test_an_unsatisfiable_parameter_is_an_error_and_a_default_is_kept() -> None:
    problems = wiring_problems(reg(NeedsNumberTool, "needs_number", line=4))

    assert len(problems) == 1
    assert problems[0].startswith(f"{YAML}:4: pharma.needs_number: parameter 'retries: int' ")
    assert "cannot be satisfied" in problems[0]
    assert "give the parameter a default" in problems[0]

    container = ToolContainer.build(registry(reg(DefaultNumberTool, "default_number")))
    tool = container.get("pharma.default_number")
    assert isinstance(tool, DefaultNumberTool)
    assert tool.retries == 3


def test_a_tool_with_no_candidate_of_its_type_is_unsatisfiable() -> None:
    problems = wiring_problems(reg(InteractionAnalysisTool, "interaction_analysis"))

    assert len(problems) == 1
    assert "'substance_lookup: SubstanceLookupTool'" in problems[0]
    assert "cannot be satisfied" in problems[0]


def test_every_problem_is_reported_at_once_with_its_location() -> None:
    problems = wiring_problems(
        reg(CycleATool, "a", line=1),
        reg(CycleBTool, "b", line=5),
        reg(NeedsNumberTool, "needs_number", line=9),
        reg(SettingsTool, "limited", settings={"limit": "many"}, line=14),
        reg(InteractionAnalysisTool, "interaction_analysis", line=20),
    )

    assert len(problems) == 4
    # in line order, the cycle (found after every parameter was planned) first
    assert [problem.split(":")[1] for problem in problems] == ["1", "9", "14", "20"]
    assert all(problem.startswith(f"{YAML}:") for problem in problems)


def test_services_are_injected_by_exact_type_or_by_subclass() -> None:
    model: Any = object()
    clock = FixedClock()

    container = ToolContainer.build(
        registry(reg(ServiceUserTool, "service_user")),
        services={LanguageModel: model, FixedClock: clock},
    )

    tool = container.get("pharma.service_user")
    assert isinstance(tool, ServiceUserTool)
    assert tool.llm is model
    assert tool.clock is clock
    assert container.graph() == {"pharma.service_user": []}


def test_a_missing_service_is_unsatisfiable() -> None:
    problems = wiring_problems(
        reg(ServiceUserTool, "service_user"), services={LanguageModel: object()}
    )

    assert len(problems) == 1
    assert "'clock: Clock'" in problems[0]
    assert "pass the service to App.load" in problems[0]


def test_several_matching_services_are_ambiguous() -> None:
    problems = wiring_problems(
        reg(ServiceUserTool, "service_user"),
        services={LanguageModel: object(), FixedClock: FixedClock(), OtherClock: OtherClock()},
    )

    assert len(problems) == 1
    assert "matches several services (FixedClock, OtherClock)" in problems[0]


def test_settings_are_validated_against_the_settings_model() -> None:
    container = ToolContainer.build(
        registry(reg(SettingsTool, "limited", settings={"limit": "5"})),
    )

    tool = container.get("pharma.limited")
    assert isinstance(tool, SettingsTool)
    assert tool.settings == LimitSettings(limit=5, label="default")


def test_invalid_settings_report_each_field_with_the_yaml_location() -> None:
    problems = wiring_problems(
        reg(SettingsTool, "limited", settings={"limit": "many", "label": ["x"]}, line=30),
    )

    assert len(problems) == 2
    assert problems[0].startswith(f"{YAML}:30: pharma.limited: settings of 'pharma.limited' ")
    assert "(LimitSettings): limit: Input should be a valid integer" in problems[0]
    assert "label: Input should be a valid string" in problems[1]


def test_settings_keys_the_model_does_not_read_are_refused_as_the_build_refuses_them() -> None:
    """The container validated leniently: a misspelt key was dropped, its setting left at the
    default, where the build refused it."""
    problems = wiring_problems(
        reg(SettingsTool, "limited", settings={"limit": 5, "lable": "x"}, line=30),
    )

    assert problems == [
        f"{YAML}:30: pharma.limited: settings of 'pharma.limited' (LimitSettings): lable: "
        "unknown key 'lable'; did you mean 'label'? allowed keys: limit, label"
    ]


class UndeclaredSettingsTool(_Tool):
    def __init__(self, settings: LimitSettings) -> None:
        self.settings = settings


def test_settings_reach_a_tool_only_through_its_settings_model() -> None:
    """A ``settings`` parameter annotated with a model, without ``settings_model``, was given
    that model's defaults by the container, while the build refused settings for the tool."""
    problems = wiring_problems(reg(UndeclaredSettingsTool, "undeclared", line=4))

    assert problems == [
        f"{YAML}:4: pharma.undeclared: parameter 'settings: LimitSettings' of "
        f"{__name__}.UndeclaredSettingsTool.__init__ receives settings only from the class's "
        "settings_model, and it declares none; set settings_model = LimitSettings"
    ]


def test_missing_required_settings_are_reported() -> None:
    problems = wiring_problems(reg(SettingsTool, "limited", line=2))

    assert len(problems) == 1
    assert "limit: Field required" in problems[0]


def test_settings_for_a_tool_that_cannot_take_them_are_an_error() -> None:
    problems = wiring_problems(
        reg(SubstanceLookupTool, "substance_lookup", settings={"limit": 1}, line=6),
    )

    assert len(problems) == 1
    assert problems[0].startswith(f"{YAML}:6: ")
    assert "takes no 'settings' parameter, so they would be ignored" in problems[0]


def test_a_dependency_on_a_disabled_tool_is_an_error_naming_it() -> None:
    problems = wiring_problems(
        reg(SubstanceLookupTool, "substance_lookup", enabled=False),
        reg(InteractionAnalysisTool, "by_type", line=3),
        reg(
            InteractionAnalysisTool,
            "by_name",
            injections={"substance_lookup": "substance_lookup"},
            line=7,
        ),
    )

    assert len(problems) == 2
    by_type, by_name = problems
    assert by_type.startswith(f"{YAML}:3: pharma.by_type: ")
    assert "needs pharma.substance_lookup, which is disabled" in by_type
    assert by_name.startswith(f"{YAML}:7: pharma.by_name: ")
    assert "names 'pharma.substance_lookup', which is disabled" in by_name


def test_disabled_tools_are_not_built_and_an_optional_dependency_keeps_its_default() -> None:
    container = ToolContainer.build(
        registry(
            reg(SubstanceLookupTool, "substance_lookup", enabled=False),
            reg(OptionalLookupUserTool, "optional_user"),
        )
    )

    user = container.get("pharma.optional_user")
    assert isinstance(user, OptionalLookupUserTool)
    assert user.substance_lookup is None
    assert list(container.instances()) == ["pharma.optional_user"]
    with pytest.raises(UnknownToolError, match=r"no enabled tool 'pharma\.substance_lookup'"):
        container.get("pharma.substance_lookup")


def test_an_optional_dependency_is_injected_when_enabled() -> None:
    container = ToolContainer.build(
        registry(
            reg(SubstanceLookupTool, "substance_lookup"),
            reg(OptionalLookupUserTool, "optional_user"),
        )
    )

    assert container.graph()["pharma.optional_user"] == ["pharma.substance_lookup"]


def test_a_constructor_that_raises_is_reported_at_build_time_with_its_cause() -> None:
    with pytest.raises(WiringError) as caught:
        ToolContainer.build(
            registry(
                reg(BrokenUserTool, "broken_user", line=6),
                reg(BrokenTool, "broken", line=2),
            )
        )

    # the dependent is not reported again: its dependency's failure is the cause
    assert [str(problem) for problem in caught.value.problems] == [
        f"{YAML}:2: pharma.broken: building tool 'pharma.broken' "
        f"({__name__}.BrokenTool) failed: RuntimeError: database unreachable"
    ]
    assert isinstance(caught.value.__cause__, RuntimeError)


@pytest.mark.parametrize(
    ("tool_class", "failure"),
    [
        (ExitingTool, "SystemExit: no licence key"),
        (UnprintableTool, "UnprintableError: (its message cannot be shown: str() of it raised)"),
    ],
    ids=["sys-exit", "error-without-text"],
)
def test_a_constructor_calling_sys_exit_or_raising_without_text_is_reported_like_any_failure(
    tool_class: type[_Tool], failure: str
) -> None:
    """Before, the SystemExit ended App.load (every toolwire command) with no location, and
    reporting an error whose str() raises raised again."""
    with pytest.raises(WiringError) as caught:
        ToolContainer.build(registry(reg(tool_class, "failing", line=2)))

    assert [str(problem) for problem in caught.value.problems] == [
        f"{YAML}:2: pharma.failing: building tool 'pharma.failing' "
        f"({__name__}.{tool_class.__name__}) failed: {failure}"
    ]


def test_graph_lists_who_is_injected_into_whom() -> None:
    container = ToolContainer.build(
        registry(
            reg(InteractionAnalysisTool, "interaction_analysis"),
            reg(SubstanceLookupTool, "substance_lookup"),
            reg(WebSearchTool, "web_search"),
            reg(SearchUserTool, "search_user", "vet"),
            reg(SubstanceLookupTool, "unused", "vet", enabled=False),
        )
    )

    assert container.graph() == {
        "pharma.interaction_analysis": ["pharma.substance_lookup"],
        "pharma.substance_lookup": [],
        "pharma.web_search": [],
        "vet.search_user": ["pharma.web_search"],
    }


def test_each_wired_tool_logs_an_event() -> None:
    with capture_logs() as logs:
        ToolContainer.build(
            registry(
                reg(InteractionAnalysisTool, "interaction_analysis"),
                reg(SubstanceLookupTool, "substance_lookup"),
            )
        )

    wired = [entry for entry in logs if entry["event"] == "tool_wired"]
    assert [(entry["tool"], entry["injects"]) for entry in wired] == [
        ("pharma.interaction_analysis", ["pharma.substance_lookup"]),
        ("pharma.substance_lookup", []),
    ]


@pytest.mark.usefixtures("info_logs")
def test_a_failed_constructor_is_logged_without_a_traceback_and_located_at_its_class() -> None:
    with capture_logs() as logs, pytest.raises(WiringError) as caught:
        ToolContainer.build(registry(reg(BrokenTool, "broken")))  # declared by a hook: no YAML
    (event,) = [e for e in logs if e["event"] == "tool_build_failed"]
    assert event == {"event": "tool_build_failed", "log_level": "error", "tool": "pharma.broken",
                     "error": "RuntimeError: database unreachable"}
    (problem,) = caught.value.problems
    assert (problem.path, problem.line) == (__file__, inspect.getsourcelines(BrokenTool)[1])
