"""`python -m bench.embedded_model`: the embedded model candidates side by side, in one run.

For each candidate, a fresh process loads the model (cold: a new data dir, so a model shipped in parts is
joined and checked first; warm: the same data dir again, the second start) and answers a fixed set of coding
questions greedily, each with a check of what a right answer contains. It prints load times, tokens/s
(generated tokens over generation time, prompt included), resident memory after answering, and the checks
passed. `--baseline` adds the embedded model daari shipped before: SmolLM2-135M through transformers, its
GGUF dequantized to float32. `--judge-set DIR` also answers every prompt of DIR/prompts.jsonl (evals/judge)
as the L3 tier would and writes the answers to `--answers-out` (the judge's checks read them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import Table, fmt, machine, print_tables, ratio

MAX_TOKENS = 96
BASELINE = "smollm2-135m-transformers-f32"
COMMIT_SYSTEM = (
    "You are an expert software engineer that generates concise, one-line Git commit messages based on the "
    "provided diffs.\nGenerate a one-line commit message for those changes.\nThe commit message should be "
    "structured as follows: <type>: <description>\nUse these for <type>: fix, feat, build, chore, ci, docs, style, "
    "refactor, perf, test\nReply only with the one-line commit message, without any additional text, "
    "explanations, or line breaks.")
COMMIT_DIFF = ("# Diffs:\ndiff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -3 +3 @@\n"
               "-Tinyq is a minimal job queue. It suports retries.\n"
               "+Tinyq is a minimal job queue. It supports retries.\n")
TITLE_SYSTEM = ("Analyze if this message indicates a new conversation topic. If it does, extract a 2-3 word title "
                "that captures the new topic. Format your response as a JSON object with two fields: 'isNewTopic' "
                "(boolean) and 'title' (string, or null if isNewTopic is false). Only include these fields, no "
                "other text.")


def _one_line_commit(text: str) -> bool:
    line = text.strip()
    return "\n" not in line and len(line) <= 72 and bool(
        re.match(r"^(fix|feat|build|chore|ci|docs|style|refactor|perf|test)(\(.+\))?: \S", line))


def _title_json(text: str) -> bool:
    body = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        value = json.loads(body)
    except ValueError:
        return False
    return isinstance(value, dict) and set(value) == {"isNewTopic", "title"} and isinstance(value["isNewTopic"], bool)


def _has(pattern: str) -> Callable[[str], bool]:
    return lambda text: re.search(pattern, text) is not None


@dataclass(frozen=True)
class Question:
    name: str
    messages: list[dict[str, str]]
    check: Callable[[str], bool]


QUESTIONS = [
    Question("palindrome", [{"role": "user", "content": "Write a Python function that checks whether a string is a "
                                                        "palindrome."}], _has(r"\[::-1\]|reversed\(")),
    Question("thread vs process", [{"role": "user", "content": "What is the difference between a thread and a "
                                                               "process? Answer in two sentences."}],
             _has(r"(?i)memory|address space")),
    Question("undo a commit", [{"role": "user", "content": "How do I undo the last git commit but keep the changes "
                                                           "in my working tree?"}],
             _has(r"git reset (--soft |--mixed )?HEAD(~1?|\^)")),
    Question("SQL group by", [{"role": "user", "content": "Write a SQL query that counts the rows of table users "
                                                          "grouped by country."}],
             _has(r"(?is)select.*count\(.*group by\s+country")),
    Question("list comprehension", [{"role": "user", "content": "Rewrite as a list comprehension:\nresult = []\n"
                                                                "for x in xs:\n    if x > 0:\n        "
                                                                "result.append(x * 2)"}],
             _has(r"\[\s*x\s*\*\s*2\s+for\s+x\s+in\s+xs\s+if\s+x\s*>\s*0\s*\]")),
    Question("find .py files", [{"role": "user", "content": "Give the shell command that finds all .py files under "
                                                            "the current directory. Reply with the command only."}],
             _has(r"find \.? ?.*-name ['\"]?\*\.py")),
    Question("capital", [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
             _has(r"Paris")),
    Question("commit message (aider)", [{"role": "system", "content": COMMIT_SYSTEM},
                                        {"role": "user", "content": COMMIT_DIFF}], _one_line_commit),
    Question("topic JSON (Claude Code)", [{"role": "system", "content": TITLE_SYSTEM},
                                          {"role": "user", "content": "Help me fix the flaky login test."}],
             _title_json),
]


# --- the child process: one candidate -----------------------------------------------------------------------


Answer = Callable[[list[dict[str, str]], int], tuple[str, int]]  # (messages, max tokens) -> (text, tokens)


def _load_daari_model(model_id: str, data_dir: Path) -> tuple[Any, Answer]:
    from daari.executors.embedded_model import GenerationSettings, generate_blocking, holder_for

    loaded = holder_for(model_id, data_dir).load()

    def answer(messages: list[dict[str, str]], max_tokens: int) -> tuple[str, int]:
        pieces: list[str] = []
        result = generate_blocking(loaded, loaded.render_chat(messages),
                                   GenerationSettings(max_new_tokens=max_tokens),
                                   lambda text, _lp, _n: pieces.append(text), lambda: None)
        return "".join(pieces), result.completion_tokens

    return loaded, answer


def _load_baseline() -> tuple[Any, Answer]:
    """daari's embedded model before: transformers loads the GGUF dequantized to float32; greedy with a KV cache."""
    import torch
    import transformers

    from daari.models import smollm2_gguf

    transformers.utils.logging.set_verbosity_error()
    path = smollm2_gguf()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name).eval()
    ends = {tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>", "<|im_start|>")}

    def answer(messages: list[dict[str, str]], max_tokens: int) -> tuple[str, int]:
        encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)
        inputs, cache, out = torch.tensor([ids]), None, []
        with torch.inference_mode():
            for _ in range(max_tokens):
                output = model(input_ids=inputs, past_key_values=cache, use_cache=True)
                cache = output.past_key_values
                token = int(torch.argmax(output.logits[0, -1]))
                if token in ends:
                    break
                out.append(token)
                inputs = torch.tensor([[token]])
        return str(tokenizer.decode(out, skip_special_tokens=True)), len(out)

    return model, answer


