"""The judge set (evals/judge/): its prompts and labeled answers, read and parsed as daari parses requests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daari.protocol.anthropic_wire import parse_messages_request
from daari.protocol.chat import ChatRequest, Completion
from daari.protocol.openai_wire import parse_chat_request

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = ROOT / "evals" / "judge"


def parse_request(prompt: dict[str, Any]) -> ChatRequest:
    """A prompt's request (`protocol` + `body`) parsed by the wire daari would use for it."""
    body = prompt["body"]
    if prompt["protocol"] == "anthropic":
        return parse_messages_request(body, {})
    return parse_chat_request(body, {})


@dataclass(frozen=True)
class LabeledAnswer:
    id: str
    prompt_id: str
    client: str
    kind: str  # commit_message, title, topic, summary, structured, routine_stated, routine
    source: str  # "embedded" (SmolLM2) or "qwen" (Qwen2.5-Coder-0.5B), generated; "strong" (written by hand)
    split: str  # "tune" (written beside the rules), "embedded", "holdout" (never tuned on)
    answer: str
    finish_reason: str
    mean_logprob: float | None
    good: bool  # a person would use this answer as it is
    format_ok: bool  # it meets every format its prompt stated (False implies not good)
    why: str
    request: ChatRequest

    def completion(self) -> Completion:
        return Completion(text=self.answer, finish_reason=self.finish_reason,  # type: ignore[arg-type]
                          mean_logprob=self.mean_logprob)


def load_prompts(directory: Path = DEFAULT_DIR) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (directory / "prompts.jsonl").read_text().splitlines() if line.strip()]
    return {row["id"]: row for row in rows}


def load_answers(directory: Path = DEFAULT_DIR, filename: str = "answers.jsonl") -> list[LabeledAnswer]:
    """Every labeled answer of `filename` (answers.jsonl: the judge set; qwen_labeled.jsonl: the default embedded
    model's answers) with its prompt's parsed request. A row naming an unknown prompt is an error."""
    prompts = load_prompts(directory)
    parsed = {pid: parse_request(prompt) for pid, prompt in prompts.items()}
    answers = []
    for line in (directory / filename).read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        prompt = prompts.get(row["prompt_id"])
        if prompt is None:
            raise ValueError(f"answer {row['id']} names unknown prompt {row['prompt_id']!r}")
        if row["label"] not in ("good", "bad"):
            raise ValueError(f"answer {row['id']}: label must be good or bad, got {row['label']!r}")
        answers.append(LabeledAnswer(
            id=row["id"], prompt_id=row["prompt_id"], client=prompt["client"], kind=prompt["kind"],
            source=row["source"], split=row.get("split", "tune"), answer=row["answer"],
            finish_reason=row.get("finish_reason", "stop"),
            mean_logprob=row.get("mean_logprob"), good=row["label"] == "good", format_ok=bool(row["format_ok"]),
            why=row.get("why", ""), request=parsed[row["prompt_id"]]))
    return answers
