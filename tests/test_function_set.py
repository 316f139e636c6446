"""The function-spec selection set (bench/selection/functions.yaml) and the app made from it.

An item the check rejects, or a function toolwire's MCP discovery cannot turn into a tool, fails
here, before any evaluation starts a model.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from toolwire.errors import ConfigError
from toolwire.llm import Purpose
from toolwire.mcp.tool import derived_question
from toolwire.orchestrator import DomainOrchestrator
from toolwire.testing import ScriptedModel

SELECTION_DIR = Path(__file__).resolve().parents[1] / "bench" / "selection"
sys.path.insert(0, str(SELECTION_DIR))

from functions import (  # noqa: E402
    FunctionItem,
    check_functions,
    function_set_app,
    load_functions,
)

pytestmark = [
    pytest.mark.usefixtures("block_model_requests"),
    pytest.mark.requires_extra("mcp"),  # the set declares its functions as MCP servers' tools
]


def test_the_set_is_consistent() -> None:
    problems = check_functions(load_functions())
    assert problems == [], "\n".join(str(problem) for problem in problems)


def test_the_set_has_both_kinds_in_both_halves() -> None:
    items = load_functions()
    multiple = [item for item in items if item.kind == "multiple"]
    irrelevance = [item for item in items if item.kind == "irrelevance"]
    assert 40 <= len(multiple) <= 50 and 30 <= len(irrelevance) <= 40
    assert {len(item.functions) for item in multiple} == {2, 3, 4}
    assert {len(item.functions) for item in irrelevance} == {1, 2, 3}
    for kind in (multiple, irrelevance):
        dev = sum(item.split == "dev" for item in kind)
        assert abs(2 * dev - len(kind)) <= 1
    positions = {[f.name for f in item.functions].index(item.expected or "") for item in multiple}
    assert positions == {0, 1, 2, 3}, "the right function is not always in the same place"
    dev, test = load_functions(split="dev"), load_functions(split="test")
    assert {item.split for item in dev} == {"dev"} and {item.split for item in test} == {"test"}
    assert len(dev) + len(test) == len(items)


def _function(name: str, **schema: Any) -> dict[str, Any]:
    parameters = schema or {"type": "object", "properties": {"x": {"type": "number"}}}
    return {"name": name, "description": f"Does {name}.", "parameters": parameters}


def _item(**fields: Any) -> FunctionItem:
    defaults: dict[str, Any] = {
        "id": "x",
        "kind": "multiple",
        "question": "q",
        "functions": [_function("first"), _function("second")],
        "expected": "first",
        "split": "dev",
    }
    return FunctionItem.model_validate({**defaults, **fields})


def test_check_reports_every_inconsistent_item() -> None:
    good = load_functions()
    assert good[0].line is not None
    bad = [
        _item(id="not-offered", question="a", expected="third"),
        _item(
            id="twice",
            question="b",
            functions=[_function("first"), _function("first"), _function("second")],
        ),
        _item(id="clash", question="c", functions=[_function("first"), _function("First")]),
        _item(id="bad-name", question="d", functions=[_function("first"), _function("2nd")]),
        _item(id="no-answer", question="e", expected=None),
        _item(id="an-answer", question="f", kind="irrelevance"),
        _item(id="alone", question="g", functions=[_function("first")]),
        _item(
            id="five",
            question="h",
            kind="irrelevance",
            expected=None,
            functions=[_function(name) for name in ("a", "b", "c", "d")],
        ),
        _item(
            id="not-object",
            question="i",
            functions=[_function("first", type="array"), _function("second")],
        ),
        _item(
            id="untyped",
            question="j",
            functions=[_function("first", type="object", properties={"x": {}}), _function("s")],
        ),
        _item(
            id="required",
            question="k",
            functions=[_function("first", type="object", required=["y"]), _function("s")],
        ),
        _item(id=good[0].id, question="l"),
        _item(id="same-question", question=good[1].question.upper()),
    ]
    problems = [str(problem) for problem in check_functions([*good, *bad])]
    expected = {
        "not-offered": "expected 'third' is not among the item's functions (first, second)",
        "twice": "function name(s) first given twice",
        "clash": "function 'First' becomes the tool name 'first', which is not lower snake case "
        "or is another function's too",
        "bad-name": "function '2nd' becomes the tool name '2nd'",
        "no-answer": "a 'multiple' item names its one right function in 'expected'",
        "an-answer": "an 'irrelevance' item has 'expected: null'",
        "alone": "an item of kind 'multiple' offers 2 to 4 functions, this one 1",
        "five": "an item of kind 'irrelevance' offers 1 to 3 functions, this one 4",
        "not-object": "function 'first': parameters must be a JSON schema with 'type: object'",
        "untyped": "function 'first': parameter 'x' has no 'type'",
        "required": "function 'first': required parameter(s) y not among its properties",
        good[0].id: f"the id is used again (first at line {good[0].line})",
        "same-question": f"the same question as {good[1].id}",
    }
    for ident, text in expected.items():
        assert any(f": {ident}: " in p and text in p for p in problems), (ident, problems)
    # the clash is reported for both spellings
    assert len(problems) == len(expected) + 1


def test_a_malformed_item_is_reported_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "functions.yaml"
    path.write_text(
        "items:\n"
        "  - id: a\n"
        "    kind: multiple\n"
        "    question: hi\n"
        "    functions: []\n"
        "    expected: f\n"
        "    split: train\n"
        "  - {id: b, kind: several, question: hey, functions: [{name: f}], split: dev}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_functions(path)
    problems = [str(problem) for problem in caught.value.problems]
    assert any(
        p.startswith(f"{path}:5: items[0].functions: Tuple should have at") for p in problems
    )
    assert any(
        p.startswith(f"{path}:7: items[0].split: Input should be 'dev' or") for p in problems
    )
    assert any(
        p.startswith(f"{path}:8: items[1].kind: Input should be 'multiple'") for p in problems
    )
    assert any("items[1].functions[0].description: Field required" in p for p in problems)
    assert any("items[1].expected: Field required" in p for p in problems)
    assert any("items[1].functions[0].parameters: Field required" in p for p in problems)
    assert len(problems) == 7  # and items[1].functions, whose one entry is invalid


def test_every_item_becomes_a_domain_of_its_functions_as_tools(isolated: Path) -> None:
    items = load_functions()
    app = function_set_app(items)
    assert app.mcp_discovery.problems == []
    assert set(app.domains) == {item.domain for item in items}
    for item in items:
        orchestrator = DomainOrchestrator(app.domains[item.domain], app.registry, app.tools, None)  # type: ignore[arg-type]
        tools = {tool.qualified_name: tool for tool in orchestrator.selector.catalogue.tools}
        assert set(tools) == {item.tool_name(function.name) for function in item.functions}
        assert item.expected_tools <= set(tools)
        for function in item.functions:
            tool = tools[item.tool_name(function.name)]
            assert tool.description == function.description
            assert tool.question == derived_question(function.description, tool.short_name)
            fields = tool.tool.params_model.model_fields
            assert {f.alias or n for n, f in fields.items()} == set(
                function.parameters["properties"]
            )


def test_a_declared_question_replaces_the_derived_one(isolated: Path) -> None:
    item = load_functions()[0]
    app = function_set_app([item], lambda function: f"Is it {function.name}?")
    orchestrator = DomainOrchestrator(app.domains[item.domain], app.registry, app.tools, None)  # type: ignore[arg-type]
    assert sorted(tool.question for tool in orchestrator.selector.catalogue.tools) == sorted(
        f"Is it {function.name}?" for function in item.functions
    )


async def test_the_native_baseline_offers_each_items_functions_and_scores_the_calls() -> None:
    sys.path.insert(0, str(SELECTION_DIR.parent))
    from eval_functions import evaluate_native

    items = load_functions(split="dev")[:6]
    model = ScriptedModel().on_choose(lambda prompt, names: [names[0]])

    tally = await evaluate_native(items, model, verbose=False)

    calls = model.calls_for(Purpose.CHOICE)
    assert [call.inputs["options"] for call in calls] == [
        [function.name for function in item.functions] for item in items
    ]
    first_is_right = [
        item.expected_tools == {item.tool_name(item.functions[0].name)} for item in items
    ]
    assert (tally.messages, tally.exact) == (6, sum(first_is_right))
