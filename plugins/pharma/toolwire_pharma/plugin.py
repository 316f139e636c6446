"""The entry point toolwire loads (``[project.entry-points.toolwire] pharma = ...``)."""

from __future__ import annotations

import toolwire
from toolwire.hookspecs import RegisterConfigFile, RegisterDomain


@toolwire.hookimpl
def register_domains(register: RegisterDomain) -> None:
    """The pharma domain."""
    register(
        toolwire.DomainSpec(
            name="pharma",
            description="Medicines: active substances of products, interactions and dosage.",
            prompt_types=["interaction", "dosage", "other"],
        )
    )


@toolwire.hookimpl
def register_config_files(register: RegisterConfigFile) -> None:
    """The tools are declared in YAML shipped inside the package."""
    register("pharma.yaml")
