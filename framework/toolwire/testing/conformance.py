"""A test mixin plugin authors inherit to check their tool classes.

::

    from toolwire.testing import ToolConformance

    class TestLookupTool(ToolConformance):
        tool_class = LookupTool

        def make_tool(self) -> LookupTool:      # only when the constructor needs arguments
            return LookupTool(substances=FakeSubstances())
"""

from __future__ import annotations

import inspect
import json
from typing import Any, ClassVar

from toolwire.tools import (
    AgentCoordinator,
    ChatbotTool,
    execute_method_problems,
    validate_tool_class,
)


class ToolConformance:
    """Checks every tool class must pass; set ``tool_class``, override ``make_tool`` if needed.

    A class left abstract (a misspelt abstract method) fails ``test_tool_class_is_valid``, which
    names the method; the checks of a built tool, which cannot be made, leave it to that one."""

    tool_class: ClassVar[type[ChatbotTool[Any]]]

    def make_tool(self) -> ChatbotTool[Any]:
        """An instance to check; the default calls the class without arguments."""
        return self.tool_class()

    def test_tool_class_is_valid(self) -> None:
        """What registration checks: abstract methods (a misspelt one named with the closest
        method defined), the parameter model, the name, the priority, the examples."""
        validate_tool_class(self.tool_class)

    def test_activated_tool_defines_execute_with_result(self) -> None:
        """A misspelt ``execute_with_result`` leaves the base's, which raises at the first
        question that activates the tool: said here by name, with the closest method defined
        (checked on ``make_tool()``, as the app checks a built tool: one that sets the method
        in ``__init__`` has one)."""
        if inspect.isabstract(self.tool_class):
            return  # it cannot be built: test_tool_class_is_valid names what it leaves out
        problems = execute_method_problems(self.make_tool())
        assert not problems, f"{self.tool_class.__qualname__}: {'; '.join(problems)}"

    def test_params_schema_is_json_serialisable(self) -> None:
        schema = self.tool_class.params_model.model_json_schema()
        assert json.loads(json.dumps(schema)) == schema

    def test_executable_instruction_is_not_empty(self) -> None:
        if inspect.isabstract(self.tool_class):
            return  # it cannot be built: test_tool_class_is_valid names what it leaves out
        instruction = self.make_tool().executable_instruction()
        assert isinstance(instruction, str) and instruction.strip(), (
            f"{self.tool_class.__name__}.executable_instruction() must return the yes/no "
            "suitability question (use an always-no question for coordinator-only tools)"
        )

    def test_coordinator_implements_decomposition(self) -> None:
        if issubclass(self.tool_class, AgentCoordinator):
            method = self.tool_class.decompose_into_subtasks
            assert not getattr(method, "__isabstractmethod__", False)
