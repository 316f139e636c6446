"""The geometry domain: areas, volumes, lengths, body mass index and unit conversions.

Siblings on purpose: three circle tools (area, circumference, sphere volume), three triangle or
point tools (area, hypotenuse, distance between points), three areas (triangle, rectangle, under
a curve) and two unit conversions (length, temperature).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pydantic import BaseModel, Field

from toolwire import OrchestratorActivatedTool, ToolExecutionResult

METRES_PER_UNIT = {
    "mm": 0.001,
    "cm": 0.01,
    "m": 1.0,
    "km": 1000.0,
    "in": 0.0254,
    "ft": 0.3048,
    "yd": 0.9144,
    "mi": 1609.344,
}
UNIT_SYMBOLS = {
    "millimetre": "mm",
    "millimeter": "mm",
    "centimetre": "cm",
    "centimeter": "cm",
    "metre": "m",
    "meter": "m",
    "kilometre": "km",
    "kilometer": "km",
    "inch": "in",
    "inches": "in",
    "foot": "ft",
    "feet": "ft",
    "yard": "yd",
    "mile": "mi",
}
"""Unit names (singular, or plural without a final s) → the symbols of METRES_PER_UNIT."""

TO_CELSIUS: dict[str, Callable[[float], float]] = {
    "c": lambda value: value,
    "f": lambda value: (value - 32) * 5 / 9,
    "k": lambda value: value - 273.15,
}
FROM_CELSIUS: dict[str, Callable[[float], float]] = {
    "c": lambda value: value,
    "f": lambda value: value * 9 / 5 + 32,
    "k": lambda value: value + 273.15,
}


class TriangleParams(BaseModel):
    base: float = Field(description="Length of the triangle's base")
    height: float = Field(description="Height of the triangle, perpendicular to its base")


class TriangleAreaTool(OrchestratorActivatedTool[TriangleParams]):
    """Computes the area of a triangle from its base and height."""

    def executable_instruction(self) -> str:
        return "Does the message ask for the area of a triangle?"

    def execute_with_result(self, params: TriangleParams, text: str) -> ToolExecutionResult:
        area = params.base * params.height / 2
        return ToolExecutionResult.context(f"Triangle area: {area:g} square units.")


class RightTriangleLegs(BaseModel):
    leg_a: float = Field(description="Length of one side next to the right angle")
    leg_b: float = Field(description="Length of the other side next to the right angle")


class HypotenuseTool(OrchestratorActivatedTool[RightTriangleLegs]):
    """Computes the hypotenuse of a right triangle from the two sides at its right angle."""

    def executable_instruction(self) -> str:
        return (
            "Does the message ask for the length of the longest side (the hypotenuse) of a "
            "right triangle whose two other sides are given?"
        )

    def execute_with_result(self, params: RightTriangleLegs, text: str) -> ToolExecutionResult:
        length = math.hypot(params.leg_a, params.leg_b)
        return ToolExecutionResult.context(f"Hypotenuse: {length:g} units.")


class TwoPoints(BaseModel):
    x1: float = Field(description="x coordinate of the first point")
    y1: float = Field(description="y coordinate of the first point")
    x2: float = Field(description="x coordinate of the second point")
    y2: float = Field(description="y coordinate of the second point")


class PointDistanceTool(OrchestratorActivatedTool[TwoPoints]):
    """Computes the straight-line distance between two points given by their coordinates."""

    def executable_instruction(self) -> str:
        return (
            "Does the message ask for the straight-line distance between two points given by "
            "their coordinates?"
        )

    def execute_with_result(self, params: TwoPoints, text: str) -> ToolExecutionResult:
        distance = math.dist((params.x1, params.y1), (params.x2, params.y2))
        return ToolExecutionResult.context(f"Distance between the points: {distance:g} units.")


class Radius(BaseModel):
    radius: float = Field(description="Radius (half the diameter)")


class CircleAreaTool(OrchestratorActivatedTool[Radius]):
    """Computes the area of a circle (a disc) from its radius."""

    def executable_instruction(self) -> str:
        return "Does the message ask for the area of a circle?"

    def execute_with_result(self, params: Radius, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(
            f"Circle area: {math.pi * params.radius**2:.4g} square units."
        )


class CircleCircumferenceTool(OrchestratorActivatedTool[Radius]):
    """Computes the circumference (the perimeter) of a circle from its radius."""

    def executable_instruction(self) -> str:
        return "Does the message ask for the circumference (the length around) of a circle?"

    def execute_with_result(self, params: Radius, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(
            f"Circumference: {2 * math.pi * params.radius:.4g} units."
        )


class SphereVolumeTool(OrchestratorActivatedTool[Radius]):
    """Computes the volume of a sphere (a ball) from its radius."""

    def executable_instruction(self) -> str:
        return "Does the message ask for the volume of a sphere or ball?"

    def execute_with_result(self, params: Radius, text: str) -> ToolExecutionResult:
        volume = 4 / 3 * math.pi * params.radius**3
        return ToolExecutionResult.context(f"Sphere volume: {volume:.4g} cubic units.")


class RectangleParams(BaseModel):
    length: float = Field(description="Length of the rectangle")
    width: float = Field(description="Width of the rectangle (equal to the length for a square)")


class RectangleAreaTool(OrchestratorActivatedTool[RectangleParams]):
    """Computes the area of a rectangle or a square from its length and width."""

    def executable_instruction(self) -> str:
        return "Does the message ask for the area of a rectangle or a square?"

    def execute_with_result(self, params: RectangleParams, text: str) -> ToolExecutionResult:
        area = params.length * params.width
        return ToolExecutionResult.context(f"Rectangle area: {area:g} square units.")


class CurveParams(BaseModel):
    function: str = Field(description="The function of x, e.g. 'x**2' or 'sin(x)'")
    lower: float = Field(description="Lower bound of x")
    upper: float = Field(description="Upper bound of x")


class CurveAreaTool(OrchestratorActivatedTool[CurveParams]):
    """Computes the area under the graph of a function between two x values (its integral)."""

    def executable_instruction(self) -> str:
        return (
            "Does the message ask for the area under the curve of a function between two "
            "x values, that is its definite integral?"
        )

    def execute_with_result(self, params: CurveParams, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(
            f"Area under f(x) = {params.function} from x = {params.lower:g} to "
            f"{params.upper:g} (synthetic bench tool: the integral is not evaluated)."
        )


class BodyMeasurements(BaseModel):
    weight_kg: float = Field(description="Body weight in kilograms")
    height_m: float = Field(description="Body height in metres")


class BmiTool(OrchestratorActivatedTool[BodyMeasurements]):
    """Computes a person's body mass index (BMI) from weight and height."""

    def executable_instruction(self) -> str:
        return "Does the message ask for a person's body mass index (BMI)?"

    def execute_with_result(self, params: BodyMeasurements, text: str) -> ToolExecutionResult:
        if params.height_m <= 0:
            return ToolExecutionResult.context("A BMI needs a height above zero.")
        bmi = params.weight_kg / params.height_m**2
        return ToolExecutionResult.context(f"Body mass index: {bmi:.1f}.")


