"""The README's examples are promises: every Python block runs and every YAML block is valid."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from toolwire.config import AppConfig, parse_file

README = Path(__file__).resolve().parent.parent / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_the_readme_has_python_and_yaml_examples() -> None:
    assert len(_blocks("python")) >= 3
    assert len(_blocks("yaml")) >= 1


def test_every_python_block_runs() -> None:
    namespace: dict[str, object] = {"__name__": "readme_example"}
    for block in _blocks("python"):
        exec(compile(block, str(README), "exec"), namespace)


def test_the_injection_example_calls_the_injected_tool() -> None:
    namespace: dict[str, object] = {"__name__": "readme_example"}
    exec(compile(_blocks("python")[0], str(README), "exec"), namespace)
    stock = namespace["StockLookupTool"]()  # type: ignore[operator]
    availability = namespace["AvailabilityTool"](stock)  # type: ignore[operator]
    params = namespace["StockQuery"](product="Kettle")  # type: ignore[operator]
    assert availability.execute_with_result(params, "").text == "Kettle: 3 in stock"


@pytest.mark.parametrize("index", range(len(_blocks("yaml"))))
def test_every_yaml_block_is_a_valid_configuration(index: int, tmp_path: Path) -> None:
    path = tmp_path / "example.yaml"
    path.write_text(_blocks("yaml")[index], encoding="utf-8")
    _, problems = parse_file(path, AppConfig)
    assert problems == []
