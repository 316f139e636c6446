"""What a search tool is asked: the request and the query, from the typed execution text."""

from __future__ import annotations

from toolwire.llm.status_bar import agent_status_block
from toolwire.search.index import query_terms
from toolwire.task import ExecutionText, extract_coordinator_task


def search_request(text: str) -> str:
    """The request in an execution text: the coordinator's task (or the user's message)."""
    return extract_coordinator_task(text).strip()


def search_query(query: str, text: str) -> str:
    """The model-extracted ``query`` without the words it could only have taken from the deep
    search round's status block (call counts, round numbers, consulted page ids).

    The parameter extraction reads the status block after the execution text
    (``ExecutionText.status``); a status word in the query would steer the keyword search to
    pages about "calls" or "rounds". Words that also occur in the execution text itself, and
    words the model added on its own, are kept.
    """
    status = text.status if isinstance(text, ExecutionText) else None
    if status is None:
        return query
    leaked = set(query_terms(agent_status_block(status))) - set(query_terms(text))
    return " ".join(word for word in query.split() if not leaked & set(query_terms(word)))
