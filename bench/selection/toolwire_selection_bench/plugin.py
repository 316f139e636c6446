"""The plugin object the selection evaluation loads: ``App.load(plugins=[plugin])``.

It has no entry point on purpose: the synthetic domains exist only to measure tool selection
and routing, and must never appear in an application that merely installs toolwire.
"""

from __future__ import annotations

import toolwire
from toolwire.hookspecs import RegisterConfigFile, RegisterDomain

DOMAIN_DESCRIPTIONS = {
    "geometry": (
        "Geometry and everyday measurements: areas, volumes, lengths, distances between points, "
        "body mass index and unit conversions."
    ),
    "finance": (
        "Personal finance: currency conversion and exchange rates, loans, interest, stock "
        "prices and taxes."
    ),
    "travel": (
        "Travel planning: flights, trains, hotels, rental cars, weather, local time and visas."
    ),
    "office": (
        "Office work: sending and finding email, calendar and meetings, reminders, to-do "
        "tasks and contacts."
    ),
}


@toolwire.hookimpl
def register_domains(register: RegisterDomain) -> None:
    """The four synthetic domains."""
    for name, description in DOMAIN_DESCRIPTIONS.items():
        register(toolwire.DomainSpec(name=name, description=description))


@toolwire.hookimpl
def register_config_files(register: RegisterConfigFile) -> None:
    """The tools are declared in YAML shipped inside the package."""
    register("selection_bench.yaml")
