"""Prefixed names, resolution relative to a domain, and wire names (SPEC §4)."""

from __future__ import annotations

import pytest

from _build_samples import AnswerTool, LookupTool
from toolwire import AmbiguousToolError, ConfigError, UnknownToolError
from toolwire.registry import (
    DomainSpec,
    LeftOutTool,
    LeftOutToolError,
    SourceLocation,
    ToolRegistration,
    ToolRegistry,
    domain_reference_problems,
    from_wire_name,
    keyed_domain_reference_problems,
    to_wire_name,
)


def registration(domain: str, name: str, plugin: str = "p", line: int | None = None):  # type: ignore[no-untyped-def]
    source = SourceLocation(f"{plugin}.yaml", line) if line else None
    return ToolRegistration(name, domain, LookupTool, plugin, 100, source=source)


@pytest.fixture
def registry() -> ToolRegistry:
    registry = ToolRegistry()
    for domain, name in [("pharma", "lookup"), ("pharma", "answer"), ("docs", "lookup"),
                         ("docs", "search")]:
        registry.add(registration(domain, name))
    return registry


def test_prefixed_name_resolves_anywhere(registry: ToolRegistry) -> None:
    assert registry.resolve("docs.lookup", "pharma").qualified_name == "docs.lookup"
    assert registry.resolve("pharma.answer").qualified_name == "pharma.answer"


def test_short_name_prefers_the_own_domain(registry: ToolRegistry) -> None:
    assert registry.resolve("lookup", "pharma").qualified_name == "pharma.lookup"
    assert registry.resolve("lookup", "docs").qualified_name == "docs.lookup"


def test_unique_short_name_resolves_from_another_domain(registry: ToolRegistry) -> None:
    assert registry.resolve("search", "pharma").qualified_name == "docs.search"


def test_ambiguous_short_name_lists_the_candidates(registry: ToolRegistry) -> None:
    with pytest.raises(AmbiguousToolError) as raised:
        registry.resolve("lookup")
    assert raised.value.candidates == ["docs.lookup", "pharma.lookup"]
    assert "docs.lookup, pharma.lookup" in str(raised.value)
    assert "use the prefixed name" in str(raised.value)


def test_unknown_name_suggests_close_candidates(registry: ToolRegistry) -> None:
    with pytest.raises(UnknownToolError) as raised:
        registry.resolve("lokup", "pharma")
    assert "lookup" in raised.value.candidates
    assert "did you mean" in str(raised.value)


def test_unknown_name_lists_the_domain_when_nothing_is_close(registry: ToolRegistry) -> None:
    with pytest.raises(UnknownToolError) as raised:
        registry.resolve("zzz", "pharma")
    assert set(raised.value.candidates) == {"pharma.lookup", "pharma.answer"}


def test_wire_names_round_trip(registry: ToolRegistry) -> None:
    for reg in registry:
        assert "." not in reg.wire_name
        assert from_wire_name(reg.wire_name) == reg.qualified_name
        assert registry.resolve(reg.wire_name).qualified_name == reg.qualified_name
    assert to_wire_name("pharma.substance_lookup") == "pharma-substance_lookup"


def test_duplicate_names_both_owners() -> None:
    registry = ToolRegistry()
    registry.add(registration("pharma", "lookup", plugin="first", line=3))
    with pytest.raises(ConfigError) as raised:
        registry.add(registration("pharma", "lookup", plugin="second", line=7))
    message = str(raised.value)
    assert "'first' at first.yaml:3" in message
    assert "'second' at second.yaml:7" in message
    assert raised.value.problems[0].line == 7


def test_registry_keeps_order_and_domains(registry: ToolRegistry) -> None:
    assert [r.qualified_name for r in registry.in_domain("pharma")] == [
        "pharma.lookup",
        "pharma.answer",
    ]
    assert len(registry) == 4
    assert "docs.search" in registry
    assert AnswerTool.name == "answer"


LEFT_OUT = LeftOutTool("pharma.stock_lookup", SourceLocation("shop.yaml", 3), LookupTool)


