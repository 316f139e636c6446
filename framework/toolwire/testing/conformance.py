"""A test mixin plugin authors inherit to check their tool classes.

::

    from toolwire.testing import ToolConformance

    class TestLookupTool(ToolConformance):
        tool_class = LookupTool

        def make_tool(self) -> LookupTool:      # only when the constructor needs arguments
            return LookupTool(substances=FakeSubstances())
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from toolwire.tools import (
    AgentCoordinator,
    ChatbotTool,
    unimplemented_method_problems,
    validate_tool_class,
)


class ToolConformance:
    """Checks every tool class must pass; set ``tool_class``, override ``make_tool`` if needed."""

    tool_class: ClassVar[type[ChatbotTool[Any]]]

    def make_tool(self) -> ChatbotTool[Any]:
        """An instance to check; the default calls the class without arguments."""
        return self.tool_class()

    def test_tool_class_is_valid(self) -> None:
        validate_tool_class(self.tool_class)

    def test_tool_implements_the_methods_its_kind_runs(self) -> None:
        """A misspelt ``execute_with_result`` leaves the base's, which raises at the first
        question that activates the tool: said here by name, with the closest method defined."""
        problems = unimplemented_method_problems(self.tool_class)
        assert not problems, f"{self.tool_class.__qualname__}: {'; '.join(problems)}"

    def test_params_schema_is_json_serialisable(self) -> None:
        schema = self.tool_class.params_model.model_json_schema()
        assert json.loads(json.dumps(schema)) == schema

    def test_executable_instruction_is_not_empty(self) -> None:
        instruction = self.make_tool().executable_instruction()
        assert isinstance(instruction, str) and instruction.strip(), (
            f"{self.tool_class.__name__}.executable_instruction() must return the yes/no "
            "suitability question (use an always-no question for coordinator-only tools)"
        )

    def test_coordinator_implements_decomposition(self) -> None:
        if issubclass(self.tool_class, AgentCoordinator):
            method = self.tool_class.decompose_into_subtasks
            assert not getattr(method, "__isabstractmethod__", False)
