"""The labelled tool-selection set (bench/selection/labelled.yaml) and its synthetic domains.

A label the installed tools contradict fails here, before any evaluation starts a model.
"""

from __future__ import annotations

import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolwire import App
from toolwire.errors import ConfigError
from toolwire.tools import ResultKind

SELECTION_DIR = Path(__file__).resolve().parents[1] / "bench" / "selection"
sys.path.insert(0, str(SELECTION_DIR))

from labelled import (  # noqa: E402
    LabelledMessage,
    check_labelled,
    figures,
    load_labelled,
    selectable_tools,
    selection_app,
)

SYNTHETIC_DOMAINS = ("geometry", "finance", "travel", "office")


@pytest.fixture
def app(isolated: Path, block_model_requests: None) -> App:
    """The app the set is labelled against; no configuration file, no model."""
    return selection_app()


def test_the_set_agrees_with_the_installed_tools(app: App) -> None:
    problems = check_labelled(load_labelled(), app)
    assert problems == [], "\n".join(str(problem) for problem in problems)


def test_the_set_is_as_large_and_as_hard_as_the_issue_asks(app: App) -> None:
    counted = figures(load_labelled(), app)
    labelled_tools = [tool for tool, uses in counted.messages_per_tool.items() if uses.total()]
    assert counted.total >= 180
    assert len(labelled_tools) >= 40
    assert len({tool.split(".")[0] for tool in labelled_tools}) >= 4
    assert 0.25 <= counted.share(counted.near_miss_or_off_topic) <= 0.35
    assert 0.12 <= counted.share(counted.two_tools) <= 0.18
    assert abs(counted.per_split["dev"] - counted.per_split["test"]) <= counted.total * 0.1
    off_topic = counted.per_domain["null"]["off-topic"]
    near_misses = sum(kinds["near miss"] for kinds in counted.per_domain.values())
    assert abs(off_topic - near_misses) <= 0.2 * counted.near_miss_or_off_topic


def test_load_keeps_one_split() -> None:
    everything = load_labelled()
    dev, test = load_labelled(split="dev"), load_labelled(split="test")
    assert {m.split for m in dev} == {"dev"} and {m.split for m in test} == {"test"}
    assert len(dev) + len(test) == len(everything)


def _message(**fields: Any) -> LabelledMessage:
    defaults: dict[str, Any] = {"id": "x", "message": "m", "domain": "geometry", "split": "dev"}
    return LabelledMessage.model_validate({**defaults, **fields})


def test_check_reports_every_contradicted_label(app: App) -> None:
    good = load_labelled()
    assert good[0].line is not None
    bmi_example = app.registry.resolve("geometry.bmi").examples[0]
    bad = [
        _message(id="unknown", message="a", tools=["geometry.triangle_areas"]),
        _message(
            id="not-activated", message="b", domain="pharma", tools=["pharma.substance_lookup"]
        ),
        _message(id="coordinator-only", message="c", domain="pydocs", tools=["pydocs.docs_search"]),
        _message(id="other-domain", message="d", domain="finance", tools=["geometry.bmi"]),
        _message(id="off-topic-with-tool", message="e", domain=None, tools=["geometry.bmi"]),
        _message(id="unknown-domain", message="f", domain="astrology"),
        _message(id="twice", message="g", tools=["geometry.bmi", "geometry.bmi"]),
        _message(id=good[0].id, message="h"),
        _message(id="same-text", message=good[1].message.upper()),
        _message(id="an-example", message=bmi_example, tools=["geometry.bmi"]),
    ]
    problems = [str(problem) for problem in check_labelled([*good, *bad], app)]
    expected = {
        "unknown": "unknown tool 'geometry.triangle_areas'; did you mean geometry.triangle_area",
        "not-activated": "'pharma.substance_lookup' is never selected",
        "coordinator-only": "'pydocs.docs_search' is never selected",
        "other-domain": "belongs to domain 'geometry', not to the message's domain 'finance'",
        "off-topic-with-tool": "not to the message's domain None",
        "unknown-domain": "unknown domain 'astrology'",
        "twice": "a tool is listed twice",
        good[0].id: f"the id is used again (first at line {good[0].line})",
        "same-text": f"the same message as {good[1].id}",
        "an-example": "tool 'geometry.bmi' declares this message among its examples",
    }
    for ident, text in expected.items():
        assert any(f"{ident}: " in p and text in p for p in problems), (ident, problems)
    assert len(problems) == len(expected)


