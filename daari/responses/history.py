"""previous_response_id: a request continues a stored response by carrying its whole history.

daari resolves the chain itself (every upstream kind, and the cache key, then see the whole conversation):
the stored input and output come first, then the request's own input. As in OpenAI's API, the previous
response's `instructions` are not carried over.
"""

from __future__ import annotations

from typing import Any

from daari.errors import NotFound
from daari.responses.store import StoredResponse


def input_items(value: object) -> list[dict[str, Any]]:
    """A request's `input` as a list of items (a string is one user message)."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, dict)]
    return []


def previous_not_found(response_id: str) -> NotFound:
    return NotFound(f"Previous response with id '{response_id}' not found.", param="previous_response_id",
                    code="previous_response_not_found")


def with_history(body: dict[str, Any], previous: StoredResponse) -> dict[str, Any]:
    """`body` with the previous response's input and output before its own input."""
    return {**body, "input": [*previous.input_items, *previous.output_items, *input_items(body.get("input"))]}
