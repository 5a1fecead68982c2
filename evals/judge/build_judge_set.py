"""Writes evals/judge/prompts.jsonl and answers.jsonl: the judge set (docs/routing.md, "The judge set").

Answers come from two places:
- `embedded`: SmolLM2-135M's real answers (generate_embedded.py writes embedded_answers.jsonl), labeled
  below by reading each one (EMBEDDED_LABELS);
- `strong`: answers of the kind a strong model gives, written by hand: good ones, and the ways strong
  models really miss a stated format (a lead-in, a body under a one-line message, one word too many, a fence
  around JSON, past tense where the imperative was asked, English where German was asked).

Splits: `tune` (the strong answers written alongside the rules), `embedded` (SmolLM2's answers: the rules were
scored on them once, then two rules were added for the two misses: "Translate to German" states the answer's
language, "in kebab-case" its case), `holdout` (strong answers written in one pass afterwards; scored once:
5 of the 52 it accepted broke their format and 1 of 48 good answers was held back; then the rules were
extended for those: English verbs in a commit message of another language, markdown around a short answer,
a schema's enum, "null if ... is false", no 10-character floor where a short form is stated), `holdout-2`
(new prompts and answers written in one pass after that, scored once and left as they are).

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

# Written in one pass after the rules above were settled; scored once, then the rules were extended for what it
# found (see the docstring): split "holdout".
HOLDOUT: dict[str, list[tuple[str, str, bool, str]]] = {
    "aider-commit-readme-typo": [("docs: correct spelling of 'supports' in README", G, True, "")],
    "aider-commit-http-retry": [("feat: add retry with exponential backoff to fetch_json", G, True, "")],
    "aider-commit-pagination": [("fix: correct off-by-one error in paginate end index", G, True, "")],
    "aider-commit-parse-date-test": [("test: add unit tests for parse_date", G, True, "")],
    "aider-commit-bump-axios": [("chore: update axios to ^1.7.4", G, True, "")],
    "aider-commit-verbose-flag": [("feat: Add --verbose flag to enable debug logging", G, True, "")],
    "aider-commit-rename-fetch-user": [("refactor: rename UserService.get_user to fetch_user and update callers", G,
                                       True, "70 characters")],
    "aider-commit-ci-workflow": [("ci: Added GitHub Actions test workflow", B, False, "past tense")],
    "aider-commit-go-nil": [("fix: handle missing request body in CreateOrder", G, True, "")],
    "aider-commit-install-docs": [("docs: add installation instructions", G, True, "")],
    "aider-commit-extract-method": [("refactor: extract validation logic into _validate method", G, True, "")],
    "aider-commit-regex-cache": [("perf: compile TOKEN regex once at module level", G, True, "")],
    "aider-commit-startup-log": [("feat: log listening address and version at startup.", G, True, "")],
    "aider-commit-remove-endpoint": [("refactor: remove deprecated /v1/export endpoint and legacy_export helper", G,
                                      True, "72 characters: the limit exactly")],
    "aider-commit-de-readme-typo": [("docs: Rechtschreibfehler in der README behoben", B, False,
                                     "German, but a past participle where the imperative was asked")],
    "aider-commit-de-verbose-flag": [("feat: add --verbose Flag für Debug-Ausgabe", B, False,
                                      "half English: the verb is English")],
    "aider-commit-old-http-retry": [("feat(http): retry fetch_json on connection errors\n\nUse exponential backoff "
                                     "(0.5 s, 1 s, 2 s) and re-raise after the third failure.", G, True, "")],
    "aider-commit-old-ci-workflow": [("Sure, here's a commit message:\nci: add pytest workflow", B, False,
                                      "a lead-in")],
    "claude-title-blog-post": [("Guide to creating a new blog post", G, True, "")],
    "claude-title-flaky-test": [("Stabilize flaky test_upload_retries with event sync", B, False,
                                 "51 characters: under 50 asked")],
    "claude-title-docker-build": [("Speeding up slow Docker builds with caching", G, True, "")],
    "claude-title-rename-module": [("Renaming utils module to helpers", G, True, "")],
    "claude-title-hello": [("Greeting", B, False, "one word: 5-10 asked")],
    "claude-title-oauth": [("GitHub OAuth login and state mismatch fix", G, True, "")],
    "claude-title-sql-slow": [("Optimizing slow orders query with index.", G, True, "")],
    "claude-title-types": [("**Fix mypy errors in billing**", B, False,
                            "markdown bold: the asterisks show in the title")],
    "claude-topic-new-task": [("{\"isNewTopic\":true,\"title\":\"Rate Limiting\"}", G, True, "")],
    "claude-topic-thanks": [("{\"isNewTopic\": false, \"title\": null}\n", G, True, "")],
    "claude-topic-run-tests": [("{\"isNewTopic\": false, \"title\": \"Running tests\"}", B, False,
                                "a title where null was asked (not a new topic)")],
    "claude-topic-k8s": [("{\"isNewTopic\": true, \"title\": \"Kubernetes deployment\"} ", G, True, "")],
    "claude-topic-html": [("{\"isNewTopic\": true, \"title\": \"HTML chat export\"}", G, True, "")],
    "claude-session-title-agent-loop": [("{\"title\": \"Plan agentic loop with bash tool\"}", G, True, "")],
    "claude-session-title-csv-export": [("{\"title\":\"Add CSV export button to reports page\"}", G, True, "")],
    "claude-session-title-memory-leak": [("{\"title\": \"Worker memory leak investigation\"}", G, True, "")],
    "claude-session-title-ts-migrate": [("{\"title\": \"Webpack to Vite migration\"}", G, True, "")],
    "opencode-title-500s": [("Production /checkout 500 errors", G, True, "")],
    "opencode-title-hey": [("Greeting", G, True, "")],
    "opencode-title-postgres": [("Postgres API connection via SQLAlchemy", G, True, "")],
    "opencode-title-spanish": [("Autenticación JWT para API Express", G, True, "")],
    "opencode-title-german": [("CI-Build schlägt fehl, lokal funktioniert es", G, True, "")],
    "opencode-title-app-js": [("Debugging app.js 'Cannot read properties of undefined' error", B, False,
                               "60 characters: 50 at most")],
    "opencode-title-long": [("Redis bottleneck causing worker timeouts at 100 jobs/s", B, False, "54 characters")],
    "opencode-summary-retry": [("I added retry logic with exponential backoff to fetch_json in app/http.py. It now "
                                "makes up to three attempts on connection errors before raising.", G, True, "")],
    "opencode-summary-index": [("I created a migration adding a composite index on (customer_email, created_at DESC), "
                                "which cut the orders query from 12 s to 3 ms. Now please run the migration on staging "
                                "and paste the output.", G, True, "")],
    "codex-schema-files": [("{\"files\":[\"tests/test_app.py\",\"tests/conftest.py\"]}", G, True, "")],
    "codex-schema-risk-2": [("{\"summary\": \"The endpoint has had no traffic for 90 days, so removing it is low "
                             "risk.\", \"risk\": \"Low\"}", B, False, "'Low' is not one of the schema's enum values")],
    "agents-sdk-answer": [("{\"confidence\": 0.95, \"answer\": \"429 Too Many Requests\"}", G, True, "")],
    "routine-one-sentence-stash": [("git stash takes your uncommitted changes (staged and unstaged), saves them on a "
                                    "stack, and reverts your working directory to the last commit.", G, True, "")],
    "routine-cli-name": [("DotSync", B, False, "one word: 3-5 asked")],
    "routine-regex-only": [("`^\\d{4}-\\d{2}-\\d{2}$`", G, True, "")],
    "routine-json-only": [("{\n  \"name\": \"Alice\",\n  \"age\": 30\n}", G, True, "")],
    "routine-summarize-20": [("CI's npm 8 can't read the npm 10 lockfile (lockfileVersion 3).", G, True, "")],
    "routine-branch-name": [("fix-login-timeout", G, True, "")],
    "routine-translate-de": [("Die Datei wurde nicht gefunden", G, True, "")],
    "routine-mutex-3": [("A mutex is a lock that only one thread can hold at a time. Threads acquire it before "
                         "entering a critical section and release it when done, which serializes access to shared "
                         "state. Other threads trying to acquire a held mutex block until it is released.", G, True,
                         "")],
    "routine-fenced-sql": [("Here is the query:\n\n```sql\nSELECT DATE(created_at) AS day, COUNT(*) FROM orders GROUP "
                            "BY 1 ORDER BY 1;\n```", G, True, "")],
    "routine-yaml-to-json": [("Here is the JSON:\n\n```json\n{\"name\": \"app\", \"port\": 8080, "
                              "\"debug\": false}\n```", G, True, "")],
    "routine-rebase": [("git rebase re-applies your branch's commits on top of another branch (e.g. main), producing a "
                        "linear history; unlike merge it rewrites commit hashes.", G, True, "")],
    "routine-undo-commit": [("Use `git reset --soft HEAD~1`: it undoes the commit but keeps your changes staged. Use "
                             "`--mixed` to keep them unstaged instead.", G, True, "")],
    "routine-valid-json": [("No. Trailing commas aren't allowed in JSON, so `{\"a\": 1,}` is invalid; remove the comma "
                            "after 1.", G, True, "")],
}

# Second holdout: new prompts and their answers, written in one pass after the rules were tuned on HOLDOUT's
# first run; scored once, then left as they are (split "holdout-2").
HOLDOUT_2: dict[str, list[tuple[str, str, bool, str]]] = {
    "h2-aider-commit-timeout-env": [
        ("feat: add REQUEST_TIMEOUT_S setting read from the environment", G, True, ""),
        ("feat: add configurable request timeout\n\nREQUEST_TIMEOUT_S defaults to 10 seconds.", B, False,
         "a body under a one-line message")],
    "h2-aider-commit-button-align": [
        ("fix: align form action buttons on mobile", G, True, ""),
        ("style: aligned save and cancel buttons", B, False, "past tense")],
    "h2-aider-commit-add-column": [
        ("feat: add last_login_at column to users with index", G, True, ""),
        ("`feat: add last_login_at column to users`", B, False, "backticks: aider strips quotes, not these")],
    "h2-aider-commit-type-hints": [
        ("refactor: add type hints to parse_price", G, True, ""),
        ("Add type hints to parse_price", B, False, "no <type>: prefix")],
    "h2-aider-commit-fr-type-hints": [
        ("refactor: ajouter des annotations de type à parse_price", G, True, ""),
        ("refactor: add type hints to parse_price", B, False, "English where French was asked")],
    "h2-claude-title-cors": [
        ("Fix CORS errors between web app and API", G, True, ""),
        ("Fixing CORS", B, False, "2 words: 5-10 asked")],
    "h2-claude-title-readme": [
        ("Write project README with install and usage", G, True, ""),
        ("Title: README creation for the repository", B, False, "a 'Title:' lead-in")],
    "h2-claude-title-segfault": [
        ("Fix C extension segfault on empty input", G, True, ""),
        ("Fix segfault in the C extension's parse() when it receives empty input", B, False,
         "12 words, 70 characters")],
    "h2-claude-topic-new-db": [
        ("{\"isNewTopic\": true, \"title\": \"Postgres migration\"}", G, True, ""),
        ("{\"isNewTopic\": true, \"title\": \"Switching database from MySQL to Postgres\"}", B, False,
         "6 words: 2-3 asked")],
    "h2-claude-topic-looks-good": [
        ("{\"isNewTopic\": false, \"title\": null}", G, True, ""),
        ("{\"isNewTopic\": false, \"title\": \"Commit changes\"}", B, False, "a title where null was asked")],
    "h2-claude-session-title-dark-mode": [
        ("{\"title\": \"Add dark mode toggle to settings\"}", G, True, ""),
        ("{\"title\": \"Dark Mode Toggle Implementation\"}", B, False, "title case: sentence case asked")],
    "h2-claude-session-title-flaky-e2e": [
        ("{\"title\": \"Fix Playwright timeouts on CI\"}", G, True, ""),
        ("{\"title\": \"Playwright tests\"}", B, False, "2 words: 3-7 asked")],
    "h2-opencode-title-french": [
        ("Configuration du cache HTTP pour images statiques", G, True, "49 characters"),
        ("HTTP caching for static images", B, False, "English: the user wrote French")],
    "h2-opencode-title-japanese": [
        ("Dockerビルドの高速化", G, True, ""),
        ("Speeding up slow Docker builds", B, False, "English: the user wrote Japanese")],
    "h2-opencode-title-refactor": [
        ("Payment service dependency injection refactor", G, True, ""),
        ("Refactoring the payment service to use dependency injection", B, False, "59 characters: 50 at most")],
    "h2-codex-schema-risk": [
        ("{\"summary\": \"A minor axios upgrade within 1.x; it includes security fixes and no breaking changes.\", "
         "\"risk\": \"low\"}", G, True, ""),
        ("{\"risk\": \"low\"}", B, False, "summary is required")],
    "h2-agents-sdk-answer": [
        ("{\"answer\": \"6379\", \"confidence\": 0.99}", G, True, ""),
        ("Redis listens on port 6379 by default.", B, False, "not JSON")],
    "h2-routine-methods": [
        ("GET\nPOST\nPUT", G, True, ""),
        ("Here are three HTTP methods:\nGET\nPOST\nDELETE", B, False, "a lead-in")],
    "h2-routine-kib": [
        ("1024", G, True, ""),
        ("A KiB is 1024 bytes.", B, False, "a sentence where just the number was asked")],
    "h2-routine-spanish": [
        ("Un mutex es un mecanismo de exclusión mutua: solo un hilo puede tenerlo a la vez, y los demás esperan "
         "hasta que se libere.", G, True, ""),
        ("A mutex is a mutual exclusion lock that only one thread can hold at a time.", B, False,
         "English where Spanish was asked")],
    "h2-routine-cors-2": [
        ("CORS (Cross-Origin Resource Sharing) is a browser mechanism that lets a server say, via response headers, "
         "which other origins may call it. Without those headers the browser blocks a page's requests to a "
         "different origin.", G, True, ""),
        ("CORS stands for Cross-Origin Resource Sharing. It is enforced by browsers. Servers opt in with headers "
         "such as Access-Control-Allow-Origin.", B, False, "3 sentences: at most 2 asked")],
    "h2-routine-sql-only": [
        ("DELETE FROM events WHERE created_at < NOW() - INTERVAL '30 days';", G, True, ""),
        ("```sql\nDELETE FROM events WHERE created_at < NOW() - INTERVAL '30 days';\n```", G, True,
         "code in a fence is still only the SQL")],
    "h2-routine-snake-name": [
        ("get_user_age_in_years", G, True, ""),
        ("getUserAgeInYears", B, False, "camelCase: snake_case asked")],
}

# prompt id -> (label, format_ok, why) for SmolLM2's answer in embedded_answers.jsonl (filled in by reading each).
EMBEDDED_LABELS: dict[str, tuple[str, bool, str]] = {
    "aider-commit-readme-typo": (B, False, "a fenced runaway about installing, not a commit message"),
    "aider-commit-http-retry": (B, False, "explains how to fetch JSON instead of writing a commit message"),
    "aider-commit-pagination": (B, False, "restates the problem in paragraphs"),
    "aider-commit-parse-date-test": (B, False, "'#' repeated until max_tokens"),
    "aider-commit-bump-axios": (B, False, "'#' repeated until max_tokens"),
    "aider-commit-verbose-flag": (B, False, "copies the code of the diff"),
    "aider-commit-rename-fetch-user": (B, False, "'#' repeated until max_tokens"),
    "aider-commit-ci-workflow": (B, False, "'#' repeated until max_tokens"),
    "aider-commit-go-nil": (B, False, "paragraphs about the handler, no <type>: prefix"),
    "aider-commit-install-docs": (B, False, "'# diffs:' and fragments of the diff"),
    "aider-commit-extract-method": (B, False, "a list of file names"),
    "aider-commit-regex-cache": (B, False, "copies the diff"),
    "aider-commit-startup-log": (B, False, "copies the diff"),
    "aider-commit-remove-endpoint": (B, False, "'#' repeated until max_tokens"),
    "aider-commit-de-readme-typo": (B, False, "a fenced runaway, in English"),
    "aider-commit-de-verbose-flag": (B, False, "copies the code of the diff"),
    "aider-commit-old-http-retry": (B, False, "explains how to fetch JSON instead of writing a commit message"),
    "aider-commit-old-remove-endpoint": (B, False, "'#' repeated until max_tokens"),
    "aider-commit-old-ci-workflow": (B, False, "'#' repeated until max_tokens"),
    "aider-summary-retry": (B, False, "copies the sections and invents code in a fence; not 'I asked you...'"),
    "aider-summary-pagination": (B, False, "'The user requested...' and empty fences repeated"),
    "claude-title-blog-post": (B, True, "not a title: an offer to help"),
    "claude-title-flaky-test": (B, True, "a sentence about the symptom, not a title; misses the fix"),
    "claude-title-docker-build": (B, False, "11 words: the user's question copied"),
    "claude-title-rename-module": (B, False, "two lines inventing a task"),
    "claude-title-hello": (B, False, "a lead-in, an invented title and commentary"),
    "claude-title-oauth": (B, True, "meaningless: talks about the word count"),
    "claude-title-sql-slow": (B, False, "16 words, 85 characters"),
    "claude-title-types": (B, False, "57 characters: under 50 asked"),
    "claude-topic-new-task": (B, False, "not JSON: explains rate limiting with curl"),
    "claude-topic-thanks": (B, False, "fenced JSON, wrong verdict, then repeated commentary"),
    "claude-topic-run-tests": (B, False, "not JSON"),
    "claude-topic-k8s": (B, False, "not JSON: an invented deployment guide"),
    "claude-topic-html": (B, False, "not JSON: repeated JavaScript"),
    "claude-topic-continue": (B, False, "not JSON"),
    "claude-session-title-agent-loop": (B, False, "not JSON; an invented function name"),
    "claude-session-title-hello": (B, False, "not JSON; nonsense"),
    "claude-session-title-csv-export": (B, False, "not JSON; nonsense"),
    "claude-session-title-memory-leak": (B, False, "not JSON; nonsense"),
    "claude-session-title-ts-migrate": (B, False, "not JSON; nonsense"),
    "claude-session-title-german": (B, False, "not JSON; nonsense"),
    "opencode-title-500s": (B, False, "71 characters: 50 at most; repeats 'production'"),
    "opencode-title-hey": (B, False, "75 characters; answers instead of titling"),
    "opencode-title-postgres": (B, False, "answers the question with invented code"),
    "opencode-title-app-js": (B, False, "answers the question in paragraphs"),
    "opencode-title-spanish": (B, False, "copies the question, then English commentary"),
    "opencode-title-german": (B, False, "English, 96 characters, nonsense"),
    "opencode-title-long": (B, False, "an apology and an invented explanation"),
    "opencode-summary-retry": (B, False, "a lead-in and the same item repeated as a list"),
    "opencode-summary-index": (B, False, "the same sentence repeated: far over 3 sentences"),
    "opencode-summary-question": (B, False, "a lead-in and one item repeated ten times"),
    "codex-schema-risk": (B, False, "not JSON"),
    "codex-schema-files": (B, False, "not JSON; wrong files"),
    "codex-schema-risk-2": (B, False, "not JSON"),
    "agents-sdk-answer": (B, False, "not JSON; wrong status code"),
    "agents-sdk-answer-2": (B, False, "not JSON; wrong command"),
    "routine-one-sentence-stash": (B, True, "one sentence, but wrong: stash shelves changes, it does not merge"),
    "routine-cli-name": (B, False, "'A:' before the name, and one hyphenated word where 3-5 were asked"),
    "routine-regex-only": (B, False, "no regex: asks for one instead"),
    "routine-json-only": (B, False, "Python code, not the JSON"),
    "routine-yaml-to-json": (B, False, "invented fields, cut off: not valid JSON"),
    "routine-summarize-20": (B, True, "20 words (under 20 read as at most 20), but says the lockfile is "
                                      "incompatible with npm 10: the reverse of the cause"),
    "routine-bash-one-liner": (B, True, "no command, only a comment"),
    "routine-branch-name": (B, False, "a sentence repeated as a list"),
    "routine-translate-de": (B, False, "English: a German translation was asked"),
    "routine-validate-username": (B, True, "the check is inverted and alphanumeric is not checked"),
    "routine-mutex-3": (B, True, "two sentences; the second is muddled (a mutex does not improve performance)"),
    "routine-fenced-sql": (B, True, "in a code block, but invalid SQL: DATE(DISTINCT ...)"),
    "routine-capital": (G, True, ""),
    "routine-rebase": (B, True, "wrong: rebase does not switch between repositories"),
    "routine-commit-readme": (B, True, "describes a change that was not made, then commentary"),
    "routine-list-tuple": (B, True, "cut off mid-sentence; calls a tuple a single value"),
    "routine-undo-commit": (B, True, "invents git-undo and git-back"),
    "routine-postgres-port": (B, True, "5432 is right; the rest is invented (a PostgreSQL operating system)"),
    "routine-valid-json": (B, True, "says invalid, then invented reasons and code, cut off"),
    "routine-decorator": (B, True, "circular and cut off mid-sentence"),
}


def _rows() -> list[dict[str, Any]]:
    known = {p["id"] for p in prompts()}
    rows: list[dict[str, Any]] = []
    for split, table in (("tune", STRONG), ("holdout", HOLDOUT), ("holdout-2", HOLDOUT_2)):
        for pid, answers in table.items():
            if pid not in known:
                raise SystemExit(f"{split}: unknown prompt {pid}")
            for n, (answer, label, format_ok, why) in enumerate(answers, 1):
                if label == G and not format_ok:
                    raise SystemExit(f"{pid} #{n}: a good answer must meet its stated format")
                rows.append({"id": f"{pid}/{'strong' if split == 'tune' else split}-{n}", "prompt_id": pid,
                             "source": "strong", "split": split, "answer": answer, "finish_reason": "stop",
                             "mean_logprob": None, "label": label, "format_ok": format_ok, "why": why})
    generated = HERE / "embedded_answers.jsonl"
    for line in generated.read_text().splitlines() if generated.exists() else []:
        row = json.loads(line)
        pid = row["prompt_id"]
        if pid not in EMBEDDED_LABELS:
            print(f"unlabeled embedded answer: {pid}: {row['answer'][:80]!r}", file=sys.stderr)
            continue
        label, format_ok, why = EMBEDDED_LABELS[pid]
        rows.append({"id": f"{pid}/embedded", "prompt_id": pid, "source": "embedded", "split": "embedded",
                     "answer": row["answer"],
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
