"""Answer diversity of cache hits per task type: does a category collapse to one answer?

For each task type, the last `window` distinct questions that hit are kept with their answers' fingerprints:
the question is the request's L0 key, the answer a short hash of its text. Diversity is the share of distinct
answers among the distinct questions that hit: 1.0 when every question got its own answer, near 0 when many
questions got the same one. A question repeated (an agent's retry) is one question, so it does not look like a
collapse; many different questions answered alike does. A task type is flagged `collapsed` once it has at least
`MIN_QUESTIONS` distinct questions and its diversity is at or below `COLLAPSED_AT`.
"""

from __future__ import annotations

import hashlib
from collections import Counter
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
    hits: int  # since start
    questions: int
    answers: int
    top_answer_share: float  # of the questions, the share that got the most frequent answer

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


class DiversityTracker:
    """Bounded (`window` questions per task type, `max_task_types` task types); add() never awaits and costs a
    few dict operations: answers are counted when the summary is asked for, not on every hit."""

    def __init__(self, window: int = WINDOW, max_task_types: int = 64) -> None:
        self.window = window
        self.max_task_types = max_task_types
        self._answers: dict[str, dict[str, str]] = {}  # task type -> question -> its answer, oldest first
        self._hits: dict[str, int] = {}

    def add(self, task_type: str | None, question: str, answer: str) -> None:
        task = task_type or "unknown"
        answers = self._answers.get(task)
        if answers is None:
            if len(self._answers) >= self.max_task_types:
                return
            answers = self._answers[task] = {}
            self._hits[task] = 0
        self._hits[task] += 1
        if question in answers:  # a repeat: nothing to add (an L0 key keeps its answer)
            return
        answers[question] = answer
        if len(answers) > self.window:
            del answers[next(iter(answers))]

    def summary(self) -> list[Diversity]:
        out = []
        for task, answers in sorted(self._answers.items()):
            counts = Counter(answers.values())
            top = counts.most_common(1)[0][1] if counts else 0
            out.append(Diversity(task, self._hits[task], len(answers), len(counts),
                                 top / len(answers) if answers else 0.0))
        return out
