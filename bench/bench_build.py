"""How long App.load takes for 100 plugins × 10 tools (the goal: well under a second).

Half of each plugin's tools are registered through the ``register_tools`` hook, half are
declared in a YAML file the plugin ships; every second tool receives its neighbour by type.
Run: ``.venv/bin/python bench/bench_build.py [plugins] [tools_per_plugin]``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import toolwire
from toolwire import App, ChatbotTool, OrchestratorActivatedTool, ToolExecutionResult


class Params(BaseModel):
    text: str = ""


def _new_class(name: str, base: Any, namespace: dict[str, Any]) -> type:
    return types.new_class(name, (base,), exec_body=lambda ns: ns.update(namespace))


def make_tool_classes(module: types.ModuleType, count: int) -> list[type]:
    classes: list[type] = []
    for index in range(count):
        if index % 2 == 0:

            def instruction(self: Any) -> str:
                return "always false"

            namespace: dict[str, Any] = {"executable_instruction": instruction}
            cls = _new_class(f"Service{index}Tool", ChatbotTool[Params], namespace)
        else:
            dependency = classes[-1]

            def init(self: Any, helper: Any) -> None:
                self.helper = helper

            init.__annotations__ = {"helper": dependency, "return": None}

            def instruction(self: Any) -> str:
                return "Is it relevant?"

            def execute(self: Any, params: Params, text: str) -> ToolExecutionResult:
                return ToolExecutionResult.context(text)

            namespace = {
                "__init__": init,
                "executable_instruction": instruction,
                "execute_with_result": execute,
            }
            cls = _new_class(f"Worker{index}Tool", OrchestratorActivatedTool[Params], namespace)
        cls.__module__ = module.__name__
        setattr(module, cls.__name__, cls)
        classes.append(cls)
    return classes


def make_plugin(number: int, tools: int, folder: Path) -> types.ModuleType:
    name = f"bench_plugin_{number}"
    module = types.ModuleType(name)
    sys.modules[name] = module
    classes = make_tool_classes(module, tools)
    domain = f"domain_{number}"
    hooked, declared = classes[: tools // 2], classes[tools // 2 :]
    yaml_file = folder / f"{name}.yaml"
    yaml_file.write_text(
        "tools:\n"
        + "".join(
            f"  - {{class: '{name}:{cls.__name__}', domain: {domain}, priority: {i}}}\n"
            for i, cls in enumerate(declared)
        )
    )

    @toolwire.hookimpl
    def register_domains(register: Any) -> None:
        register(toolwire.DomainSpec(name=domain))

    @toolwire.hookimpl
    def register_tools(register: Any) -> None:
        for cls in hooked:
            register(cls)

    @toolwire.hookimpl
    def register_config_files(register: Any) -> None:
        register(yaml_file)

    module.register_domains = register_domains  # type: ignore[attr-defined]
    module.register_tools = register_tools  # type: ignore[attr-defined]
    module.register_config_files = register_config_files  # type: ignore[attr-defined]
    return module


def main() -> None:
    plugin_count = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    tools_per_plugin = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    with tempfile.TemporaryDirectory() as folder:
        plugins = [make_plugin(n, tools_per_plugin, Path(folder)) for n in range(plugin_count)]
        empty_config = Path(folder) / "app.yaml"
        empty_config.write_text("{}\n")
        timings = []
        for _ in range(5):
            started = time.perf_counter()
            app = App.load(empty_config, plugins=plugins, load_entry_points=False)
            timings.append(time.perf_counter() - started)
    tools = len(app.registry)
    assert tools == plugin_count * tools_per_plugin and len(app.tools) == tools
    best, median = min(timings), statistics.median(timings)
    print(
        f"plugins: {plugin_count}, tools: {tools}, injected edges: "
        f"{sum(len(v) for v in app.container.graph().values())}"
    )
    print(f"App.load best   {best * 1000:8.1f} ms   {best / tools * 1e6:7.1f} µs per tool")
    print(f"App.load median {median * 1000:8.1f} ms   {median / tools * 1e6:7.1f} µs per tool")
    print(f"goal 1000 ms: best is {best:.2f}× of the budget")


if __name__ == "__main__":
    main()
