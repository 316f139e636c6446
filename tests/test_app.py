"""App.load: plugins → YAML → registry → container, merge order, and every build failure."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError
from structlog.testing import capture_logs

import _build_samples
import toolwire
from _build_samples import (
    REGISTER_LINE,
    AnswerTool,
    LookupSettings,
    LookupTool,
    PlanTool,
    Query,
    WriteFile,
    make_plugin,
)
from toolwire import App, ConfigError, PluginError, WiringError
from toolwire.container import strict_settings_model
from toolwire.errors import Problem
from toolwire.llm.base import LanguageModel
from toolwire.sessions import MemorySessionStore
from toolwire.testing import ScriptedModel


def shop_plugin(*files: Path) -> object:
    return make_plugin(
        "shop", domains=("shop",), tools=(LookupTool, AnswerTool),
        config_files=tuple(str(f) for f in files),
    )


def load(config: Path | None = None, *plugins: object, **kwargs: Any) -> App:
    return App.load(config, plugins=plugins or (shop_plugin(),), load_entry_points=False,
                    **kwargs)


def problems(raised: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return [str(problem) for problem in raised.value.problems]


def test_builds_singletons_and_injects_by_type(isolated: Path) -> None:
    app = load()
    assert set(app.domains) == {"shop"}
    assert [r.qualified_name for r in app.registry] == ["shop.lookup", "shop.answer"]
    answer = app.tool("answer", "shop")
    assert isinstance(answer, AnswerTool)
    assert answer.lookup is app.tool("shop.lookup")
    assert app.tool("shop.answer") is answer
    assert app.tools == {"shop.lookup": app.tool("lookup", "shop"), "shop.answer": answer}
    assert answer.domain == "shop" and answer.qualified_name == "shop.answer"
    assert answer.execute_with_result(Query(text="hi"), "hi").text == "HI, HI, HI"
    assert app.container.graph() == {"shop.lookup": [], "shop.answer": ["shop.lookup"]}


def test_short_names_default_to_the_default_domain(isolated: Path, write_file: WriteFile) -> None:
    app = load(write_file("app.yaml", "default_domain: shop\n"))
    assert isinstance(app.tool("lookup"), LookupTool)


def test_merge_order_plugin_hooks_then_plugin_yaml_then_app_yaml(
    isolated: Path, write_file: WriteFile
) -> None:
    shipped = write_file("shipped.yaml", (
        "tools:\n"
        "  - {name: lookup, priority: 7, settings: {limit: 5}}\n"
        "  - {name: plan, class: '_build_samples:PlanTool'}\n"
    ))
    app_yaml = write_file("app.yaml", (
        "domains:\n"
        "  - {name: shop, description: overridden}\n"
        "tools:\n"
        "  - {name: lookup, domain: shop, settings: {limit: 2}}\n"
        "  - {name: plan, domain: shop, enabled: false}\n"
    ))
    app = load(app_yaml, shop_plugin(shipped))
    lookup = next(r for r in app.registry if r.short_name == "lookup")
    assert lookup.priority == 7 and dict(lookup.settings) == {"limit": 2}
    assert lookup.source is not None and lookup.source.path == str(app_yaml)
    assert app.tool("shop.lookup").limit == 2  # type: ignore[attr-defined]
    plan = next(r for r in app.registry if r.short_name == "plan")
    assert (plan.tool_class, plan.enabled, plan.plugin) == (PlanTool, False, "shop")
    assert "shop.plan" not in app.tools
    assert app.domains["shop"].description == "overridden"
    assert app.domains["shop"].plugin == "shop"


def test_app_yaml_declares_new_tools_and_domains(isolated: Path, write_file: WriteFile) -> None:
    app_yaml = write_file("app.yaml", (
        "default_domain: desk\n"
        "domains: [{name: desk}]\n"
        "tools:\n"
        "  - {class: '_build_samples:LookupTool', name: finder}\n"
        "  - {class: '_build_samples:AnswerTool', inject: {lookup: desk.finder}, priority: 1}\n"
    ))
    app = App.load(app_yaml, load_entry_points=False)
    assert [(r.qualified_name, r.plugin, r.priority) for r in app.registry] == [
        ("desk.finder", "config", 100), ("desk.answer", "config", 1)
    ]
    assert app.tool("answer").lookup is app.tool("finder")  # type: ignore[attr-defined]


def test_a_class_whose_module_calls_sys_exit_is_located(
    isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_file("exiting_tools.py", "import sys\nsys.exit('no licence key')\n")
    monkeypatch.syspath_prepend(str(isolated))
    monkeypatch.delitem(sys.modules, "exiting_tools", raising=False)
    path = write_file("app.yaml", (
        "default_domain: shop\n"
        "tools:\n"
        "  - name: a\n"
        "    class: exiting_tools:Tool\n"
    ))  # fmt: skip

    with pytest.raises(ConfigError) as raised:
        load(path)

    assert problems(raised)[0] == (
        f"{path}:4: class 'exiting_tools:Tool': module 'exiting_tools' raised while importing, "
        f"at {isolated / 'exiting_tools.py'}:2: SystemExit: no licence key; fix the module there "
        "(its path is right)"
    )


def test_missing_class_and_wrong_type_are_located(isolated: Path, write_file: WriteFile) -> None:
    path = write_file("app.yaml", (
        "default_domain: shop\n"
        "tools:\n"
        "  - name: a\n"
        "    class: no_such_module_xyz:Tool\n"         # 4
        "  - name: b\n"
        "    class: _build_samples:Missing\n"          # 6
        "  - name: c\n"
        "    class: _build_samples:NotATool\n"         # 8
        "  - name: d\n"
        "    class: just_a_module\n"                   # 10
        "  - {name: nothing_declared}\n"               # 11
        "  - {priority: 3}\n"                          # 12
    ))
    with pytest.raises(ConfigError) as raised:
        load(path)
    got = problems(raised)
    assert got[0].startswith(f"{path}:4: class 'no_such_module_xyz:Tool': cannot import module")
    assert got[1] == (
        f"{path}:6: class '_build_samples:Missing': module '_build_samples' has no 'Missing'; "
        "tool classes it defines: AnswerTool, LookupTool, PlanTool"
    )
    assert got[2].startswith(f"{path}:8: class '_build_samples:NotATool':")
    assert "is not a ChatbotTool subclass" in got[2]
    assert got[3] == f"{path}:10: class 'just_a_module' must be written 'package.module:ClassName'"
    assert got[4].startswith(f"{path}:11: no tool 'shop.nothing_declared' was declared earlier")
    assert got[5].startswith(f"{path}:12: a tool entry needs 'class:")
    assert len(got) == 6


def test_duplicates_in_one_file_and_across_plugins(isolated: Path, write_file: WriteFile) -> None:
    same_file = write_file("dup.yaml", (
        "tools:\n"
        "  - {name: x, class: '_build_samples:LookupTool', domain: shop}\n"
        "  - {name: x, class: '_build_samples:PlanTool', domain: shop}\n"
    ))
    other = make_plugin("other", tools=(LookupTool,))  # registers no domain: fails to load
    intruder = write_file("intruder.yaml",
                          "tools:\n  - {name: lookup, class: '_build_samples:LookupTool', "
                          "domain: shop}\n")
    guest = make_plugin("guest", config_files=(str(intruder),))
    with pytest.raises(ConfigError) as raised:
        load(same_file, shop_plugin(), other, guest)
    got = problems(raised)
    # the failed plugin comes first: it is the likely cause of the problems after it
    assert got.pop(0).startswith(
        "plugin 'other' failed to load: raised ToolDeclarationError: tool LookupTool was "
        "registered without a domain and the plugin declares 0 domains"
    )
    lookup_class = f"{inspect.getsourcefile(LookupTool)}:{inspect.getsourcelines(LookupTool)[1]}"
    assert got[0] == (
        f"{intruder}:2: duplicate tool 'shop.lookup': declared by plugin 'shop' at {lookup_class} "
        f"and again by plugin 'guest' at {intruder}:2; rename one (the 'name' key in its YAML, or "
        "register(..., name=...) in its register_tools hook), or leave one plugin out with "
        "TOOLWIRE_PLUGINS"
    )
    assert got[1].startswith(f"{same_file}:3: duplicate tool 'shop.x' in this file "
                             "(first declared at line 2)")
    # the wiring of what stands is reported too: shop.x (line 2) is a second LookupTool
    assert got[2].endswith("(LookupTool) matches several tools: shop.lookup, shop.x; name one "
                           "explicitly in the tool's YAML: inject: {lookup: <tool name>}")
    assert len(got) == 3


@pytest.mark.parametrize(
    ("yaml", "expected"),
    [
        (
            "tools:\n"
            "  - name: lookup\n"
            "    domain: shop\n"
            "    settings:\n"
            "      limit: 0\n"                          # 5
            "  - name: answer\n"
            "    domain: shop\n"
            "    settings: {colour: red}\n",           # 8
            [
                "5: tool 'shop.lookup': settings.limit: Input should be greater than or equal to 1",
                "8: tool 'shop.answer' takes no settings (AnswerTool has no settings_model)",
            ],
        ),
        (  # pydantic would drop a misspelt key silently, leaving the setting at its default
            "tools:\n"
            "  - name: lookup\n"
            "    domain: shop\n"
            "    settings:\n"
            "      limt: 5\n"                           # 5
            "      colour: red\n",                      # 6
            [
                "5: tool 'shop.lookup': settings.limt: unknown key 'limt'; did you mean 'limit'? "
                "allowed keys: limit",
                "6: tool 'shop.lookup': settings.colour: unknown key 'colour'; allowed keys: limit",
            ],
        ),
    ],
    ids=["invalid value, no settings model", "undeclared keys"],
)
def test_settings_are_validated_against_the_settings_model_at_their_lines(
    isolated: Path, write_file: WriteFile, yaml: str, expected: list[str]
) -> None:
    path = write_file("app.yaml", yaml)
    with pytest.raises(ConfigError) as raised:
        load(path)
    assert problems(raised) == [f"{path}:{line}" for line in expected]


def test_what_counts_as_a_settings_key_is_pydantics_decision() -> None:
    """A key is one pydantic reads (a field name, an alias, a validation alias); every other key
    is refused, unless the model sets ``extra`` itself."""

    class Lenient(BaseModel):
        model_config = ConfigDict(extra="allow")
        limit: int = 1

    class Aliased(BaseModel):
        limit: int = Field(default=1, alias="max")

    class Choices(BaseModel):
        limit: int = Field(default=1, validation_alias=AliasChoices("max", "lim"))

    def refused(model: type[BaseModel], settings: dict[str, Any]) -> list[str]:
        try:
            strict_settings_model(model).model_validate(settings)
        except ValidationError as error:
            return [str(item["loc"][-1]) for item in error.errors()]
        return []

    assert refused(Lenient, {"limit": 2, "colour": "red"}) == []
    assert refused(Aliased, {"max": 2}) == []
    assert refused(Aliased, {"limit": 2}) == ["limit"]  # pydantic would drop it: no alias given
    assert refused(Choices, {"lim": 2}) == refused(Choices, {"max": 2}) == []
    assert refused(LookupSettings, {"limit": 2, "colour": "red"}) == ["colour"]
    assert strict_settings_model(Lenient) is Lenient
    assert strict_settings_model(LookupSettings) is strict_settings_model(LookupSettings)


def test_unknown_domains_and_unresolvable_domain_references(
    isolated: Path, write_file: WriteFile
) -> None:
    path = write_file("app.yaml", (
        "default_domain: nowhere\n"
        "domains:\n"
        "  - name: shop\n"
        "    rag_tool: serch\n"
        "    deep_fallback: {general: serch}\n"
        "    excluded_tools: [answer, lokup]\n"
        "tools:\n"
        "  - {name: lost, class: '_build_samples:LookupTool', domain: elsewhere}\n"
    ))
    with pytest.raises(ConfigError) as raised:
        load(path)
    # each at its key's line, naming the key: the two 'serch' used to read as one problem twice
    assert problems(raised) == [
        f"{path}:1: default_domain 'nowhere' is not a declared domain; declared domains: shop",
        f"{path}:4: domain 'shop': rag_tool: unknown tool 'serch' (looked in domain 'shop' and "
        "by prefixed name); did you mean answer?",
        f"{path}:5: domain 'shop': deep_fallback.general: unknown tool 'serch' (looked in "
        "domain 'shop' and by prefixed name); did you mean answer?",
        f"{path}:6: domain 'shop': excluded_tools[1]: unknown tool 'lokup' (looked in domain "
        "'shop' and by prefixed name); did you mean lookup, shop.lookup?",
        f"{path}:8: tool 'elsewhere.lost' names unknown domain 'elsewhere'; declared domains: shop",
    ]


def test_config_problems_and_build_problems_come_together(
    isolated: Path, write_file: WriteFile
) -> None:
    path = write_file("app.yaml", (
        "llm: {timeout_s: soon}\n"
        "tools:\n"
        "  - {name: x, class: 'nowhere_mod:X', domain: shop}\n"
    ))
    with pytest.raises(ConfigError) as raised:
        load(path)
    assert [p.line for p in raised.value.problems] == [1, 3]


def test_a_reference_to_an_entry_left_out_for_its_problems_says_so(
    isolated: Path, write_file: WriteFile
) -> None:
    """The entry's own problem used to be followed by "unknown tool 'finder' ...; did you mean
    shop.answer?" at every reference to it."""
    path = write_file("app.yaml", (
        "domains:\n"
        "  - {name: desk, rag_tool: finder}\n"                                     # 2
        "tools:\n"
        "  - {name: finder, class: '_build_samples:LookupTool', domain: desk,\n"   # 4
        "     priorty: 50}\n"
        "  - {name: asker, class: '_build_samples:AnswerTool', domain: desk,\n"    # 6
        "     inject: {lookup: finder}}\n"
        "  - {name: helper, class: '_build_samples:AnswerTool', domain: desk}\n"   # 8
    ))  # fmt: skip
    with pytest.raises(ConfigError) as raised:
        load(path, make_plugin("empty"))
    left_out = (
        f"tool 'desk.finder' (declared at {path}:4) has problems of its own and was left out; "
        "fix those first"
    )
    got = problems(raised)
    # the cause first, then what follows from it in line order (line 2 came before line 5)
    assert got[0].startswith(f"{path}:5: unknown key 'priorty'; did you mean 'priority'?")
    assert got[1] == f"{path}:2: domain 'desk': rag_tool: {left_out}"
    assert got[2] == f"{path}:6: desk.asker: inject lookup: 'finder': {left_out}"
    assert got[3] == (
        f"{path}:8: desk.helper: parameter 'lookup: LookupTool' of _build_samples.AnswerTool."
        f"__init__ cannot be satisfied: {left_out}"
    )
    assert len(got) == 4