def _judge_answers(answer: Answer, prompts: Path, out: Path, model: str) -> None:
    """The candidate's answers to the judge set's prompts, capped as evals/judge caps the embedded model's."""
    from daari.executors.embedded import prompt_messages
    from daari.protocol.anthropic_wire import parse_messages_request
    from daari.protocol.openai_wire import parse_chat_request

    with open(out, "a") as sink:
        for line in prompts.read_text().splitlines():
            prompt = json.loads(line)
            parse = parse_messages_request if prompt.get("protocol") == "anthropic" else parse_chat_request
            request = parse(prompt["body"], {})
            cap = 128 if prompt.get("kind") in ("summary", "routine") else 64
            turns = prompt_messages(request.messages)
            text, tokens = answer(turns, min(request.max_tokens or 512, cap))
            reason = "length" if tokens >= min(request.max_tokens or 512, cap) else "stop"
            sink.write(json.dumps({"prompt_id": prompt["id"], "model": model, "answer": text,
                                   "finish_reason": reason}) + "\n")


def child(candidate: str, data_dir: Path, judge_set: Path | None, answers_out: Path | None,
          load_only: bool) -> dict[str, Any]:
    import psutil

    started = time.perf_counter()
    _, answer = _load_baseline() if candidate == BASELINE else _load_daari_model(candidate, data_dir)
    load_s = time.perf_counter() - started
    tokens, seconds, passed, answers = 0, 0.0, 0, {}
    for question in QUESTIONS[:1] if load_only else QUESTIONS:
        began = time.perf_counter()
        text, count = answer(question.messages, MAX_TOKENS)
        seconds += time.perf_counter() - began
        tokens += count
        ok = question.check(text)
        passed += ok
        answers[question.name] = {"ok": ok, "answer": text}
    rss = psutil.Process().memory_info().rss
    if judge_set is not None and answers_out is not None:
        _judge_answers(answer, judge_set / "prompts.jsonl", answers_out, candidate)
    return {"candidate": candidate, "load_s": load_s, "tokens": tokens, "seconds": seconds,
            "rss_mb": rss / 2**20, "passed": passed, "answers": answers}


