"""What the selection probes (``bench/probe_*.py``) share: their command line, and the embedded
model with the selection app and one orchestrator per domain over it."""

from __future__ import annotations

import argparse
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import structlog
from labelled import Split, selection_app

from toolwire import App
from toolwire.llm import LanguageModel, create_language_model
from toolwire.orchestrator import DomainOrchestrator
from toolwire.settings import LLMSettings, OrchestratorSettings


def split_argument(description: str | None) -> Split:
    """The probe's ``--split`` (dev by default: the split the prompts are tuned on)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--split", choices=["dev", "test"], default="dev")
    split: Split = parser.parse_args().split
    return split


@dataclass(frozen=True)
class Probing:
    llm: LanguageModel
    app: App
    orchestrators: dict[str, DomainOrchestrator]
    """Domain name → its orchestrator, built with the probe's settings."""


@asynccontextmanager
async def embedded_probing(settings: OrchestratorSettings) -> AsyncIterator[Probing]:
    """The embedded model and the selection app over it, both closed on exit."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    llm = create_language_model(LLMSettings(), environ={})
    app = selection_app(llm=llm)
    try:
        orchestrators = {
            name: DomainOrchestrator(domain, app.registry, app.tools, llm, settings)
            for name, domain in app.domains.items()
        }
        yield Probing(llm, app, orchestrators)
    finally:
        await llm.aclose()
        await app.aclose()


@dataclass
class YesNoTally:
    """A way of asking, over pairs whose right answer is known: the right yeses and noes, and
    the pairs it got wrong."""

    yes: int = 0
    no: int = 0
    wrong: list[str] = field(default_factory=list)

    def add(self, answer: bool, right: bool, pair: str) -> None:
        self.yes += answer and right
        self.no += not answer and not right
        if answer != right:
            self.wrong.append(pair)

    def wrong_text(self) -> str:
        return " ".join(self.wrong) or "-"
