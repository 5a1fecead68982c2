"""GET /v1/responses/{id}/input_items: a stored response's input as OpenAI lists it (a cursor page).

Items a client sent without an id get a stable one from their position (`item_<n>_<response suffix>`), so
`after` pagination works; string message content is listed as one input_text (output_text for assistant) part.
"""

from __future__ import annotations

from typing import Any

from daari.errors import InvalidRequest

DEFAULT_LIMIT = 20
MAX_LIMIT = 100


def _listed(item: dict[str, Any], index: int, response_id: str) -> dict[str, Any]:
    out = dict(item)
    out.setdefault("id", f"item_{index}_{response_id.removeprefix('resp_')[:12]}")
    if (out.get("type") or "message") == "message":
        out["type"] = "message"
        if isinstance(out.get("content"), str):
            kind = "output_text" if out.get("role") == "assistant" else "input_text"
            out["content"] = [{"type": kind, "text": out["content"]}]
        out.setdefault("status", "completed")
    return out


def input_items_page(items: list[dict[str, Any]], response_id: str, query: dict[str, str]) -> dict[str, Any]:
    """One page of `items` (newest first unless `order=asc`), after the item `after`, at most `limit`."""
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest("'order' must be 'asc' or 'desc'", param="order")
    try:
        limit = int(query.get("limit", DEFAULT_LIMIT))
    except ValueError:
        raise InvalidRequest("'limit' must be an integer", param="limit") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"'limit' must be between 1 and {MAX_LIMIT}", param="limit")
    listed = [_listed(item, i, response_id) for i, item in enumerate(items)]
    if order == "desc":
        listed.reverse()
    after = query.get("after")
    if after:
        ids = [item["id"] for item in listed]
        if after not in ids:
            raise InvalidRequest(f"no input item with id '{after}' in response '{response_id}'", param="after")
        listed = listed[ids.index(after) + 1:]
    page = listed[:limit]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": len(listed) > limit}