# --- the parent: every candidate in turn ----------------------------------------------------------------------


def _run_child(candidate: str, data_dir: Path, extra: list[str]) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "bench.embedded_model", "--child", candidate, "--data-dir", str(data_dir), *extra],
        capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{candidate} failed:\n{result.stderr[-3000:]}")
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def run(models: list[str], baseline: bool, extra: list[str], answers_file: Path | None) -> list[Table]:
    rows: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
    with tempfile.TemporaryDirectory(prefix="daari-bench-model-") as tmp:
        if baseline:
            rows.append((BASELINE, _run_child(BASELINE, Path(tmp) / "baseline", extra), None))
        for model in models:
            data_dir = Path(tmp) / model
            cold = _run_child(model, data_dir, extra)
            warm = _run_child(model, data_dir, ["--load-only"])  # the second start
            rows.append((model, cold, warm))
    speed = Table("Embedded model candidates: load, speed, memory, answers (greedy, one process each)",
                  ["model (runtime)", "cold load s", "warm load s", "tokens/s", "RSS MB",
                   f"checks passed (of {len(QUESTIONS)})"])
    base_rate = None
    for model, cold, warm in rows:
        rate = cold["tokens"] / cold["seconds"] if cold["seconds"] else float("nan")
        base_rate = rate if model == BASELINE else base_rate
        runtime = "transformers, float32" if model == BASELINE else "llama.cpp (xllamacpp)"
        speed.add(f"{model} ({runtime})", fmt(cold["load_s"]), fmt(warm["load_s"]) if warm else "-",
                  fmt(rate) + (f" ({ratio(rate, base_rate)})" if base_rate and model != BASELINE else ""),
                  fmt(cold["rss_mb"]), str(cold["passed"]))
    speed.notes.append(f"{len(QUESTIONS)} questions, at most {MAX_TOKENS} new tokens each; tokens/s counts the "
                       f"prompt's evaluation too; RSS after answering; {machine()}")
    answers = Table("What each candidate answered", ["question", *[m for m, _, _ in rows]])
    for question in QUESTIONS:
        cells = []
        for _, cold, _ in rows:
            got = cold["answers"][question.name]
            text = " ".join(got["answer"].split())
            cells.append(("ok: " if got["ok"] else "wrong: ") + (text[:90] + ("..." if len(text) > 90 else "")))
        answers.add(question.name, *[c.replace("|", "\\|") for c in cells])
    tables = [speed, answers]
    if answers_file is not None:
        answers.notes.append(f"answers to the judge set written to {answers_file}")
    return tables


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.embedded_model", description=__doc__)
    parser.add_argument("--models", default="qwen2.5-coder-0.5b-instruct,smollm2-135m-instruct",
                        help="embedded model ids (daari/models.py), comma-separated")
    parser.add_argument("--baseline", action="store_true", help="also SmolLM2 through transformers, float32")
    parser.add_argument("--judge-set", type=Path, help="evals/judge: answer its prompts.jsonl too")
    parser.add_argument("--answers-out", type=Path, help="where the judge-set answers go (JSON lines)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--load-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.data_dir, args.judge_set, args.answers_out, args.load_only)))
        return
    extra = ["--judge-set", str(args.judge_set), "--answers-out", str(args.answers_out)] \
        if args.judge_set and args.answers_out else []
    if args.answers_out and extra:
        args.answers_out.unlink(missing_ok=True)
    print_tables(run([m for m in args.models.split(",") if m], args.baseline, extra,
                     args.answers_out if extra else None))


if __name__ == "__main__":
    main()
