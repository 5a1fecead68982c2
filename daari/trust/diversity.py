"""Answer diversity of cache hits per task type: does a category collapse to one answer?

For each task type, the last `window` hits are kept as (question, answer) fingerprints: the question is the
request's L0 key, the answer a short hash of its text. Diversity is the share of distinct answers among the
distinct questions that hit: 1.0 when every question got its own answer, near 0 when many questions got the
same one. A single question repeated (an agent's retry) is one question, so it does not look like a collapse;
many different questions answered alike does. A task type is flagged `collapsed` once it has at least
`MIN_QUESTIONS` distinct questions and its diversity is at or below `COLLAPSED_AT`.
"""

from __future__ import annotations

import hashlib
from collections import Counter, deque
from dataclasses import dataclass

MIN_QUESTIONS = 5
COLLAPSED_AT = 0.2
WINDOW = 1000


def answer_fingerprint(text: str) -> str:
    """A short, unkeyed hash: it only tells answers apart in memory and is never written anywhere."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Diversity:
    task_type: str
    hits: int
    questions: int
    answers: int
    top_answer_share: float  # of the hits, the share taken by the most frequent answer

    @property
    def diversity(self) -> float:
        return round(self.answers / self.questions, 4) if self.questions else 1.0

    @property
    def collapsed(self) -> bool:
        return self.questions >= MIN_QUESTIONS and self.diversity <= COLLAPSED_AT

    def to_json(self) -> dict[str, object]:
        return {"task_type": self.task_type, "hits": self.hits, "questions": self.questions,
                "answers": self.answers, "diversity": self.diversity,
                "top_answer_share": round(self.top_answer_share, 4), "collapsed": self.collapsed}


class _Window:
    __slots__ = ("pairs", "questions", "answers")

    def __init__(self) -> None:
        self.pairs: deque[tuple[str, str]] = deque()
        self.questions: Counter[str] = Counter()
        self.answers: Counter[str] = Counter()


class DiversityTracker:
    """Bounded (`window` hits per task type, `max_task_types` task types); add() never awaits."""

    def __init__(self, window: int = WINDOW, max_task_types: int = 64) -> None:
        self.window = window
        self.max_task_types = max_task_types
        self._by_task: dict[str, _Window] = {}

    def add(self, task_type: str | None, question: str, answer: str) -> None:
        task = task_type or "unknown"
        w = self._by_task.get(task)
        if w is None:
            if len(self._by_task) >= self.max_task_types:
                return
            w = self._by_task[task] = _Window()
        w.pairs.append((question, answer))
        w.questions[question] += 1
        w.answers[answer] += 1
        if len(w.pairs) > self.window:
            old_q, old_a = w.pairs.popleft()
            for counter, key in ((w.questions, old_q), (w.answers, old_a)):
                counter[key] -= 1
                if counter[key] <= 0:
                    del counter[key]

    def summary(self) -> list[Diversity]:
        out = []
        for task, w in sorted(self._by_task.items()):
            hits = len(w.pairs)
            top = w.answers.most_common(1)[0][1] if w.answers else 0
            out.append(Diversity(task, hits, len(w.questions), len(w.answers), top / hits if hits else 0.0))
        return out
