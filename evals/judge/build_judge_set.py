"""Writes evals/judge/prompts.jsonl and answers.jsonl: the judge set (docs/routing.md, "The judge set").

Answers come from two places:
- `embedded`: SmolLM2-135M's real answers (generate_embedded.py writes embedded_answers.jsonl), labeled
  below by reading each one (EMBEDDED_LABELS);
- `strong`: answers of the kind a strong model gives, written by hand: good ones, and the ways strong
  models really miss a stated format (a lead-in, a body under a one-line message, one word too many, a fence
  around JSON, past tense where the imperative was asked, English where German was asked).

Labels: `good` means a person would use the answer as it is, which needs it to meet every format its prompt
stated (`format_ok`) and to be right. An answer can meet its format and still be bad (wrong, vague,
answering instead of titling): `format_ok` true, `good` false. Labels were written from the prompt and the
answer, never from what the judge says.

    python evals/judge/build_judge_set.py     (from the repository root, PYTHONPATH=.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evals.judge.judge_prompts import prompts  # noqa: E402

HERE = Path(__file__).parent
G, B = "good", "bad"

# prompt id -> [(answer, label, format_ok, why)]
STRONG: dict[str, list[tuple[str, str, bool, str]]] = {
    "aider-commit-readme-typo": [
        ("docs: fix typo in README", G, True, ""),
        ("docs: Fixed typo in README.", B, False, "past tense where the imperative mood was asked")],
    "aider-commit-http-retry": [
        ("feat: retry fetch_json on connection errors with backoff", G, True, ""),
        ("feat: add retry with exponential backoff to fetch_json for connection errors and timeouts", B, False,
         "87 characters: over the 72 asked"),
        ("Here's a commit message for your changes:\n\nfeat: add retry logic to fetch_json", B, False,
         "a lead-in where only the message was asked")],
    "aider-commit-pagination": [
        ("fix: include last item on each page in paginate", G, True, ""),
        ("fix(paginate): return the last item of every page", G, True,
         "a scope: Conventional Commits allow it, aider keeps it")],
    "aider-commit-parse-date-test": [
        ("test: add tests for parse_date", G, True, ""),
        ("```\ntest: add tests for parse_date\n```", B, False, "fenced: the fence becomes part of the commit")],
    "aider-commit-bump-axios": [
        ("build: bump axios to 1.7.4", G, True, ""),
        ("Update axios dependency", B, False, "no <type>: prefix")],
    "aider-commit-verbose-flag": [
        ("feat: add --verbose flag for debug logging", G, True, ""),
        ("feat: add --verbose flag\n\nAdds a --verbose option to the CLI that turns on debug logging.", B, False,
         "a body under a one-line message")],
    "aider-commit-rename-fetch-user": [
        ("refactor: rename get_user to fetch_user", G, True, ""),
        ("refactor: renamed get_user to fetch_user", B, False, "past tense")],
    "aider-commit-ci-workflow": [
        ("ci: add GitHub Actions workflow running pytest", G, True, ""),
        ("ci: add GitHub Actions workflow that checks out the code, sets up Python 3.12 and runs pytest", B, False,
         "94 characters")],
    "aider-commit-go-nil": [
        ("fix: return 400 when CreateOrder request has no body", G, True, ""),
        ("Fix: return 400 when the request body is missing", G, True,
         "a capitalised type: accepted (git and aider do not care)")],
    "aider-commit-install-docs": [
        ("docs: add installation section", G, True, ""),
        ("docs: add installation instructions to docs/index.md including pip install from PyPI and from source",
         B, False, "101 characters")],
    "aider-commit-extract-method": [
        ("refactor: extract order validation from save_order", G, True, ""),
        ("Refactoring: extract _validate from save_order", B, False, "a type not in the list")],
    "aider-commit-regex-cache": [
        ("perf: precompile token regex in tokenize", G, True, ""),
        ("\"perf: precompile token regex\" (this avoids recompiling the pattern on every call)", B, False,
         "an explanation after the message")],
    "aider-commit-startup-log": [
        ("feat: log listen address and version on startup", G, True, ""),
        ("Sure! feat: log the listen address on startup", B, False, "a lead-in")],
    "aider-commit-remove-endpoint": [
        ("refactor: remove unused v1 export endpoint", G, True, ""),
        ("chore: removing the v1 export endpoint", B, False, "a gerund, not the imperative")],
    "aider-commit-de-readme-typo": [
        ("docs: Tippfehler in README korrigieren", G, True, ""),
        ("docs: fix typo in README", B, False, "English where German was asked")],
    "aider-commit-de-verbose-flag": [
        ("feat: --verbose-Option für Debug-Logging hinzufügen", G, True, ""),
        ("feat: add --verbose flag for debug logging", B, False, "English where German was asked")],
    "aider-commit-old-http-retry": [
        ("feat: retry fetch_json on connection errors\n\nRetry up to three times with exponential backoff before "
         "raising.", G, True, "the earlier prompt allows a body"),
        ("Here is the commit message:\n\nfeat: retry fetch_json on connection errors", B, False, "a lead-in")],
    "aider-commit-old-remove-endpoint": [
        ("feat!: remove the v1 export endpoint\n\nBREAKING CHANGE: /v1/export is gone; use /v2/export.", G, True, ""),
        ("\"refactor: remove the v1 export endpoint\"", B, False, "quotes, which the prompt forbids")],
    "aider-commit-old-ci-workflow": [
        ("ci: add test workflow for pushes and pull requests", G, True, "")],
    "aider-summary-retry": [
        ("I asked you to make `fetch_json` in app/http.py retry on connection errors, and you added a retry loop "
         "with exponential backoff using `time.sleep`.\n\nThen I asked you to log each retry, and you added a "
         "`log.warning` call before each sleep in app/http.py.", G, True, ""),
        ("The user asked the assistant to add retries to fetch_json in app/http.py, and the assistant added a retry "
         "loop with backoff and a log line per retry.", B, False, "not in the user's voice, not 'I asked you...'"),
        ("I asked you to add retries to fetch_json in app/http.py. You changed it to:\n\n```python\ndef "
         "fetch_json(url, timeout=10, attempts=3, backoff=0.5):\n```", B, False, "a fenced code block")],
    "aider-summary-pagination": [
        ("I asked you why the last page of results was missing one item, and you fixed `paginate` in "
         "src/paginate.js: `slice` excludes its end index, so you removed the `- 1` from `end`.", G, True, "")],
    "claude-title-blog-post": [
        ("Creating a new blog post in src/posts", G, True, ""),
        ("Title: Creating a new blog post", B, False, "a 'Title:' lead-in")],
    "claude-title-flaky-test": [
        ("Fix flaky upload retry test on CI", G, True, ""),
        ("Fixing the flaky test_upload_retries test by replacing sleep with an event", B, False,
         "11 words, 74 characters")],
    "claude-title-docker-build": [
        ("Speed up Docker build with layer caching", G, True, ""),
        ("Docker build optimization", B, False, "3 words: 5-10 asked")],
    "claude-title-rename-module": [
        ("Rename utils module to helpers across codebase", G, True, ""),
        ("\"Rename utils to helpers everywhere\"\n\nThis title captures the refactoring task.", B, False,
         "commentary after the title")],
    "claude-title-hello": [
        ("Greeting and offer to help with coding", G, True, "")],
    "claude-title-oauth": [
        ("Fix GitHub OAuth state mismatch in Flask login", G, True, ""),
        ("Adding GitHub OAuth login to Flask app and fixing state mismatch error", B, False,
         "12 words, 70 characters")],
    "claude-title-sql-slow": [
        ("Add index to speed up slow orders query", G, True, ""),
        ("Speed up slow orders query by adding a composite index on customer_email", B, False, "12 words")],
    "claude-title-types": [
        ("Fix mypy errors in billing module", G, True, ""),
        ("Fixed seven mypy type errors in the billing package so mypy is clean", B, False,
         "13 words, 68 characters")],
    "claude-topic-new-task": [
        ("{\"isNewTopic\": true, \"title\": \"API rate limiting\"}", G, True, ""),
        ("```json\n{\"isNewTopic\": true, \"title\": \"Rate limiting\"}\n```", B, False,
         "markdown around the JSON, which the prompt rules out")],
    "claude-topic-thanks": [
        ("{\"isNewTopic\": false, \"title\": null}", G, True, ""),
        ("No, this is not a new topic.", B, False, "not JSON")],
    "claude-topic-run-tests": [
        ("{\"isNewTopic\": false, \"title\": null}", G, True, ""),
        ("{\"isNewTopic\": \"no\", \"title\": null}", B, False, "isNewTopic must be a boolean")],
    "claude-topic-k8s": [
        ("{\"isNewTopic\": true, \"title\": \"Kubernetes deployment\"}", G, True, ""),
        ("{\"isNewTopic\": true, \"title\": \"Deploying the application to a Kubernetes cluster\"}", B, False,
         "a 7-word title: 2-3 asked")],
    "claude-topic-html": [
        ("{\"isNewTopic\": true, \"title\": \"HTML conversation renderer\"}", G, True, ""),
        ("{\"isNewTopic\": true, \"title\": \"HTML renderer\"}\n\nThe message introduces a new topic.", B, False,
         "text after the JSON")],
    "claude-topic-continue": [
        ("{\"isNewTopic\": false, \"title\": null}", G, True, ""),
        ("{\"isNewTopic\": false}", B, False, "the title field is missing")],
    "claude-session-title-agent-loop": [
        ("{\"title\": \"Plan minimal agentic loop in Python\"}", G, True, ""),
        ("{\"title\": \"Create A Plan To Implement A Minimal Agentic Loop In Python Using The Anthropic API\"}", B,
         False, "14 words in title case: 3-7 words in sentence case asked")],
    "claude-session-title-hello": [
        ("{\"title\": \"Casual greeting to start session\"}", G, True, ""),
        ("{\"title\": \"Hello\"}", B, False, "one word: 3-7 asked")],
    "claude-session-title-csv-export": [
        ("{\"title\": \"Add CSV export to reports page\"}", G, True, ""),
        ("Add CSV export to reports page", B, False, "not JSON")],
    "claude-session-title-memory-leak": [
        ("{\"title\": \"Find worker memory leak\"}", G, True, ""),
        ("{\"title\": \"Find worker memory leak\", \"priority\": \"high\"}", B, False,
         "a field the schema does not allow")],
    "claude-session-title-ts-migrate": [
        ("{\"title\": \"Migrate frontend from webpack to Vite\"}", G, True, ""),
        ("{\"title\": \"Migrate Frontend From Webpack To Vite\"}", B, False, "title case: sentence case asked")],
    "claude-session-title-german": [
        ("{\"title\": \"Login-Fehlermeldung ins Deutsche übersetzen\"}", G, True, ""),
        ("{\"title\": \"Translate login error message to German\"}", G, True,
         "this prompt does not ask for the user's language (Claude Code's /rename prompt does)")],
    "opencode-title-500s": [
        ("Debugging /checkout 500 errors in production", G, True, ""),
        ("Title: Debugging /checkout 500 errors", B, False, "a lead-in")],
    "opencode-title-hey": [
        ("Quick greeting", G, True, ""),
        ("Hello! How can I help you today?", B, True, "answers the message instead of titling it")],
    "opencode-title-postgres": [
        ("Postgres connection with SQLAlchemy", G, True, ""),
        ("Connecting PostgreSQL to your API using SQLAlchemy ORM and psycopg2 driver", B, False,
         "74 characters: 50 at most")],
    "opencode-title-app-js": [
        ("app.js undefined map error investigation", G, True, ""),
        ("app.js failure\n\nThe user is asking why app.js fails.", B, False, "two lines and an explanation")],
    "opencode-title-spanish": [
        ("Autenticación JWT en API de Express", G, True, ""),
        ("JWT authentication for Express API", B, False, "English: the user wrote Spanish")],
    "opencode-title-german": [
        ("CI-Build-Fehler, der lokal nicht auftritt", G, True, ""),
        ("CI build failing but not locally", B, False, "English: the user wrote German")],
    "opencode-title-long": [
        ("Redis bottleneck in worker job timeouts", G, True, ""),
        ("I have a monorepo with three services (api, worker, web) and the worker", B, False,
         "copies the message; 71 characters")],
    "opencode-summary-retry": [
        ("I added retries with exponential backoff to fetch_json in app/http.py, up to 3 attempts on connection "
         "errors.", G, True, ""),
        ("The user asked me to add retries. I looked at app/http.py first. Then I wrote a loop with backoff. I made "
         "it try three times. It works now.", B, False, "5 sentences: 2-3 at most")],
    "opencode-summary-index": [
        ("I added a migration with an index on (customer_email, created_at DESC), bringing the orders query from 12 s "
         "to 3 ms. Now please run the migration on staging and paste the output.", G, True, ""),
        ("## Summary\n\n- Added an index on orders\n- Query went from 12 s to 3 ms\n- Ran the tests\n- Asked for the "
         "staging migration output", B, False, "a heading and four bullets: 2-3 sentences asked")],
    "opencode-summary-question": [
        ("I upgraded react and react-dom to 19.0 and replaced the two ReactDOM.render calls with createRoot. Do you "
         "want me to also remove the legacy context API usage in Settings.tsx?", G, True, "")],
    "codex-schema-risk": [
        ("{\"summary\": \"Fixes an off-by-one so paginate returns the last item of each page.\", \"risk\": \"low\"}",
         G, True, ""),
        ("{\"summary\": \"Fixes an off-by-one in paginate.\", \"risk\": \"low\", \"notes\": \"none\"}", B, False,
         "a field the schema does not allow"),
        ("Summary: fixes an off-by-one in paginate. Risk: low", B, False, "not JSON")],
    "codex-schema-files": [
        ("{\"files\": [\"tests/test_app.py\", \"tests/conftest.py\"]}", G, True, ""),
        ("{\"files\": \"tests/test_app.py, tests/conftest.py\"}", B, False, "files must be an array")],
    "codex-schema-risk-2": [
        ("{\"summary\": \"Removing an endpoint with no traffic in 90 days is unlikely to break current clients.\", "
         "\"risk\": \"low\"}", G, True, "")],
    "agents-sdk-answer": [
        ("{\"answer\": \"429 Too Many Requests\", \"confidence\": 0.98}", G, True, ""),
        ("{\"answer\": \"429\", \"confidence\": \"high\"}", B, False, "confidence must be a number")],
    "agents-sdk-answer-2": [
        ("{\"answer\": \"git log main..HEAD\", \"confidence\": 0.9}", G, True, ""),
        ("```json\n{\"answer\": \"git log main..HEAD\", \"confidence\": 0.9}\n```", B, False,
         "a fence around structured output: the SDK's json.loads fails on it")],
    "routine-one-sentence-stash": [
        ("`git stash` saves your uncommitted changes and resets the working tree to HEAD, so you can reapply them "
         "later with `git stash pop`.", G, True, ""),
        ("git stash temporarily shelves your changes. You can reapply them later with git stash pop. It is useful "
         "when you need to switch branches.", B, False, "3 sentences: one asked")],
    "routine-cli-name": [
        ("Dotfile Sync Tool", G, True, ""),
        ("Here's a name: DotSync Pro Manager", B, False, "a lead-in")],
    "routine-regex-only": [
        ("^\\d{4}-\\d{2}-\\d{2}$", G, True, ""),
        ("You can use this regex:\n\n```\n^\\d{4}-\\d{2}-\\d{2}$\n```\n\nIt matches four digits, a dash, two digits, "
         "a dash and two digits.", B, False, "an explanation was ruled out")],
    "routine-json-only": [
        ("{\"name\": \"Alice\", \"age\": 30}", G, True, ""),
        ("Here is the JSON:\n```json\n{\"name\": \"Alice\", \"age\": 30}\n```", B, False, "text around the JSON")],
    "routine-yaml-to-json": [
        ("```json\n{\n  \"name\": \"app\",\n  \"port\": 8080,\n  \"debug\": false\n}\n```", G, True, ""),
        ("{\"name\": \"app\", \"port\": 8080, \"debug\": false}", G, True, ""),
        ("{\"name\": \"app\", \"port\": \"8080\", \"debug\": \"false\"}", B, True,
         "valid JSON with the wrong types: a content error")],
    "routine-summarize-20": [
        ("CI fails: its npm 8 cannot read the lockfileVersion 3 file generated by npm 10.", G, True, ""),
        ("The build is failing because the package-lock.json file was generated with npm version 10, but the CI "
         "image still uses npm 8, which cannot read it.", B, False, "28 words: under 20 asked")],
    "routine-bash-one-liner": [
        ("```bash\nfind src -name '*.py' -exec cat {} + | wc -l\n```\n\nThis concatenates every .py file under src/ "
         "and counts the lines.", G, True, "the command is one line; an explanation was not ruled out"),
        ("find src -name '*.py' | xargs wc -l | tail -1", G, True, "")],
    "routine-branch-name": [
        ("fix/login-timeout", G, True, ""),
        ("Sure! Here's a suggestion: `fix-login-timeout-bug`", B, False, "a lead-in")],
    "routine-translate-de": [
        ("Die Datei wurde nicht gefunden.", G, True, ""),
        ("\"Die Datei wurde nicht gefunden.\" (This is the German translation.)", B, False,
         "a note after the translation")],
    "routine-validate-username": [
        ("```python\ndef valid_username(name: str) -> bool:\n    \"\"\"True when the name is alphanumeric and under 20 "
         "characters.\"\"\"\n    return name.isalnum() and len(name) < 20\n```\n\n`str.isalnum()` is False for an "
         "empty string, so empty names are rejected too.", G, True,
         "the 20 characters are the username's, not the answer's")],
    "routine-mutex-3": [
        ("A mutex (mutual exclusion lock) can be held by only one thread at a time. A thread acquires it before "
         "touching shared data and releases it afterwards, so other threads wait instead of racing.", G, True, ""),
        ("A mutex is a synchronization primitive. It stands for mutual exclusion. Only one thread can hold it at a "
         "time. Other threads block until it is released. This prevents race conditions on shared data.", B, False,
         "5 sentences: 2-3 asked")],
    "routine-fenced-sql": [
        ("```sql\nSELECT date(created_at) AS day, count(*) AS orders\nFROM orders\nGROUP BY day\nORDER BY day;\n```",
         G, True, ""),
        ("SELECT date(created_at) AS day, count(*) FROM orders GROUP BY day;", B, False, "no code block")],
    "routine-capital": [("The capital of France is Paris.", G, True, "")],
    "routine-rebase": [
        ("`git rebase` moves your branch's commits onto another base: it replays each commit on top of the target "
         "branch, giving a linear history instead of a merge commit. Do not rebase commits others have pulled.",
         G, True, "")],
    "routine-commit-readme": [("docs: fix typo in README", G, True, ""), ("Fix typo in README", G, True, "")],
    "routine-list-tuple": [
        ("A list is mutable (you can append, remove and change items) and uses square brackets; a tuple is "
         "immutable, uses parentheses, and can be a dict key or set member when its items are hashable.", G, True,
         "")],
    "routine-undo-commit": [
        ("Run `git reset --soft HEAD~1`: it removes the last commit and keeps its changes staged.", G, True, ""),
        ("Run `git reset --hard HEAD~1` to undo the last commit.", B, True, "--hard throws the changes away")],
    "routine-postgres-port": [
        ("PostgreSQL listens on port 5432 by default.", G, True, ""),
        ("PostgreSQL listens on port 3306 by default.", B, True, "3306 is MySQL's port")],
    "routine-valid-json": [
        ("No: JSON does not allow the trailing comma after 1.", G, True, "")],
    "routine-decorator": [
        ("A decorator is a function that takes a function and returns a new one, usually wrapping it with extra "
         "behaviour; `@timer` above `def f` is shorthand for `f = timer(f)`.", G, True, "")],
}

# prompt id -> (label, format_ok, why) for SmolLM2's answer in embedded_answers.jsonl (filled in by reading each).
EMBEDDED_LABELS: dict[str, tuple[str, bool, str]] = {}


def _rows() -> list[dict[str, Any]]:
    known = {p["id"] for p in prompts()}
    rows: list[dict[str, Any]] = []
    for pid, answers in STRONG.items():
        if pid not in known:
            raise SystemExit(f"STRONG names unknown prompt {pid}")
        for n, (answer, label, format_ok, why) in enumerate(answers, 1):
            if label == G and not format_ok:
                raise SystemExit(f"{pid} #{n}: a good answer must meet its stated format")
            rows.append({"id": f"{pid}/strong-{n}", "prompt_id": pid, "source": "strong", "answer": answer,
                         "finish_reason": "stop", "mean_logprob": None, "label": label, "format_ok": format_ok,
                         "why": why})
    generated = HERE / "embedded_answers.jsonl"
    for line in generated.read_text().splitlines() if generated.exists() else []:
        row = json.loads(line)
        pid = row["prompt_id"]
        if pid not in EMBEDDED_LABELS:
            print(f"unlabeled embedded answer: {pid}: {row['answer'][:80]!r}", file=sys.stderr)
            continue
        label, format_ok, why = EMBEDDED_LABELS[pid]
        rows.append({"id": f"{pid}/embedded", "prompt_id": pid, "source": "embedded", "answer": row["answer"],
                     "finish_reason": row["finish_reason"], "mean_logprob": row["mean_logprob"], "label": label,
                     "format_ok": format_ok, "why": why})
    return rows


def main() -> None:
    items = prompts()
    (HERE / "prompts.jsonl").write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in items))
    rows = _rows()
    (HERE / "answers.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    print(f"{len(items)} prompts, {len(rows)} answers ({sum(r['label'] == G for r in rows)} good)")


if __name__ == "__main__":
    main()
