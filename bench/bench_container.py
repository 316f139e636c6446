"""How long ToolContainer.build takes for 100 domains x 10 tools, each autowired to its neighbour.

Run: .venv/bin/python bench/bench_container.py
Prints the build time (plan + check + eager construction), the per-tool cost, and the ratio to
constructing the same objects by hand.
"""

from __future__ import annotations

import logging
import statistics
import time
from typing import Any

import structlog
from pydantic import BaseModel

from toolwire.container import ToolContainer
from toolwire.registry import ToolRegistration, ToolRegistry
from toolwire.tools import ChatbotTool, ToolExecutionResult

DOMAINS = 100
TOOLS_PER_DOMAIN = 10
ROUNDS = 5


class Params(BaseModel):
    text: str = ""


class BenchTool(ChatbotTool[Params]):
    def executable_instruction(self) -> str:
        return "always false"

    def execute_with_result(self, params: Params, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context("")


def _tool_class(index: int, previous: type[BenchTool] | None) -> type[BenchTool]:
    """Tool k takes tool k-1 of its domain by type; tool 0 takes nothing."""
    if previous is None:
        return type(f"Bench{index}Tool", (BenchTool,), {})

    def __init__(self: Any, upstream: Any) -> None:
        self.upstream = upstream

    __init__.__annotations__ = {"upstream": previous, "return": None}
    return type(f"Bench{index}Tool", (BenchTool,), {"__init__": __init__})


def make_registry() -> tuple[ToolRegistry, list[type[BenchTool]]]:
    classes: list[type[BenchTool]] = []
    previous: type[BenchTool] | None = None
    for index in range(TOOLS_PER_DOMAIN):
        previous = _tool_class(index, previous)
        classes.append(previous)
    registry = ToolRegistry()
    for domain in range(DOMAINS):
        for index, tool_class in enumerate(classes):
            registry.add(
                ToolRegistration(
                    short_name=f"tool_{index}",
                    domain=f"domain_{domain}",
                    tool_class=tool_class,
                    plugin=f"plugin_{domain}",
                    priority=index,
                )
            )
    return registry, classes


def by_hand(classes: list[type[BenchTool]]) -> float:
    started = time.perf_counter()
    for _domain in range(DOMAINS):
        upstream: BenchTool | None = None
        for tool_class in classes:
            upstream = tool_class() if upstream is None else tool_class(upstream)  # type: ignore[call-arg]
    return time.perf_counter() - started


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    registry, classes = make_registry()
    tools = len(registry)
    builds = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        container = ToolContainer.build(registry)
        builds.append(time.perf_counter() - started)
    assert len(container.instances()) == tools
    last = container.get(f"domain_0.tool_{TOOLS_PER_DOMAIN - 1}")
    assert last.upstream is container.get(f"domain_0.tool_{TOOLS_PER_DOMAIN - 2}")  # type: ignore[attr-defined]
    hand = statistics.median(by_hand(classes) for _ in range(ROUNDS))
    build = statistics.median(builds)
    print(f"tools: {tools} ({DOMAINS} domains x {TOOLS_PER_DOMAIN}, {tools - DOMAINS} injections)")
    print(f"build (plan + check + construct), median of {ROUNDS}: {build * 1000:.1f} ms")
    print(f"per tool: {build / tools * 1e6:.1f} us")
    print(f"constructing the same objects by hand: {hand * 1000:.2f} ms")
    print(f"ratio container / by hand: {build / hand:.0f}x")


if __name__ == "__main__":
    main()
