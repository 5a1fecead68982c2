"""The L2 shortcut tier: answers a conversion request (YAML/JSON, lenient literal -> JSON) without a model."""

from __future__ import annotations

from daari.config import RulesConfig
from daari.pipeline.shortcuts import ShortcutQuery, ShortcutResult
from daari.protocol.chat import ChatRequest, Completion
from daari.rules.transforms import apply_rules

RULES_MODEL = "daari-rules"


def last_user_text(request: ChatRequest) -> str | None:
    """The text of the last message when it is the user's (the only message a shortcut looks at)."""
    if not request.messages or request.messages[-1].role != "user":
        return None
    return request.messages[-1].text()


class RulesTier:
    name = "L2"
    serves_agent_turns = False

    def __init__(self, config: RulesConfig) -> None:
        self.config = config

    async def answer(self, query: ShortcutQuery) -> ShortcutResult | None:
        text = last_user_text(query.request)
        if text is None:
            return None
        found = apply_rules(text, self.config.max_input_bytes)
        if found is None:
            return None
        return ShortcutResult("L2", Completion(text=found.text, model=RULES_MODEL), task_type="rule",
                              rule_id=found.rule_id)

    async def remember(self, query: ShortcutQuery, completion: Completion, tier: str) -> None:
        return None
