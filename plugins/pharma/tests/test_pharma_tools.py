"""toolwire-pharma: the seed 6.8 pair, tested plainly and through an installed-plugin App."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toolwire_pharma.tools import (
    InteractionAnalysisTool,
    InteractionRequest,
    SubstanceLookupSettings,
    SubstanceLookupTool,
    SubstanceQuery,
)

from toolwire import App, TaskInfo


@pytest.fixture
def lookup() -> SubstanceLookupTool:
    return SubstanceLookupTool(SubstanceLookupSettings())


def test_exact_product_name_gives_one_group(lookup: SubstanceLookupTool) -> None:
    assert lookup.resolve_substance_groups("Co-codamol") == [["codeine", "paracetamol"]]
    assert lookup.resolve_substance_groups("  advil ") == [["ibuprofen"]]


def test_prefix_names_several_products(lookup: SubstanceLookupTool) -> None:
    assert lookup.resolve_substance_groups("asp") == [
        ["acetylsalicylic acid"],
        ["acetylsalicylic acid", "ascorbic acid"],
    ]


def test_substance_and_unknown_labels(lookup: SubstanceLookupTool) -> None:
    assert lookup.resolve_substance_groups("Warfarin") == [["warfarin"]]
    assert lookup.resolve_substance_groups("unobtainium") == []
    assert lookup.resolve_substance_groups("") == []


def test_own_data_file_from_settings(tmp_path: Path) -> None:
    data = tmp_path / "products.json"
    data.write_text(json.dumps({"products": [{"name": "Foo", "substances": ["bar"]}]}))
    tool = SubstanceLookupTool(SubstanceLookupSettings(data_file=data))
    assert tool.resolve_substance_groups("foo") == [["bar"]]
    assert tool.resolve_substance_groups("Advil") == []
    assert tool.execute_with_result(SubstanceQuery(label="foo"), "").text == "foo: bar"


def test_interaction_analysis_calls_the_lookup_directly(lookup: SubstanceLookupTool) -> None:
    calls: list[str] = []

    class Recording(SubstanceLookupTool):
        def resolve_substance_groups(self, label: str) -> list[list[str]]:
            calls.append(label)
            return super().resolve_substance_groups(label)

    tool = InteractionAnalysisTool(Recording(SubstanceLookupSettings()))
    result = tool.execute_with_result(InteractionRequest(products=["Advil", "Marevan"]), "q")
    assert calls == ["Advil", "Marevan"]
    assert result.text.splitlines() == [
        "Advil: ibuprofen",
        "Marevan: warfarin",
        "Advil + Marevan: major - NSAIDs add to warfarin's anticoagulant effect and irritate "
        "the stomach: higher bleeding risk.",
    ]


def test_no_known_interaction_and_unknown_products(lookup: SubstanceLookupTool) -> None:
    tool = InteractionAnalysisTool(lookup)
    text = tool.execute_with_result(
        InteractionRequest(products=["Panadol", "Zocor", "Nothing"]), "q"
    ).text
    assert "Nothing: not in the product data set" in text
    assert text.endswith("no known interaction between these in the data set")


def test_decomposition_leaves_the_task_unchanged(lookup: SubstanceLookupTool) -> None:
    task = TaskInfo(task_no="1", task_prompt="Advil with Coumadin?")
    assert InteractionAnalysisTool(lookup).decompose_into_subtasks(task) is task


def test_installed_plugin_wires_the_lookup_singleton(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "pharma")
    monkeypatch.delenv("TOOLWIRE_CONFIG", raising=False)
    app = App.load()
    analysis = app.tool("pharma.interaction_analysis")
    assert isinstance(analysis, InteractionAnalysisTool)
    assert analysis._lookup is app.tool("substance_lookup", "pharma")
    assert app.container.graph()["pharma.interaction_analysis"] == ["pharma.substance_lookup"]
