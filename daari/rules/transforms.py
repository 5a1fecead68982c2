"""The L2 rules: which request is a deterministic conversion, and its answer. Pure functions.

A rule matches only when the message is the instruction plus the data (a fenced block, or the text after
the instruction); anything it cannot parse returns None, so the request goes on to the model tiers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from daari.routing.folded import lower_text
from daari.rules.lenient import parse_lenient
from daari.rules.safe_yaml import dump_yaml, load_yaml

_LEAD = r"^\s*(?:(?:please|pls|hey|can you|could you|would you|kindly)[,\s]+)*"
# After the instruction: a colon, a line break, the data's opening bracket or fence, or the end.
_TAIL = r"(?:[,\s]+(?:please|for me))?(?:\s*[:.]\s*|\s*\n\s*|\s+(?=[{\[`])|\s*$)"
_THIS = r"(?:(?:this|the following|the|my|below)\s+)?"
_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n(?P<body>.*?)\n?```\s*$", re.DOTALL)


@dataclass(frozen=True)
class RuleAnswer:
    rule_id: str
    text: str


@dataclass(frozen=True)
class _Rule:
    rule_id: str
    trigger: re.Pattern[str]
    convert: Callable[[str], str]


def _strict_json(payload: str) -> Any:
    """JSON as the standard has it: NaN and Infinity are not JSON."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(payload, parse_constant=refuse)


def _yaml_to_json(payload: str) -> str:
    value = load_yaml(payload)
    if not isinstance(value, dict | list):
        raise ValueError("not a YAML mapping or sequence")
    return _json_pretty_value(value)


def _json_to_yaml(payload: str) -> str:
    value = _strict_json(payload)
    if not isinstance(value, dict | list):
        raise ValueError("not a JSON object or array")
    return dump_yaml(value).rstrip("\n")


def _lenient_to_json(payload: str) -> str:
    value = parse_lenient(payload)
    if not isinstance(value, dict | list):
        raise ValueError("not an object or list literal")
    return _json_pretty_value(value)


def _json_pretty(payload: str) -> str:
    return _json_pretty_value(_strict_json(payload))


def _json_minify(payload: str) -> str:
    return json.dumps(_strict_json(payload), ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _json_pretty_value(value: Any) -> str:
    # default=str: YAML dates and timestamps become their ISO text.
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=2, default=str)


def _trigger(verb_phrase: str) -> re.Pattern[str]:
    return re.compile(_LEAD + verb_phrase + _TAIL, re.IGNORECASE)


# Order matters: the specific conversions come before the generic "format as JSON".
RULES: tuple[_Rule, ...] = (
    _Rule("L2-YAML-JSON", _trigger(rf"(?:convert|turn|transform|translate|change)\s+{_THIS}ya?ml"
                                   r"(?:\s+(?:document|file|config|snippet))?\s+(?:in)?to\s+json"), _yaml_to_json),
    _Rule("L2-JSON-YAML", _trigger(rf"(?:convert|turn|transform|translate|change)\s+{_THIS}json"
                                   r"(?:\s+(?:document|file|object|snippet))?\s+(?:in)?to\s+ya?ml"), _json_to_yaml),
    _Rule("L2-JSON-MINIFY", _trigger(rf"(?:minify|compact|compress|uglify)\s+{_THIS}json"), _json_minify),
    _Rule("L2-JSON-PRETTY", _trigger(rf"(?:pretty[- ]?print|prettify|beautify|indent|reformat|format)\s+{_THIS}json"),
          _json_pretty),
    _Rule("L2-JSON-LENIENT", _trigger(r"(?:format|convert|turn|rewrite|write|output|give me)\s+"
                                      r"(?:(?:this|it|that|the following)\s+)?(?:as|to|into|in)\s+"
                                      r"(?:valid\s+|proper\s+|strict\s+)?json"), _lenient_to_json),
)


def payload_of(rest: str) -> str | None:
    """The data after the instruction: one fenced block (nothing else around it) or the plain text."""
    rest = rest.strip()
    if not rest:
        return None
    if "```" in rest:
        fenced = _FENCE.match(rest)
        return fenced.group("body") if fenced else None
    return rest


def apply_rules(message: str, max_input_bytes: int) -> RuleAnswer | None:
    """The first rule whose instruction the message is and whose data parses; None falls through."""
    if len(message.encode("utf-8", "surrogatepass")) > max_input_bytes:
        return None  # too large to parse inline: a model tier (or the client) decides
    lower = lower_text(message)
    if lower is not None and "json" not in lower:
        return None  # every rule's instruction names JSON: five regexes not run on every other request
    for rule in RULES:
        match = rule.trigger.match(message)
        if match is None:
            continue
        payload = payload_of(message[match.end():])
        if payload is None:
            return None
        try:
            return RuleAnswer(rule.rule_id, rule.convert(payload))
        except (ValueError, TypeError, RecursionError):
            return None  # unparseable input is the model tiers' job, not an error
    return None
