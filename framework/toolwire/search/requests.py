"""What a search tool is asked: the request text helpers shared by the search tools."""

from __future__ import annotations

from toolwire.search.index import query_terms
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


def search_query(query: str, text: str) -> str:
    """The model-extracted ``query`` without the words it could only have taken from the status
    block of ``text`` (call counts, round numbers, consulted page ids).

    The parameter extraction reads the whole execution text, status block included; a status
    word in the query would steer the keyword search to pages about "calls" or "rounds". Words
    that also occur in the request itself, and words the model added on its own, are kept.
    """
    request, _, status = text.partition(STATUS_SEPARATOR)
    leaked = set(query_terms(status)) - set(query_terms(request))
    return " ".join(word for word in query.split() if not leaked & set(query_terms(word)))
