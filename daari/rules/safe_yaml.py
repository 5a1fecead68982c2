"""YAML that cannot blow up: safe tags only, aliases refused (no billion laughs), depth-capped.

Used for user-supplied YAML (L2 rules) and for a repository's .daari/commands.yaml.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import AliasEvent, CollectionStartEvent
from yaml.nodes import Node

MAX_DEPTH = 64


class UnsafeYaml(ValueError):
    """The YAML uses a feature refused here (aliases, deep nesting) or does not parse."""


class _NoAliasLoader(yaml.SafeLoader):
    depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            raise UnsafeYaml("YAML aliases are refused (they can expand without bound)")
        if self.check_event(CollectionStartEvent):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise UnsafeYaml("YAML nested too deeply")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1
        return super().compose_node(parent, index)


def load_yaml(text: str) -> Any:
    """Parse one YAML document; raise UnsafeYaml for anything refused or malformed."""
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except UnsafeYaml:
        raise
    except (yaml.YAMLError, RecursionError) as exc:
        raise UnsafeYaml(f"not valid YAML: {exc}") from None


def dump_yaml(value: Any) -> str:
    return str(yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False))
