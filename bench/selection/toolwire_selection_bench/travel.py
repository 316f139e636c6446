"""The travel domain: flights, trains, places to stay, rental cars, weather, clocks and visas.

Siblings on purpose: searching flights vs. one flight's status vs. an airline's baggage rules,
the forecast vs. the weather right now, the local time vs. the difference between two places,
and hotels vs. rental cars. Every tool only restates its parameters: there is no travel data.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from toolwire import OrchestratorActivatedTool, ToolExecutionResult


def _no_data(what: str) -> ToolExecutionResult:
    return ToolExecutionResult.context(f"{what}: no data (synthetic bench tool).")


class Route(BaseModel):
    origin: str = Field(description="Where the journey starts (city, airport or station)")
    destination: str = Field(description="Where the journey ends (city, airport or station)")
    date: str | None = Field(default=None, description="Day (and time) of travel, if given")


class FlightSearchTool(OrchestratorActivatedTool[Route]):
    """Finds flights between two places on a given day."""

    def executable_instruction(self) -> str:
        return "Does the message ask to find flights from one place to another?"

    def execute_with_result(self, params: Route, text: str) -> ToolExecutionResult:
        return _no_data(f"Flights {params.origin} → {params.destination} on {params.date}")


class FlightNumber(BaseModel):
    flight_number: str = Field(description="The flight's number, e.g. LH 400")
    date: str | None = Field(default=None, description="The day of the flight, if not today")


class FlightStatusTool(OrchestratorActivatedTool[FlightNumber]):
    """Tells whether a given flight is on time, delayed or cancelled, and when it lands."""

    def executable_instruction(self) -> str:
        return (
            "Does the message ask whether a particular flight is on time, delayed, cancelled or "
            "has landed?"
        )

    def execute_with_result(self, params: FlightNumber, text: str) -> ToolExecutionResult:
        return _no_data(f"Status of flight {params.flight_number}")


class TrainTimesTool(OrchestratorActivatedTool[Route]):
    """Lists train departures and connections between two stations."""

    def executable_instruction(self) -> str:
        return "Does the message ask for train times or train connections between two places?"

    def execute_with_result(self, params: Route, text: str) -> ToolExecutionResult:
        return _no_data(f"Trains {params.origin} → {params.destination} on {params.date}")


class StaySearch(BaseModel):
    city: str = Field(description="Where to stay")
    check_in: str | None = Field(default=None, description="Day of arrival")
    nights: int | None = Field(default=None, description="Number of nights")


class HotelSearchTool(OrchestratorActivatedTool[StaySearch]):
    """Finds hotels or other places to stay in a city for some nights."""

    def executable_instruction(self) -> str:
        return "Does the message ask to find a hotel or another place to stay?"

    def execute_with_result(self, params: StaySearch, text: str) -> ToolExecutionResult:
        return _no_data(f"Hotels in {params.city} from {params.check_in}, {params.nights} nights")


class CarHire(BaseModel):
    pickup: str = Field(description="Where the car is picked up (city or airport)")
    start: str | None = Field(default=None, description="Day the rental starts")
    days: int | None = Field(default=None, description="Number of rental days")


class CarRentalTool(OrchestratorActivatedTool[CarHire]):
    """Finds rental cars to pick up at a place for some days."""

    def executable_instruction(self) -> str:
        return "Does the message ask to find a rental car?"

    def execute_with_result(self, params: CarHire, text: str) -> ToolExecutionResult:
        return _no_data(f"Rental cars at {params.pickup} from {params.start}, {params.days} days")


class ForecastQuery(BaseModel):
    place: str = Field(description="City or region")
    when: str | None = Field(default=None, description="The coming day or days asked about")


class WeatherForecastTool(OrchestratorActivatedTool[ForecastQuery]):
    """Gives the weather forecast of a place for the coming days."""

    def executable_instruction(self) -> str:
        return "Does the message ask for the weather forecast of a place for a coming day or days?"

    def execute_with_result(self, params: ForecastQuery, text: str) -> ToolExecutionResult:
        return _no_data(f"Forecast for {params.place} ({params.when})")


class Place(BaseModel):
    place: str = Field(description="City, region or time zone")


class CurrentWeatherTool(OrchestratorActivatedTool[Place]):
    """Gives the weather in a place right now: temperature, rain, wind."""

    def executable_instruction(self) -> str:
        return "Does the message ask what the weather is like in a place right now?"

    def execute_with_result(self, params: Place, text: str) -> ToolExecutionResult:
        return _no_data(f"Current weather in {params.place}")


class LocalTimeTool(OrchestratorActivatedTool[Place]):
    """Gives the current local time in a city or time zone."""

    def executable_instruction(self) -> str:
        return "Does the message ask what time it is now in a city or time zone?"

    def execute_with_result(self, params: Place, text: str) -> ToolExecutionResult:
        return _no_data(f"Local time in {params.place}")


class TwoPlaces(BaseModel):
    place_a: str = Field(description="The first city or time zone")
    place_b: str = Field(description="The second city or time zone")


class TimeDifferenceTool(OrchestratorActivatedTool[TwoPlaces]):
    """Gives how many hours apart the clocks of two places are."""

    def executable_instruction(self) -> str:
        return "Does the message ask for the time difference between two places?"

    def execute_with_result(self, params: TwoPlaces, text: str) -> ToolExecutionResult:
        return _no_data(f"Time difference between {params.place_a} and {params.place_b}")


class BaggageQuery(BaseModel):
    airline: str = Field(description="The airline")
    fare: str | None = Field(default=None, description="Fare or cabin class, e.g. economy")


class BaggageAllowanceTool(OrchestratorActivatedTool[BaggageQuery]):
    """Gives an airline's baggage allowance (cabin and checked bags) for a fare class."""

    def executable_instruction(self) -> str:
        return "Does the message ask how much luggage an airline allows a passenger to bring?"

    def execute_with_result(self, params: BaggageQuery, text: str) -> ToolExecutionResult:
        return _no_data(f"Baggage allowance of {params.airline} ({params.fare})")


class EntryQuery(BaseModel):
    nationality: str = Field(description="The traveller's citizenship or passport")
    destination: str = Field(description="The country to be visited")


class VisaRequirementsTool(OrchestratorActivatedTool[EntryQuery]):
    """Tells whether a traveller of a nationality needs a visa to enter a country."""

    def executable_instruction(self) -> str:
        return "Does the message ask whether a traveller needs a visa to enter a country?"

    def execute_with_result(self, params: EntryQuery, text: str) -> ToolExecutionResult:
        return _no_data(
            f"Visa rules for {params.nationality} citizens visiting {params.destination}"
        )