@pytest.mark.parametrize("name", ["stock_lookup", "pharma.stock_lookup", "pharma-stock_lookup"])
def test_a_name_of_a_left_out_tool_says_so_instead_of_guessing_another(
    registry: ToolRegistry, name: str
) -> None:
    """It used to say "unknown tool ...; did you mean ..." after the entry's own problem."""
    registry.leave_out(LEFT_OUT)
    with pytest.raises(LeftOutToolError) as raised:  # an UnknownToolError
        registry.resolve(name, "docs")
    assert str(raised.value) == (
        "tool 'pharma.stock_lookup' (declared at shop.yaml:3) has problems of its own and was "
        "left out; fix those first"
    )
    assert raised.value.candidates == []


def test_a_left_out_tool_is_found_by_its_class_and_never_shadows_a_registered_one(
    registry: ToolRegistry,
) -> None:
    registry.leave_out(LEFT_OUT)
    registry.leave_out(LeftOutTool("docs.search", None, AnswerTool))
    assert registry.left_out_of_class(LookupTool) == LEFT_OUT
    assert registry.left_out_of_class(ToolRegistry) is None
    assert registry.resolve("search", "docs").qualified_name == "docs.search"


def test_a_left_out_tool_is_found_by_its_class_object_however_its_class_was_written(
    registry: ToolRegistry,
) -> None:
    """It was matched on the 'class' string as written: a re-export ('shopx:Tool' for
    shopx.tools.Tool) or an entry with no name was not found. A subclass is found as
    autowiring finds one, and so is a class that was refused as a tool class."""

    class Special(LookupTool):
        pass

    registry.leave_out(LeftOutTool("pharma.special", SourceLocation("shop.yaml", 5), Special))
    registry.leave_out(LeftOutTool("pharma.gone", SourceLocation("shop.yaml", 7)))  # no class
    special = registry.left_out_of_class(Special)
    assert special is not None and special.qualified_name == "pharma.special"
    assert registry.left_out_of_class(LookupTool) == special  # a base, as autowiring finds it
    assert registry.left_out_of_class(object) is None
    assert registry.left_out_of_class("LookupTool") is None


def test_domain_reference_problems_name_their_key(registry: ToolRegistry) -> None:
    """One unknown name under two keys used to read as the same problem twice."""
    spec = DomainSpec(
        name="docs",
        rag_tool="nope",
        deep_fallback={"general": "nope"},
        excluded_tools=["search", "nope2"],
    )
    keyed = keyed_domain_reference_problems(spec, registry)
    # each key written as the configuration's problems write it (deep_fallback.general)
    assert [(p.key, p.message.split(" (")[0], p.follow_on) for p in keyed] == [
        (("rag_tool",), "domain 'docs': rag_tool: unknown tool 'nope'", False),
        (
            ("deep_fallback", "general"),
            "domain 'docs': deep_fallback.general: unknown tool 'nope'",
            False,
        ),
        (("excluded_tools", 1), "domain 'docs': excluded_tools[1]: unknown tool 'nope2'", False),
    ]
    assert domain_reference_problems(spec, registry) == [p.message for p in keyed]


def test_a_domain_reference_to_a_left_out_tool_follows_from_its_problems(
    registry: ToolRegistry,
) -> None:
    registry.leave_out(LEFT_OUT)
    spec = DomainSpec(name="pharma", rag_tool="stock_lookup", deep_fallback={"*": "nope"})
    keyed = keyed_domain_reference_problems(spec, registry)
    assert [(p.key, p.follow_on) for p in keyed] == [
        (("rag_tool",), True),
        (("deep_fallback", "*"), False),
    ]
    assert keyed[1].message.startswith("domain 'pharma': deep_fallback.*: unknown tool 'nope'")


def test_a_left_out_tool_of_the_own_domain_is_not_replaced_by_another_domains_namesake(
    registry: ToolRegistry,
) -> None:
    """docs.search would have been injected in its place, unnoticed."""
    registry.leave_out(LeftOutTool("pharma.search", SourceLocation("shop.yaml", 8)))
    with pytest.raises(UnknownToolError, match=r"tool 'pharma.search' \(declared at shop.yaml:8\)"):
        registry.resolve("search", "pharma")
    assert registry.resolve("search", "docs").qualified_name == "docs.search"
