"""The entry point toolwire loads (``[project.entry-points.toolwire] pydocs = ...``)."""

from __future__ import annotations

import toolwire
from toolwire.hookspecs import RegisterConfigFile, RegisterDomain

PROMPT_TYPES = ["definition", "how_to", "comparison"]


@toolwire.hookimpl
def register_domains(register: RegisterDomain) -> None:
    """The pydocs domain; the deep search backs how-to and comparison questions only."""
    register(
        toolwire.DomainSpec(
            name="pydocs",
            description=(
                "Python: the language reference and standard-library documentation shipped with "
                "the interpreter."
            ),
            prompt_types=PROMPT_TYPES,
            rag_tool="docs_search",
            deep_fallback={"how_to": "deep_search", "comparison": "deep_search"},
        )
    )


@toolwire.hookimpl
def register_config_files(register: RegisterConfigFile) -> None:
    """The tools are declared in YAML shipped inside the package."""
    register("pydocs.yaml")