def test_check_reports_a_tool_the_set_leaves_untested(app: App) -> None:
    without_bmi = [m for m in load_labelled() if "geometry.bmi" not in m.tools]
    only_dev = [
        m for m in load_labelled() if "geometry.sphere_volume" not in m.tools or m.split == "dev"
    ]
    assert [str(p) for p in check_labelled(without_bmi, app)] == [
        f"{SELECTION_DIR / 'labelled.yaml'}: tool 'geometry.bmi' is labelled on 0 message(s); "
        "every selectable tool needs at least 2"
    ]
    assert any(
        "'geometry.sphere_volume' has no message in the 'test' split" in str(p)
        for p in check_labelled(only_dev, app)
    )


def test_a_malformed_entry_is_reported_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "labelled.yaml"
    path.write_text(
        "messages:\n"
        "  - {id: a, message: hi, domain: null, tools: [], split: dev}\n"
        "  - id: b\n"
        "    message: hello\n"
        "    domain: null\n"
        "    split: train\n"
        "  - {id: c, domain: null, split: test, tool: []}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_labelled(path)
    problems = [str(problem) for problem in caught.value.problems]
    assert problems[0].startswith(f"{path}:6: messages[1].split: Input should be 'dev' or 'test'")
    assert any(p.startswith(f"{path}:7: messages[2].message: Field required") for p in problems)
    assert any(p.startswith(f"{path}:7: messages[2].tool: Extra inputs") for p in problems)
    assert len(problems) == 3


# -- the synthetic domains ----------------------------------------------------------------------


def _sample(annotation: Any) -> Any:
    """A plausible value for a parameter field of the synthetic tools."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else ()
    kind = next((option for option in options if option is not type(None)), annotation)
    samples: dict[Any, Any] = {float: 2.0, int: 3, str: "USD", list[str]: ["Ann", "Ben"]}
    return samples[kind]


def _synthetic_tools(app: App) -> list[str]:
    return [tool for domain in SYNTHETIC_DOMAINS for tool in selectable_tools(app)[domain]]


def test_synthetic_domains_have_about_ten_described_tools_each_a_third_with_examples(
    app: App,
) -> None:
    for domain in SYNTHETIC_DOMAINS:
        assert app.domains[domain].description.endswith(".")
        assert 9 <= len(selectable_tools(app)[domain]) <= 12, domain
    for name in _synthetic_tools(app):
        tool = app.tools[name]
        docstring = (type(tool).__doc__ or "").strip()
        question = tool.executable_instruction()
        assert docstring and "\n" not in docstring, name
        assert question.startswith("Does the message ask") and question.endswith("?"), name
        fields = type(tool).params_model.model_fields
        assert fields and all(field.description for field in fields.values()), name
    with_examples = [name for name in _synthetic_tools(app) if app.registry.resolve(name).examples]
    assert 0.25 <= len(with_examples) / len(_synthetic_tools(app)) <= 0.45


def test_synthetic_tools_answer_from_their_parameters_alone(app: App) -> None:
    for name in _synthetic_tools(app):
        tool = app.tools[name]
        model: type[BaseModel] = type(tool).params_model
        params = model.model_validate(
            {key: _sample(field.annotation) for key, field in model.model_fields.items()}
        )
        first, again = tool.execute_with_result(params, ""), tool.execute_with_result(params, "")
        assert not isinstance(first, typing.Awaitable), name
        assert first.kind is ResultKind.CONTEXT and first.text.strip(), name
        assert first == again, name


def test_synthetic_tools_compute_what_they_describe(app: App) -> None:
    def run(name: str, **params: Any) -> str:
        tool = app.tools[name]
        result = tool.execute_with_result(type(tool).params_model.model_validate(params), "")
        assert not isinstance(result, typing.Awaitable)
        return result.text

    assert "35" in run("geometry.triangle_area", base=10, height=7)
    assert "13" in run("geometry.hypotenuse", leg_a=5, leg_b=12)
    assert "42.16 km" in run(
        "geometry.length_conversion", value=26.2, from_unit="miles", to_unit="km"
    )
    assert "212" in run("geometry.temperature_conversion", value=100, from_unit="°C", to_unit="F")
    assert "1,266.71" in run(
        "finance.loan_payment", principal=250_000, annual_rate_percent=4.5, years=30
    )
    assert "never paid off" in run(
        "finance.loan_payoff_time", balance=10_000, annual_rate_percent=24, monthly_payment=100
    )
    assert "720.00" in run(
        "finance.simple_interest", principal=4000, annual_rate_percent=6, years=3
    )