def test_a_left_out_entry_comes_after_the_problems_of_its_file_but_not_of_others(
    isolated: Path, write_file: WriteFile
) -> None:
    """A follow-on "left out" message is an effect: after its file's other problems (its
    cause among them), never moved into another file's."""
    shipped = write_file("shipped.yaml", "tools:\n  - {name: lookup, priorty: 1}\n")
    path = write_file("app.yaml", (
        "llm: {timeout_s: soon}\n"                                                # 1
        "domains:\n"
        "  - {name: desk, rag_tool: finder}\n"                                     # 3
        "tools:\n"
        "  - {name: finder, class: '_build_samples:LookupTool', domain: desk,\n"   # 5
        "     priorty: 50}\n"
        "  - {name: asker, class: '_build_samples:AnswerTool', domain: desk,\n"    # 7
        "     inject: {lookup: finder}}\n"
    ))  # fmt: skip
    with pytest.raises(ConfigError) as raised:
        load(path, shop_plugin(shipped))
    got = [(p.path, p.line, p.message.split(":")[0]) for p in raised.value.problems]
    assert got == [
        (str(path), 1, "llm.timeout_s"),
        (str(path), 6, "unknown key 'priorty'; did you mean 'priority'? allowed keys"),
        (str(path), 3, "domain 'desk'"),
        (str(path), 7, "desk.asker"),
        (str(shipped), 2, "unknown key 'priorty'; did you mean 'priority'? allowed keys"),
    ]


