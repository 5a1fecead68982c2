"""A fake OpenAI-compatible upstream whose answers change on purpose: for shadow sampling tests.

Each prompt (the last user message) is answered with a program for its topic: `topics` maps prompts to a topic
(two paraphrases of one question share one, as an L1 hit assumes), else the prompt is its own topic. A topic
"drifts" with probability `drift_rate` (a seeded random draw, the first time it is asked): from its second
asking on, its answer is a different program. `drifted` holds the topics that drifted, so a test knows the true
rate. Everything else (streams, usage, disconnects, behaviours by model name) is FakeOpenAI's.
"""

from __future__ import annotations

import random
from typing import Any

from tests.fakes.openai_upstream import FakeOpenAI, _text_of

PROGRAMS = ("def answer(items):\n    return sorted(items)", "def answer(items):\n    return list(reversed(items))")


class DriftingOpenAI(FakeOpenAI):
    def __init__(self, drift_rate: float, seed: int = 20) -> None:
        super().__init__()
        self.drift_rate = drift_rate
        self.rng = random.Random(seed)
        self.topics: dict[str, str] = {}
        self.asked: dict[str, int] = {}
        self.drifted: set[str] = set()

    def _answer(self, behaviour: str, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]], str]:
        if behaviour != "good":
            return super()._answer(behaviour, body)
        users = [_text_of(m.get("content")) for m in body.get("messages") or []
                 if isinstance(m, dict) and m.get("role") == "user"]
        prompt = users[-1] if users else ""
        topic = self.topics.get(prompt, prompt)
        times = self.asked.get(topic, 0)
        self.asked[topic] = times + 1
        if times == 0 and self.rng.random() < self.drift_rate:
            self.drifted.add(topic)
        program = PROGRAMS[1] if times > 0 and topic in self.drifted else PROGRAMS[0]
        return f"For {topic!r}, this does it:\n\n```python\n{program}\n```\nCall it with your list.", [], "stop"
