"""Whether a tool call is one the client can run: a defined tool, arguments that are a JSON object valid against
the tool's JSON schema (jsonschema, the draft the schema names, 2020-12 otherwise). The judge scores an answer
with an invalid call 0, so it escalates (pipeline/steps/judge.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from jsonschema import exceptions as schema_errors
from jsonschema import validators

from daari.protocol.chat import Tool, ToolCall


def call_problem(tools: Sequence[Tool], call: ToolCall, *, schema: bool = True) -> str | None:
    """Why `call` cannot be run (unknown tool, unreadable or, with `schema`, invalid arguments); None when it can."""
    by_name = {t.name: t for t in tools}
    tool = by_name.get(call.name)
    if by_name and tool is None:
        return f"unknown tool {call.name!r}"
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return "arguments are not JSON"
    if not isinstance(arguments, dict):
        return "arguments are not a JSON object"
    if tool is None or not tool.parameters or not schema:
        return None
    try:
        validator_class = validators.validator_for(tool.parameters)
        validator_class.check_schema(tool.parameters)
    except schema_errors.SchemaError:
        return None  # a schema the validator cannot read says nothing against the call
    error = schema_errors.best_match(validator_class(tool.parameters).iter_errors(arguments))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "arguments"
    return f"{where}: {error.message}"[:200]