class UnitConversion(BaseModel):
    value: float = Field(description="The quantity to convert")
    from_unit: str = Field(description="The unit the quantity is given in")
    to_unit: str = Field(description="The unit wanted")


def _length_symbol(unit: str) -> str:
    folded = unit.strip().lower()
    return UNIT_SYMBOLS.get(folded) or UNIT_SYMBOLS.get(folded.removesuffix("s"), folded)


class LengthConversionTool(OrchestratorActivatedTool[UnitConversion]):
    """Converts a length or distance between units (mm, cm, m, km, inches, feet, yards, miles)."""

    def executable_instruction(self) -> str:
        return "Does the message ask to convert a length or a distance from one unit to another?"

    def execute_with_result(self, params: UnitConversion, text: str) -> ToolExecutionResult:
        source = METRES_PER_UNIT.get(_length_symbol(params.from_unit))
        target = METRES_PER_UNIT.get(_length_symbol(params.to_unit))
        if source is None or target is None:
            known = ", ".join(METRES_PER_UNIT)
            return ToolExecutionResult.context(f"Length units known here: {known}.")
        converted = params.value * source / target
        return ToolExecutionResult.context(
            f"{params.value:g} {params.from_unit} = {converted:.4g} {params.to_unit}."
        )


class TemperatureConversionTool(OrchestratorActivatedTool[UnitConversion]):
    """Converts a temperature between degrees Celsius, degrees Fahrenheit and kelvin."""

    def executable_instruction(self) -> str:
        return (
            "Does the message ask to convert a temperature between Celsius, Fahrenheit and Kelvin?"
        )

    def execute_with_result(self, params: UnitConversion, text: str) -> ToolExecutionResult:
        source = params.from_unit.strip().lstrip("°").lower()[:1]
        target = params.to_unit.strip().lstrip("°").lower()[:1]
        if source not in TO_CELSIUS or target not in FROM_CELSIUS:
            return ToolExecutionResult.context("Temperature units known here: C, F, K.")
        converted = FROM_CELSIUS[target](TO_CELSIUS[source](params.value))
        return ToolExecutionResult.context(
            f"{params.value:g} {params.from_unit} = {converted:.4g} {params.to_unit}."
        )
