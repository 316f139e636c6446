"""What a search tool is asked: the request text helpers shared by the search tools."""

from __future__ import annotations

from toolwire.task import extract_coordinator_task

STATUS_SEPARATOR = "\n\n<status>"
"""Where a deep search subtask's own request ends and its status block begins."""


def without_status_block(text: str) -> str:
    """A request without the status block a deep search round appends to it."""
    return text.split(STATUS_SEPARATOR, 1)[0].strip()


def search_request(text: str) -> str:
    """The request in an execution text: the coordinator's task (or the user's message), without
    a status block."""
    return without_status_block(extract_coordinator_task(text))
