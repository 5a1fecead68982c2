"""Writes evals/judge/qwen_labeled.jsonl: the default embedded model's answers to the judge set's 99 prompts,
labeled by hand. The figures per task type that decide which task types start at L3 come from it
(`daari eval judge --answers qwen_labeled.jsonl --by-task-type`; docs/routing.md).

The answers are Qwen2.5-Coder-0.5B-Instruct's (llama.cpp, greedy), written by
`python -m evals.judge.generate_embedded --interleave` (to qwen_answers.jsonl): caps 64/128 by kind; the 8
answers cut at 64 were regenerated with `--cap 200 --only ...` (the prompt's own max_tokens, 160, or 200).

Labels follow build_judge_set.py's scheme: `good` means a person would use the answer as it is, which needs it to
meet every format its prompt stated (`format_ok`) and to be right. They were written by one helper (qwenroute)
reading each prompt and answer, never from what the judge says. Choices where the set was silent:
- A commit message whose `<type>` is in the prompt's list but wrong for the change (Qwen writes `feat` for
  typo fixes, renames, tests, CI and dependency bumps) is format-ok and bad: the prompt asks for "the
  appropriate prefix", and a wrong type misleads changelogs. `feat` for removing an endpoint is accepted (the
  set accepts `feat!` and `refactor` there).
- A title in quotes is measured without them (the set's convention: clients strip one pair).
- A code fence around "only the JSON" is still only the JSON (as the set's h2-routine-sql-only).
- An answer that repeats the question is bad, whatever its format.

    python evals/judge/build_qwen_set.py     (from the repository root, PYTHONPATH=.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evals.judge.judge_prompts import prompts  # noqa: E402

HERE = Path(__file__).parent
ANSWERS, OUT = HERE / "qwen_answers.jsonl", HERE / "qwen_labeled.jsonl"
LABELED_BY = "helper (qwenroute), hand-labeled"
G, B = "good", "bad"
WRONG_TYPE = "format-ok, but feat where {} fits"

# prompt id -> (label, format_ok, why) for Qwen's answer in qwen_answers.jsonl (filled in by reading each).
QWEN_LABELS: dict[str, tuple[str, bool, str]] = {
    # aider commit messages (one line, <type>: from a list, imperative, <= 72 characters)
    "aider-commit-readme-typo": (B, True, "wrong: a README typo fix described as initial setup; feat, not docs"),
    "aider-commit-http-retry": (G, True, ""),
    "aider-commit-pagination": (B, True, "wrong: an off-by-one fix described as adding pagination"),
    "aider-commit-parse-date-test": (B, True, WRONG_TYPE.format("test (the commit adds tests only)")),
    "aider-commit-bump-axios": (B, True, WRONG_TYPE.format("build or chore (a dependency bump)")),
    "aider-commit-verbose-flag": (G, True, ""),
    "aider-commit-rename-fetch-user": (B, True, "wrong: a rename described as adding a method"),
    "aider-commit-ci-workflow": (B, True, WRONG_TYPE.format("ci") + "; 'test job for ubuntu-latest' is vague"),
    "aider-commit-go-nil": (B, True, WRONG_TYPE.format("fix (a panic fixed)")),
    "aider-commit-install-docs": (B, True, WRONG_TYPE.format("docs")),
    "aider-commit-extract-method": (B, True, WRONG_TYPE.format("refactor")),
    "aider-commit-regex-cache": (B, True, "wrong: lexer.py exists; the change precompiles the regex"),
    "aider-commit-startup-log": (B, True, "wrong: main.go exists; the change logs the address and version"),
    "aider-commit-remove-endpoint": (G, True, "feat for removing an endpoint: arguable, the set accepts feat!"),
    "aider-commit-de-readme-typo": (B, False, "English where German was asked; and wrong (initial setup)"),
    "aider-commit-de-verbose-flag": (B, False, "English where German was asked"),
    "aider-commit-old-http-retry": (B, True, "a 97-character subject with a fragment after a period"),
    "aider-commit-old-remove-endpoint": (G, True, "a file path as scope: unusual, allowed"),
    "aider-commit-old-ci-workflow": (B, True, "wrong: invents a '.test directory'; feat(test) where ci fits"),
    "h2-aider-commit-timeout-env": (B, True, "wrong: the timeout has nothing to do with the database URL"),
    "h2-aider-commit-button-align": (B, True, WRONG_TYPE.format("fix or style (a layout fix)")),
    "h2-aider-commit-add-column": (G, True, ""),
    "h2-aider-commit-type-hints": (B, True, WRONG_TYPE.format("refactor (type hints add no feature)")),
    "h2-aider-commit-fr-type-hints": (B, False, "English where French was asked"),
    # summaries
    "aider-summary-retry": (B, True, "says the user logged the retries ('I logged'); 'to the console' invented"),
    "aider-summary-pagination": (G, True, "muddled wording, but the file, slice and the fix are right"),
    "opencode-summary-retry": (G, True, "the assistant's sentence repeated: a right one-sentence summary"),
    "opencode-summary-index": (G, True, "the assistant's message repeated, the closing request kept as asked"),
    "opencode-summary-question": (B, False, "claims a removal that was only offered; drops the question the "
                                            "rules say to keep"),
    # Claude Code titles: 5-10 words, under 50 characters, nothing else
    "claude-title-blog-post": (B, False, "52 characters without the quotes: under 50 asked"),
    "claude-title-flaky-test": (B, True, "garbled: reads as if the retries fail; misses the flaky test's fix"),
    "claude-title-docker-build": (B, False, "4 words: 5-10 asked"),
    "claude-title-rename-module": (B, False, "4 words: 5-10 asked; vague"),
    "claude-title-hello": (B, True, "not about the conversation (a greeting)"),
    "claude-title-oauth": (G, True, ""),
    "claude-title-sql-slow": (G, True, ""),
    "claude-title-types": (G, True, ""),
    "h2-claude-title-cors": (G, True, "the problem rather than the fix, but it names the session"),
    "h2-claude-title-readme": (G, True, "awkward, but names the task"),
    "h2-claude-title-segfault": (G, True, ""),
    # Claude Code topic checks: JSON {isNewTopic, title: 2-3 words or null if false}
    "claude-topic-new-task": (B, False, "wrong verdict (a new task), and a title where false asks for null"),
    "claude-topic-thanks": (B, False, "a title where isNewTopic false asks for null"),
    "claude-topic-run-tests": (B, False, "a title where isNewTopic false asks for null"),
    "claude-topic-k8s": (B, False, "wrong verdict; a 6-word title where false asks for null"),
    "claude-topic-html": (G, True, ""),
    "claude-topic-continue": (B, False, "wrong verdict (a go-ahead is no new topic); a 4-word title: 2-3 asked"),
    "h2-claude-topic-new-db": (B, False, "wrong verdict (a new task); a 6-word title where false asks for null"),
    "h2-claude-topic-looks-good": (B, False, "the message echoed as a title where false asks for null"),
    # Claude Code session titles: JSON {"title"}, 3-7 words, sentence case
    "claude-session-title-agent-loop": (B, False, "11 words in Title Case: 3-7 words, sentence case asked"),
    "claude-session-title-hello": (B, False, "2 words: 3-7 asked"),
    "claude-session-title-csv-export": (B, False, "Title Case where sentence case was asked"),
    "claude-session-title-memory-leak": (B, False, "Title Case where sentence case was asked"),
    "claude-session-title-ts-migrate": (G, True, "Webpack and Vite read as proper nouns"),
    "claude-session-title-german": (B, True, "ungrammatical German that misses 'error message'"),
    "h2-claude-session-title-dark-mode": (B, False, "Title Case where sentence case was asked"),
    "h2-claude-session-title-flaky-e2e": (B, False, "Title Case where sentence case was asked"),
    # opencode titles: one line, <= 50 characters, the user's language
    "opencode-title-500s": (B, False, "57 characters: 50 at most"),
    "opencode-title-hey": (G, True, "the greeting itself: a usable title for 'hey'"),
    "opencode-title-postgres": (G, True, ""),
    "opencode-title-app-js": (G, True, ""),
    "opencode-title-spanish": (B, False, "English: the user wrote Spanish"),
    "opencode-title-german": (B, False, "English: the user wrote German; and wrong (the build fails on CI only)"),
    "opencode-title-long": (G, True, ""),
    "h2-opencode-title-french": (B, False, "English: the user wrote French"),
    "h2-opencode-title-japanese": (B, False, "English: the user wrote Japanese"),
    "h2-opencode-title-refactor": (B, False, "55 characters: 50 at most"),
    # structured output (a JSON schema in response_format)
    "codex-schema-risk": (B, False, "not JSON; and wrong about the change"),
    "codex-schema-files": (B, False, "not JSON: a markdown list (the files are right)"),
    "codex-schema-risk-2": (B, False, "not JSON; invents a Kubernetes cluster"),
    "agents-sdk-answer": (B, False, "not JSON; never says 429"),
    "agents-sdk-answer-2": (B, False, "not JSON; `git log --not --main` is not a command that works"),
    "h2-codex-schema-risk": (B, False, "not JSON: a refusal"),
    "h2-agents-sdk-answer": (B, False, "not JSON (6379 is right)"),
    # routine questions with a stated format
    "routine-one-sentence-stash": (B, False, "two sentences: one asked"),
    "routine-cli-name": (B, False, "one word: 3-5 asked"),
    "routine-regex-only": (G, True, ""),
    "routine-json-only": (G, True, "a json fence: still only the JSON"),
    "routine-yaml-to-json": (G, True, ""),
    "routine-summarize-20": (B, False, "copies the text: 24 words, under 20 asked"),
    "routine-bash-one-liner": (B, True, "counts the files, not their lines"),
    "routine-branch-name": (G, True, "no fix- prefix, but a usable kebab-case name"),
    "routine-translate-de": (G, True, ""),
    "routine-validate-username": (B, True, "off by one: {1,20} accepts 20 characters, under 20 asked; the "
                                           "explanation after the code is cut by max_tokens"),
    "routine-mutex-3": (G, True, "2 sentences, right"),
    "routine-fenced-sql": (G, True, "a lead-in and an explanation around the code block: not ruled out"),
    "h2-routine-methods": (B, False, "on one line, comma-separated: one per line asked"),
    "h2-routine-kib": (G, True, ""),
    "h2-routine-spanish": (B, True, "Spanish, but inverted: a mutex makes threads wait for each other"),
    "h2-routine-cors-2": (B, False, "4 sentences: at most 2 asked; and muddled (CORS relaxes, not enforces)"),
    "h2-routine-sql-only": (G, True, "MySQL's INTERVAL syntax; a fence is still only the SQL"),
    "h2-routine-snake-name": (G, True, ""),
    # routine questions, no stated format
    "routine-capital": (G, True, ""),
    "routine-rebase": (B, True, "repeats the question"),
    "routine-commit-readme": (G, True, "past tense in quotes, but a usable message; no format stated"),
    "routine-list-tuple": (B, True, "repeats the question"),
    "routine-undo-commit": (B, True, "wrong: `git reset --hard HEAD^` throws the changes away"),
    "routine-postgres-port": (G, True, ""),
    "routine-valid-json": (B, True, "wrong: the trailing comma makes it invalid"),
    "routine-decorator": (B, True, "repeats the question"),
}


def rows() -> list[dict[str, object]]:
    known = {p["id"] for p in prompts()}
    out: list[dict[str, object]] = []
    for line in ANSWERS.read_text().splitlines():
        answer = json.loads(line)
        pid = answer["prompt_id"]
        if pid not in known:
            raise SystemExit(f"unknown prompt {pid}")
        if pid not in QWEN_LABELS:
            print(f"unlabeled answer: {pid}: {answer['answer'][:80]!r}", file=sys.stderr)
            continue
        label, format_ok, why = QWEN_LABELS[pid]
        if label == G and not format_ok:
            raise SystemExit(f"{pid}: a good answer must meet its stated format")
        out.append({"id": f"{pid}/qwen", "prompt_id": pid, "source": "qwen", "split": "qwen",
                    "answer": answer["answer"], "finish_reason": answer["finish_reason"],
                    "mean_logprob": answer["mean_logprob"], "label": label, "format_ok": format_ok, "why": why,
                    "model": answer["model"], "labeled_by": LABELED_BY})
    stale = set(QWEN_LABELS) - {row["prompt_id"] for row in out}
    if stale:
        raise SystemExit(f"labels without an answer: {sorted(stale)}")
    return out


def main() -> None:
    labeled = rows()
    OUT.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in labeled))
    print(f"{len(labeled)} labeled answers ({sum(row['label'] == G for row in labeled)} good)")


if __name__ == "__main__":
    main()
