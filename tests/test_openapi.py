"""GET /openapi.json describes exactly the routes daari serves: every route in the composed route table is in
the document, and every path and method in the document is routed (tests/fuzz_api.py fuzzes through it)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import schemathesis

from daari.server.app import Routes
from daari.server.openapi import openapi_document
from tests.support import daari_server, make_config

METHODS = {"get", "head", "post", "put", "patch", "delete", "options"}


def documented(document: dict[str, object]) -> set[tuple[str, str]]:
    paths = document["paths"]
    assert isinstance(paths, dict)
    return {(path, method.upper()) for path, item in paths.items() for method in item if method in METHODS}


def concrete(path: str) -> str:
    """A templated path with its parameters filled in, as a client would send it."""
    return re.sub(r"\{[^}]+\}", "some-id", path)


def exact_routes(routes: Routes) -> set[tuple[str, str]]:
    found = {(path, method) for path, methods in routes.exact.items() for method in methods}
    return found | {(path, "GET") for path in routes.websocket}


def prefixed_routes(routes: Routes) -> set[tuple[str, str]]:
    return {(prefix, method) for prefixes, methods in routes.prefixed for prefix in prefixes for method in methods}


async def test_every_route_is_described_and_every_described_route_is_served(tmp_path: Path) -> None:
    async with daari_server(make_config(tmp_path)) as server, \
            httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        routes = server.parts.app.routes
        served = (await client.get("/openapi.json"))
        tail = await client.get("/v1/daari/tail")
    document = openapi_document()
    assert served.status_code == 200 and served.json() == document
    described = documented(document)
    for path, method in exact_routes(routes):
        assert (path, method) in described, f"{method} {path} is routed but not in openapi.yaml"
    for prefix, method in prefixed_routes(routes):  # some templated path under the prefix, with that method
        assert any(p.startswith(prefix) and "{" in p and m == method for p, m in described), (prefix, method)
    for path, method in described:
        methods = routes.find(concrete(path))
        assert methods is not None and method in methods, f"{method} {path} is described but not routed"
    assert tail.status_code == 426 and tail.json()["error"]["code"] == "upgrade_required"


def test_the_document_is_valid_openapi_with_no_dangling_references() -> None:
    document = openapi_document()
    assert document["openapi"].startswith("3.1")
    assert not any(key.startswith("x-") for key in document["components"])  # shared lists were inlined
    schema = schemathesis.openapi.from_dict(document)  # validates against the OpenAPI 3.1 meta-schema
    operations = [result.ok() for result in schema.get_all_operations()]  # every $ref resolves
    assert len(operations) == len(documented(document))
