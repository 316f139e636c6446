"""The entry point toolwire loads (``[project.entry-points.toolwire] pharma = ...``)."""

from __future__ import annotations

import toolwire
from toolwire.hookspecs import RegisterConfigFile, RegisterDomain

SAFETY_RULES = """\
You answer questions about medicines for the public. Hard rules:
1. NEVER give a dose for a child under 12: say that a child's dose must come from a pharmacist
   or a doctor, and stop there.
2. Never tell anyone to stop, start or change a prescribed medicine: tell them to ask their
   prescriber.
3. Pregnancy or breastfeeding: tell them to ask a pharmacist or a doctor before taking anything.
4. An emergency (an overdose, trouble breathing, a severe reaction): tell them to call the
   emergency number first.
Answer format: the answer first, in short plain sentences; then the one caution that matters.
Name products and substances exactly as the data set writes them."""
"""The pharma domain's instructions: every model call of the domain reads them. The dosage and
interaction tools give guaranteed answers, which reach the user verbatim; these rules govern
what the model writes around them and every answer it composes."""


@toolwire.hookimpl
def register_domains(register: RegisterDomain) -> None:
    """The pharma domain."""
    register(
        toolwire.DomainSpec(
            name="pharma",
            description="Medicines: active substances of products, interactions and dosage.",
            instructions=SAFETY_RULES,
            prompt_types=["interaction", "dosage", "other"],
        )
    )


@toolwire.hookimpl
def register_config_files(register: RegisterConfigFile) -> None:
    """The tools are declared in YAML shipped inside the package."""
    register("pharma.yaml")
