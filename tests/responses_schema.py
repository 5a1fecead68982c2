"""The published Responses schema, for tests: the Open Responses specification's openapi.json (release
2026-04-24, Apache-2.0), as shipped inside the `openresponses-py` package (its licence is in that package's
dist-info), validated with jsonschema.

`check_response(obj)` and `check_stream(body)` return the schema errors of a response object and of every
event of an SSE body. Event types the specification has no schema for are returned apart: custom tool call
input events (OpenAI's; Open Responses has no custom tools) and `error`, which daari sends in OpenAI's shape
and which is checked against the OpenAI SDK's own type instead (docs/agents.md, "Conformance").
"""

from __future__ import annotations

import importlib.metadata
import json
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jsonschema
from openai.types.responses import ResponseErrorEvent
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from daari.protocol.sse import SSEDecoder

SPEC_FILE = "openresponses/openapi/2026-04-24.json"
BASE = "urn:openresponses:2026-04-24"


@cache
def spec() -> dict[str, Any]:
    path = importlib.metadata.distribution("openresponses-py").locate_file(SPEC_FILE)
    with open(str(path), encoding="utf-8") as f:
        document: dict[str, Any] = json.load(f)
    return document


@cache
def _validator(schema_name: str) -> jsonschema.Draft202012Validator:
    registry: Registry[Any] = Registry().with_resource(BASE, Resource.from_contents(
        spec(), default_specification=DRAFT202012))
    return jsonschema.Draft202012Validator({"$ref": f"{BASE}#/components/schemas/{schema_name}"},
                                           registry=registry)


@cache
def event_schemas() -> dict[str, str]:
    """Streaming event type -> its schema name, from the spec's `POST /responses` event-stream answer."""
    content = spec()["paths"]["/responses"]["post"]["responses"]["200"]["content"]["text/event-stream"]
    names = [ref["$ref"].rsplit("/", 1)[1] for ref in content["schema"]["oneOf"]]
    schemas = spec()["components"]["schemas"]
    return {schemas[name]["properties"]["type"]["enum"][0]: name for name in names}


def errors(schema_name: str, instance: object) -> list[str]:
    found = sorted(_validator(schema_name).iter_errors(instance), key=lambda e: list(e.absolute_path))
    return [f"{schema_name} at {'/'.join(str(p) for p in e.absolute_path) or '.'}: {e.message[:300]}"
            for e in found]


def check_response(response: object) -> list[str]:
    return errors("ResponseResource", response)


@dataclass
class StreamCheck:
    events: list[dict[str, Any]]
    errors: list[str] = field(default_factory=list)
    unchecked: set[str] = field(default_factory=set)  # event types the specification has no schema for


def check_stream(body: bytes) -> StreamCheck:
    decoder = SSEDecoder()
    events = [json.loads(e.data) for e in decoder.feed(body) if e.data.strip() != "[DONE]"]
    check = StreamCheck(events)
    if decoder.pending:
        check.errors.append("the stream ended inside an event")
    numbers = [e.get("sequence_number") for e in events]
    if numbers != list(range(len(events))):
        check.errors.append(f"sequence numbers are not 0..{len(events) - 1}: {numbers}")
    schemas = event_schemas()
    for event in events:
        kind = event.get("type")
        if kind == "error":  # OpenAI's wire shape, not the specification's `error` object
            ResponseErrorEvent.model_validate(event, strict=True)
            check.unchecked.add(kind)
        elif kind in schemas:
            check.errors.extend(errors(schemas[kind], event))
        else:
            check.unchecked.add(str(kind))
    return check
