"""Prefixed names, resolution relative to a domain, and wire names (SPEC §4)."""

from __future__ import annotations

import pytest

from _build_samples import AnswerTool, LookupTool
from toolwire import AmbiguousToolError, ConfigError, UnknownToolError
from toolwire.registry import (
    SourceLocation,
    ToolRegistration,
    ToolRegistry,
    from_wire_name,
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