def test_a_left_out_entry_without_a_name_is_found_by_its_class(
    isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry used to be remembered only by its 'name', and its class only by the 'class'
    string as written: a parameter autowired by the class said "no enabled tool and no service
    matches it" after the entry's own problem."""
    write_file("left_pkg/__init__.py", "from left_pkg.tools import Broken, Fine  # re-exported\n")
    write_file("left_pkg/tools.py", (
        "from pydantic import BaseModel\n"
        "from toolwire import OrchestratorActivatedTool, ToolExecutionResult\n"
        "class Q(BaseModel):\n"
        "    text: str = ''\n"
        "class _Base(OrchestratorActivatedTool[Q]):\n"
        "    def executable_instruction(self): return 'x?'\n"
        "    def execute_with_result(self, params, text): return ToolExecutionResult.context('')\n"
        "class Broken(_Base):\n"
        "    priority = 'high'  # refused when registered\n"
        "class Fine(_Base):\n"
        "    pass\n"
        "class Consumer(_Base):\n"
        "    def __init__(self, broken: Broken, fine: Fine) -> None:\n"
        "        self.broken, self.fine = broken, fine\n"
    ))  # fmt: skip
    monkeypatch.syspath_prepend(str(isolated))
    for name in ("left_pkg", "left_pkg.tools"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    path = write_file("app.yaml", (
        "default_domain: shop\n"
        "tools:\n"
        "  - class: left_pkg:Broken\n"                        # 3: the class is refused
        "  - {class: 'left_pkg:Fine', priorty: 5}\n"          # 4: the entry is refused
        "  - class: left_pkg.tools:Consumer\n"                # 5
    ))  # fmt: skip
    with pytest.raises(ConfigError) as raised:
        load(path)
    got = problems(raised)
    assert got[0].startswith(
        f"{path}:3: class 'left_pkg:Broken': tool class left_pkg.tools.Broken: its priority "
    )
    assert got[1].startswith(f"{path}:4: unknown key 'priorty'")
    cannot = "of left_pkg.tools.Consumer.__init__ cannot be satisfied: tool"
    assert got[2:] == [
        f"{path}:5: shop.consumer: parameter 'broken: Broken' {cannot} 'shop.broken' (declared "
        f"at {path}:3) has problems of its own and was left out; fix those first",
        f"{path}:5: shop.consumer: parameter 'fine: Fine' {cannot} 'shop.fine' (declared at "
        f"{path}:4) has problems of its own and was left out; fix those first",
    ]


def test_a_tool_whose_domain_entry_was_left_out_says_so(
    isolated: Path, write_file: WriteFile
) -> None:
    path = write_file("app.yaml", (
        "domains:\n"
        "  - {name: desk, descripton: typo}\n"
        "tools:\n"
        "  - {name: finder, class: '_build_samples:LookupTool', domain: desk}\n"
    ))  # fmt: skip
    with pytest.raises(ConfigError) as raised:
        load(path, make_plugin("empty"))
    assert problems(raised)[1] == (
        f"{path}:4: tool 'desk.finder' names domain 'desk', whose entry (at {path}:2) has "
        "problems of its own and was left out; fix those first"
    )


def test_every_problem_of_a_section_is_reported_in_one_run(
    isolated: Path, write_file: WriteFile
) -> None:
    """The refused ttl_s took the section back to its defaults: 'sqllite' went unchecked."""
    path = write_file("app.yaml", "sessions:\n  store: sqllite\n  ttl_s: 1d\n")
    with pytest.raises(ConfigError) as raised:
        load(path)
    got = problems(raised)
    assert [problem.split(": ")[1] for problem in got] == ["sessions.store", "sessions.ttl_s"]
    assert got[0].startswith(f"{path}:2: sessions.store: unknown session store 'sqllite'")
    assert got[1].startswith(f"{path}:3: sessions.ttl_s: Input should be a valid integer")


def test_ambiguous_autowiring_is_a_wiring_error(isolated: Path, write_file: WriteFile) -> None:
    path = write_file("app.yaml", (
        "tools:\n"
        "  - {name: second_lookup, class: '_build_samples:LookupTool', domain: shop}\n"
    ))
    with pytest.raises(WiringError, match="answer"):
        load(path)


def test_ambiguous_short_name_in_app_tool(isolated: Path, write_file: WriteFile) -> None:
    other = make_plugin("desk", domains=("desk",), tools=(LookupTool,))
    app = load(None, shop_plugin(), other)
    with pytest.raises(toolwire.AmbiguousToolError, match=r"desk\.lookup, shop\.lookup"):
        app.tool("lookup")
    assert app.tool("lookup", "desk") is app.tool("desk.lookup")


def test_broken_plugin_is_reported_and_the_app_still_builds(isolated: Path) -> None:
    broken = make_plugin("broken", tools=(LookupTool,))  # no domain to put the tool in
    app = load(None, broken, shop_plugin())
    assert [(p.name, p.error is None) for p in app.plugins] == [("broken", False), ("shop", True)]
    assert len(app.registry) == 2


def test_unknown_hookimpl_stops_the_build(isolated: Path) -> None:
    plugin = make_plugin("typo")

    @toolwire.hookimpl
    def register_domain(register):  # type: ignore[no-untyped-def]
        """Misspelt."""

    plugin.register_domain = register_domain  # type: ignore[attr-defined]
    with pytest.raises(PluginError, match="did you mean 'register_domains'"):
        load(None, plugin)


@pytest.mark.usefixtures("info_logs")
def test_build_logs_one_event_per_step(isolated: Path) -> None:
    with capture_logs() as logs:
        load()
    events = [(e["event"], e.get("tool") or e.get("plugin")) for e in logs]
    assert ("plugin_loaded", "shop") in events
    assert ("tool_registered", "shop.lookup") in events
    assert ("tool_wired", "shop.answer") in events
    registered = next(e for e in logs if e["event"] == "tool_registered")
    assert registered["plugin"] == "shop" and registered["domain"] == "shop"


class FakeModel:
    closed = False

    async def aclose(self) -> None:
        self.closed = True


class ModelUser(toolwire.OrchestratorActivatedTool[Query]):
    def __init__(self, llm: LanguageModel) -> None:
        self.llm = llm

    def executable_instruction(self) -> str:
        return "x"

    def execute_with_result(self, params: Query, text: str) -> toolwire.ToolExecutionResult:
        return toolwire.ToolExecutionResult.context(params.text)


WORK_IN_PROGRESS = (
    "from pydantic import BaseModel\n"
    "from toolwire import AgentCoordinator, OrchestratorActivatedTool, ToolExecutionResult\n"
    "class Q(BaseModel):\n"
    "    text: str = ''\n"
    "class Stub(OrchestratorActivatedTool[Q]):  # work in progress: no execute method yet\n"
    "    def executable_instruction(self): return 'stub?'\n"
    "class Delegating(OrchestratorActivatedTool[Q]):\n"
    "    def __init__(self):\n"
    "        self.execute_with_result = lambda params, text: ToolExecutionResult.context('ok')\n"
    "    def executable_instruction(self): return 'd?'\n"
    "class Misspelt(OrchestratorActivatedTool[Q]):\n"
    "    def executable_instruction(self): return 'm?'\n"
    "    def execute_with_results(self, params, text): return ToolExecutionResult.context('')\n"
    "class Planner(OrchestratorActivatedTool[Q], AgentCoordinator):\n"
    "    def executable_instruction(self): return 'plan?'\n"
    "    def decompose_into_subtasks(self, task): return task\n"
    "class OnlyPlanner(Planner):\n"
    "    coordinator_only = True\n"
    "class Needy(OrchestratorActivatedTool[Q]):\n"
    "    def __init__(self, count: int): self.count = count\n"
    "    def executable_instruction(self): return 'n?'\n"
    "    def execute_with_result(self, params, text): return ToolExecutionResult.context('')\n"
    "class Failing(Needy):\n"
    "    def __init__(self): raise RuntimeError('no licence key')\n"
)


@pytest.fixture
def work_in_progress(isolated: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The module ``wip_tools`` (``WORK_IN_PROGRESS``), importable."""
    write_file("wip_tools.py", WORK_IN_PROGRESS)
    monkeypatch.syspath_prepend(str(isolated))
    monkeypatch.delitem(sys.modules, "wip_tools", raising=False)
    import wip_tools  # type: ignore[import-not-found]

    return wip_tools


def test_a_disabled_tool_without_an_execute_method_loads(
    work_in_progress: Any, write_file: WriteFile
) -> None:
    """Work in progress, disabled in YAML: it used to be refused at start, when its class was
    registered, before the YAML said it was disabled; and so was a tool that sets its
    execute_with_result in __init__, and a coordinator_only coordinator."""
    path = write_file("app.yaml", (
        "default_domain: shop\n"
        "tools:\n"
        "  - {class: 'wip_tools:Stub', enabled: false}\n"
        "  - class: wip_tools:Delegating\n"
        "  - class: wip_tools:OnlyPlanner\n"
    ))  # fmt: skip
    app = load(path)
    assert app.registry.resolve("shop.stub").enabled is False
    assert app.tool("shop.delegating").execute_with_result(Query(text=""), "").text == "ok"
    assert "shop.only_planner" in app.tools


def test_a_tool_registered_by_a_hook_without_an_execute_method_does_not_fail_its_plugin(
    work_in_progress: Any, write_file: WriteFile
) -> None:
    """The register_tools hook checks the class: the whole plugin used to fail with it."""
    wip = make_plugin("wip", domains=("wip",), tools=(work_in_progress.Stub, LookupTool))
    path = write_file("app.yaml", "tools:\n  - {name: stub, domain: wip, enabled: false}\n")
    app = load(path, wip)
    assert [plugin.error for plugin in app.plugins] == [None]
    assert [r.qualified_name for r in app.registry] == ["wip.stub", "wip.lookup"]


def test_an_enabled_tool_without_an_execute_method_is_refused_at_its_line(
    work_in_progress: Any, write_file: WriteFile
) -> None:
    """Said once it is built (it could set the method in __init__), at its YAML entry; a
    coordinator that is not coordinator_only is a selection candidate and needs one too."""
    path = write_file("app.yaml", (
        "default_domain: shop\n"
        "tools:\n"
        "  - class: wip_tools:Misspelt\n"
        "  - class: wip_tools:Planner\n"
    ))  # fmt: skip
    with pytest.raises(WiringError) as raised:
        load(path)
    runs = ": an activated tool runs through it, and the base's raises NotImplementedError"
    assert problems(raised) == [
        f"{path}:3: shop.misspelt: tool class wip_tools.Misspelt: it does not define "
        f"execute_with_result(params, text) (did you mean 'execute_with_results'?){runs}",
        f"{path}:4: shop.planner: tool class wip_tools.Planner: it does not define "
        f"execute_with_result(params, text){runs}",
    ]


RUNS = ": an activated tool runs through it, and the base's raises NotImplementedError"


def test_a_missing_execute_method_is_reported_beside_the_configurations_other_problems(
    work_in_progress: Any, write_file: WriteFile
) -> None:
    """The container's check of the built tool runs only when nothing else is wrong: a
    misspelt method used to go unsaid beside another entry's missing class. Its class is
    checked then, except one whose __init__ assigns the method (its built tool decides)."""
    path = write_file("app.yaml", (
        "default_domain: shop\n"
        "tools:\n"
        "  - class: wip_tools:Misspelt\n"
        "  - class: wip_tools:Delegating\n"
        "  - class: wip_tools:Nowhere\n"
        "  - {class: 'wip_tools:Stub', enabled: false}\n"
    ))  # fmt: skip
    with pytest.raises(ConfigError) as raised:
        load(path)
    assert not isinstance(raised.value, WiringError)
    got = problems(raised)
    assert got[0] == (
        f"{path}:3: shop.misspelt: tool class wip_tools.Misspelt: it does not define "
        f"execute_with_result(params, text) (did you mean 'execute_with_results'?){RUNS}"
    )
    assert got[1].startswith(f"{path}:5: class ")
    assert "'Nowhere'" in got[1]
    assert len(got) == 2


def test_a_missing_execute_method_is_reported_beside_the_other_wiring_problems(
    work_in_progress: Any, write_file: WriteFile
) -> None:
    """A wiring problem stops the container before it builds anything: the class is checked."""
    path = write_file("app.yaml", (
        "default_domain: shop\n"
        "tools:\n"
        "  - class: wip_tools:Needy\n"
        "  - class: wip_tools:Planner\n"
        "  - class: wip_tools:Delegating\n"
    ))  # fmt: skip
    with pytest.raises(WiringError) as raised:
        load(path)
    got = problems(raised)
    assert [problem.partition(": ")[0] for problem in got] == [f"{path}:3", f"{path}:4"]
    assert "parameter 'count: int' of wip_tools.Needy.__init__ cannot be satisfied" in got[0]
    assert got[1] == (
        f"{path}:4: shop.planner: tool class wip_tools.Planner: it does not define "
        f"execute_with_result(params, text){RUNS}"
    )


def test_a_plugins_tool_without_an_execute_method_stops_the_app_like_its_other_wiring_errors(
    work_in_progress: Any,
) -> None:
    """Enabled, registered by the register_tools hook: the container refuses it, and the app
    does not start, as for a constructor that raises or a parameter nothing satisfies; its
    plugin is not failed alone (the hook itself registered a valid class)."""
    wip = make_plugin("wip", domains=("wip",), tools=(work_in_progress.Stub,))
    failing = make_plugin("failing", domains=("failing",), tools=(work_in_progress.Failing,))
    with pytest.raises(WiringError) as raised:
        load(None, wip, failing, shop_plugin())
    got = [problem.message for problem in raised.value.problems]
    assert got == [
        f"wip.stub: tool class wip_tools.Stub: it does not define "
        f"execute_with_result(params, text){RUNS}",
        "failing.failing: building tool 'failing.failing' (wip_tools.Failing) failed: "
        "RuntimeError: no licence key",
    ]


def test_the_model_is_created_on_first_use_only(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    created: list[object] = []

    def create(settings: object, providers: object, profile: object) -> FakeModel:
        created.append(settings)
        assert providers is app.model_providers
        assert profile is app.model_profile  # resolved from the settings, handed to the factory
        return FakeModel()

    monkeypatch.setattr("toolwire.llm.create_language_model", create)
    plugin = make_plugin("modelled", domains=("m",), tools=(ModelUser,))
    app = load(None, plugin)
    tool = app.tool("m.model_user")
    assert created == []
    assert tool.llm.closed is False  # type: ignore[attr-defined]
    assert created == [app.config.llm]
    assert app.llm is app.llm


async def test_passed_in_model_and_store_are_used_and_not_closed(isolated: Path) -> None:
    model, store = FakeModel(), FakeModel()
    plugin = make_plugin("modelled", domains=("m",), tools=(ModelUser,))
    app = load(None, plugin, llm=model, session_store=store)  # type: ignore[arg-type]
    assert app.tool("m.model_user").llm is model  # type: ignore[attr-defined]
    assert app.llm is model and app.session_store is store
    await app.aclose()
    assert not model.closed and not store.closed


async def test_owned_model_and_store_are_closed(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, store = FakeModel(), FakeModel()
    monkeypatch.setattr(
        "toolwire.llm.create_language_model", lambda settings, providers, profile: model
    )
    monkeypatch.setattr("toolwire.sessions.create_session_store", lambda settings, stores: store,
                        raising=False)
    app = load()
    assert app.llm is model and app.session_store is store
    await app.aclose()
    assert model.closed and store.closed


async def test_ask_delegates_and_the_question_path_loads_nothing(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, write_file: WriteFile
) -> None:
    calls: list[tuple[str, Any]] = []

    class FakeService:
        def __init__(self, **kwargs: Any) -> None:
            calls.append(("init", kwargs))

        async def ask(
            self, message: str, domain: str | None, session_id: str | None, *, caller: str | None
        ) -> str:
            calls.append(("ask", (message, domain, session_id, caller)))
            return "answer"

    monkeypatch.setattr("toolwire.orchestrator.ConversationService", FakeService)
    model, store = FakeModel(), FakeModel()
    app = load(write_file("app.yaml", "default_domain: shop\n"), llm=model,  # type: ignore[arg-type]
               session_store=store)
    assert await app.ask("first?") == "answer"
    modules = set(sys.modules)

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the question path must not discover plugins or read files")

    monkeypatch.setattr("toolwire.app.discover", forbidden)
    monkeypatch.setattr("toolwire.app.parse_app_config", forbidden)
    monkeypatch.setattr(Path, "read_text", forbidden)
    assert await app.ask("second?", "shop", "s-1") == "answer"
    assert set(sys.modules) == modules
    init = calls[0][1]
    assert init["registry"] is app.registry and init["domains"] is app.domains
    assert init["llm"] is model and init["store"] is store
    assert init["default_domain"] == "shop" and init["settings"] is app.config.orchestrator
    assert set(init["tools"]) == {"shop.lookup", "shop.answer"}
    assert [c for c in calls if c[0] == "init"] == [calls[0]]
    assert calls[-1] == ("ask", ("second?", "shop", "s-1", None))


_AUDITED: list[tuple[str, str]] | None = None
"""While a list, the audit hook below records file, directory and import events into it."""


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _AUDITED is not None and event in {"open", "import", "os.listdir", "os.scandir"}:
        _AUDITED.append((event, str(args[0]) if args else ""))


sys.addaudithook(_audit)  # audit hooks cannot be removed; this one records only when asked


async def test_the_real_question_path_reads_no_file_and_imports_nothing(isolated: Path) -> None:
    global _AUDITED
    model = ScriptedModel().on_classify("general").on_suitability({"answer": True})
    model.on_extract(Query, {"text": "kettle"}).on_gatekeeper(True).on_answer()
    app = load(llm=model, session_store=MemorySessionStore())
    first = await app.ask("Is the kettle in stock?", "shop")  # the first question may warm up
    assert "KETTLE" in first.text
    _AUDITED = []
    try:
        second = await app.ask("Is the kettle in stock?", "shop")
    finally:
        audited, _AUDITED = _AUDITED, None
    assert "KETTLE" in second.text
    assert audited == []


def test_importing_toolwire_loads_no_plugin_and_reads_no_file(tmp_path: Path) -> None:
    """No plugin is loaded and no configuration read (the one in ./config is there to tempt)."""
    probe = (
        "import sys\n"
        "seen = []\n"
        "sys.addaudithook(lambda e, a: seen.append(str(a[0])) if e == 'open' else None)\n"
        "import toolwire\n"
        "code = ('.py', '.pyc', '.so', '.zip')\n"
        "# pydantic scans installed metadata for its own plugins: that is .dist-info, not ours\n"
        "print([path for path in seen if not path.endswith(code) and '.dist-info' not in path])\n"
        "from importlib.metadata import entry_points\n"
        "plugins = [ep.module for ep in entry_points(group='toolwire')]\n"
        "print(len(plugins) > 0, [m for m in plugins if m in sys.modules])\n"
        "print([m for m in ('fastapi', 'toolwire.server', 'opentelemetry') if m in sys.modules])\n"
    )
    write = tmp_path / "config" / "toolwire.yaml"
    write.parent.mkdir()
    write.write_text("default_domain: pharma\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            cwd=tmp_path, env=os.environ, timeout=60, check=True)
    assert result.stdout.splitlines() == ["[]", "True []", "[]"], result.stdout


def test_a_failed_plugin_is_listed_first_when_the_build_fails(
    isolated: Path, write_file: WriteFile
) -> None:
    broken = make_plugin("broken", tools=(LookupTool,))  # no domain to put the tool in
    with pytest.raises(ConfigError) as raised:
        load(write_file("app.yaml", "default_domain: broken\n"), broken)
    first, second = problems(raised)
    assert first.startswith("plugin 'broken' failed to load: raised ToolDeclarationError")
    assert second.endswith("default_domain 'broken' is not a declared domain; declared domains: "
                           "none (is the domain's plugin installed?)")
    assert str(raised.value).splitlines() == [first, second]


def test_problems_of_plugin_shipped_files_and_domain_claims_are_reported_together(
    isolated: Path, write_file: WriteFile
) -> None:
    broken = write_file("broken.yaml", "tools: [unclosed\n")
    claims = write_file("claims.yaml", (
        "domains:\n"
        "  - {name: shop, description: mine now}\n"                # 2
        "  - {name: Bad-Name}\n"                                   # 3
        "tools:\n"
        "  - {name: finder, class: '_build_samples:LookupTool'}\n"  # 5
    ))
    twin = make_plugin("twin", domains=("shop",))
    with pytest.raises(ConfigError) as raised:
        load(None, shop_plugin(), twin, make_plugin("guest", config_files=(str(broken),
                                                                          str(claims))))
    got = problems(raised)
    register_line = f"{_build_samples.__file__}:{REGISTER_LINE}"
    assert got[0].startswith(f"{register_line}: duplicate domain 'shop': registered by plugin "
                             f"'shop' at {register_line} and again by plugin 'twin'")
    assert got[1].startswith(f"{broken}:2: invalid YAML:")
    assert got[2] == f"{claims}:2: domain 'shop' belongs to plugin 'shop'"
    assert got[3] == f"{claims}:3: domain name 'Bad-Name' is not lower snake case"
    assert got[4] == f"{claims}:5: tool 'finder' has no 'domain' and there is no default domain"
    assert len(got) == 5


async def test_a_model_that_fails_to_start_fails_the_question_and_is_retried(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[object] = []
    model = FakeModel()

    def create(settings: object, providers: object = None, profile: object = None) -> FakeModel:
        attempts.append(settings)
        if len(attempts) == 1:
            raise ConfigError(Problem("llm.api_key: no key in $OPENAI_API_KEY"))
        return model

    services: list[dict[str, Any]] = []

    class FakeService:
        def __init__(self, **kwargs: Any) -> None:
            services.append(kwargs)

        async def ask(self, message: str, *args: Any, **kwargs: Any) -> str:
            return "answer"

    monkeypatch.setattr("toolwire.llm.create_language_model", create)
    monkeypatch.setattr("toolwire.orchestrator.ConversationService", FakeService)
    app = load(session_store=FakeModel())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no key in"):
        await app.ask("first?", "shop")
    assert services == []  # nothing half-built is kept for the next question
    assert await app.ask("second?", "shop") == "answer"
    assert len(attempts) == 2 and [s["llm"] for s in services] == [model]


# -- every domain's orchestrator is built with the app (issue 11 item 6) ----------------------


async def test_every_domain_orchestrator_is_built_with_the_app_and_used_by_questions(
    isolated: Path,
) -> None:
    desk = make_plugin("desk", domains=("desk",), tools=(PlanTool,))
    model = ScriptedModel().on_classify("general").on_suitability({"answer": False}).on_answer()
    app = load(None, shop_plugin(), desk, llm=model, session_store=MemorySessionStore())

    built = dict(app.orchestrators)
    await app.ask("anything?", "desk")

    assert set(built) == {"shop", "desk"}
    assert app._conversation_service().orchestrators == built  # the same objects, not rebuilt


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        (TypeError("'<' not supported between instances of 'str' and 'int'"),
         "TypeError: '<' not supported between instances of 'str' and 'int'"),
        (SystemExit("no licence key"), "SystemExit: no licence key"),  # plugin code's sys.exit()
    ],
    ids=["TypeError", "SystemExit"],
)  # fmt: skip
def test_a_domain_whose_orchestrator_cannot_be_built_fails_the_load(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException, shown: str
) -> None:
    def broken(*args: object) -> object:
        raise error

    monkeypatch.setattr(
        "toolwire.orchestrator.domain_orchestrator.DomainTools.build", staticmethod(broken)
    )
    with pytest.raises(ConfigError) as raised:
        load()
    assert problems(raised) == [
        f"domain 'shop': its orchestrator cannot be built ({shown}); check the domain's tools "
        "and their priorities"
    ]


class FailingDeskPlugin:
    """Fails to load, so its domain ``desk`` is never declared."""

    @toolwire.hookimpl
    def register_domains(self, register: object) -> None:
        raise RuntimeError("desk database unreachable")


async def test_asking_an_unknown_domain_names_the_plugins_that_failed_to_load(
    isolated: Path,
) -> None:
    app = load(None, shop_plugin(), FailingDeskPlugin(), llm=ScriptedModel())

    with pytest.raises(toolwire.UnknownDomainError) as raised:
        await app.ask("book a desk", domain="desk")

    assert str(raised.value) == (
        "unknown domain 'desk' (plugin 'FailingDeskPlugin' failed to load: raised RuntimeError: "
        "desk database unreachable; see toolwire plugins); installed domains: shop"
    )
    await app.aclose()
