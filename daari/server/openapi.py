"""GET /openapi.json: daari's endpoints described in OpenAPI 3.1 (written by hand in openapi.yaml beside this
module, from the route table in server/compose.py), loaded once and served as JSON."""

from __future__ import annotations

import copy
from functools import cache
from importlib import resources
from typing import Any

import yaml

from daari.jsonio import dumps
from daari.server.http_request import HttpRequest

_SHARED = "#/components/x-"  # lists and maps the YAML shares between operations (OpenAPI has no such kind)


def _inline(node: Any, components: dict[str, Any]) -> Any:
    """`node` with every `$ref` to a shared `x-` component replaced by a copy of it, so the served document
    uses only OpenAPI's own component kinds."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_SHARED) and len(node) == 1:
            return _inline(copy.deepcopy(components["x-" + ref.removeprefix(_SHARED)]), components)
        return {key: _inline(value, components) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(item, components) for item in node]
    return node


def openapi_document() -> dict[str, Any]:
    """The description as a dict (a fresh copy each call)."""
    text = resources.files("daari.server").joinpath("openapi.yaml").read_text(encoding="utf-8")
    document: dict[str, Any] = yaml.safe_load(text)
    components = document["components"]
    document = _inline(document, components)
    document["components"] = {k: v for k, v in document["components"].items() if not k.startswith("x-")}
    return document


@cache
def _document_bytes() -> bytes:
    return dumps(openapi_document())


async def serve_openapi(req: HttpRequest) -> None:
    body = _document_bytes()
    await req.send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
    await req.send({"type": "http.response.body", "body": body, "more_body": False})
