"""Routing spec step 7, the L2 rules tier: a conversion request (YAML/JSON, lenient literal -> JSON) answered
without a model. Reads: the final user message. Decides: the converted text and its rule id (rules/transforms.py)."""

from __future__ import annotations

from daari.config import RulesConfig
from daari.pipeline.shortcuts import ShortcutQuery, ShortcutResult, final_user_text
from daari.protocol.chat import Completion
from daari.rules.transforms import apply_rules

RULES_MODEL = "daari-rules"


class RulesTier:
    name = "L2"
    serves_agent_turns = False

    def __init__(self, config: RulesConfig) -> None:
        self.config = config

    async def answer(self, query: ShortcutQuery) -> ShortcutResult | None:
        text = final_user_text(query.request)
        if text is None:
            return None
        found = apply_rules(text, self.config.max_input_bytes)
        if found is None:
            return None
        return ShortcutResult("L2", Completion(text=found.text, model=RULES_MODEL), task_type="rule",
                              rule_id=found.rule_id)
