# ruff: noqa: E501, E101  (diffs are quoted as git prints them: long lines, Go's tabs)
"""The prompts of evals/judge: real side calls and routine requests of coding agents, as their clients send them.

Where the prompt texts come from (the client's own text, quoted as sent; the material around it is written
here: diffs, conversations, questions):
- aider 0.86 commit message: `commit_system` in aider/prompts.py (Aider-AI/aider, the 0.86.3.dev snapshot,
  commit 5dc9490bb), sent by `GitRepo.get_commit_message` (aider/repo.py) as system + one user message:
  the chat context ("\\nUSER: ...\\nASSISTANT: ...\\n", `get_context_from_history` in base_coder.py) then
  "# Diffs:\\n" and `git diff`; `{language_instruction}` is "\\n- Is written in {lang}." with --commit-language.
- aider's earlier commit prompt (Conventional Commits with an optional body): aider/prompts.py at commit
  03243e354bcd7b2e37b4c0080713de84e850ee23.
- aider's chat-history summary: `summarize` in aider/prompts.py, sent by `ChatSummary.summarize_all`
  (aider/history.py) as system + one user message of "# USER" / "# ASSISTANT" sections.
- Claude Code 1.0 session title: system "Summarize this coding conversation in under 50 characters..." and
  user "Please write a 5-10 word title [for] the following conversation: ... Respond with the title for the
  conversation and nothing else." (both wordings of the first line occur), max_tokens 512, temperature 0;
  and its new-topic check ("Analyze if this message indicates a new conversation topic..."), as captured
  with claude-trace (Mario Zechner's write-up of claude-trace/cchistory) and in the minified cli.js.
- Claude Code 2.x session title: "Generate a concise, sentence-case title (3-7 words)... Return JSON with a
  single "title" field." with `output_config.format` a JSON schema {title: string}, additionalProperties
  false (MITM captures of Claude Code 2.1 quoted in public proxy code; the prompt is sessionTitle.ts's).
- opencode title: packages/opencode/src/agent/prompt/title.txt (anomalyco/opencode, formerly sst/opencode),
  sent with a user message "Generate a title for this conversation:\\n" followed by the user's first message
  (packages/opencode/src/session/prompt.ts); opencode's summary: agent/prompt/summary.txt.
- Codex `exec --output-schema` and the OpenAI Agents SDK's `output_type`: a `response_format` of type
  json_schema (strict), the schema given by the user; the instructions are the user's.
- Routine requests: questions developers send through a proxy, some stating a format in their own words.
"""

from __future__ import annotations

from typing import Any

AIDER_COMMIT_SYSTEM = """You are an expert software engineer that generates concise, \
one-line Git commit messages based on the provided diffs.
Review the provided context and diffs which are about to be committed to a git repo.
Review the diffs carefully.
Generate a one-line commit message for those changes.
The commit message should be structured as follows: <type>: <description>
Use these for <type>: fix, feat, build, chore, ci, docs, style, refactor, perf, test

Ensure the commit message:{language_instruction}
- Starts with the appropriate prefix.
- Is in the imperative mood (e.g., \"add feature\" not \"added feature\" or \"adding feature\").
- Does not exceed 72 characters.

Reply only with the one-line commit message, without any additional text, explanations, or line breaks.
"""

AIDER_COMMIT_SYSTEM_OLD = """You are an expert software engineer.
Review the provided context and diffs which are about to be committed to a git repo.
Generate a commit message for those changes which follows the Conventional Commits guidelines:
- The commit message MUST use the imperative tense.
- The commit message should be structured as follows:
```
<type>[optional scope]: <description>

[optional body]

[optional footer(s)]
```

Use these for <type>:

- fix: a commit of the type fix patches a bug in your codebase (this correlates with PATCH in Semantic Versioning).
- feat: a commit of the type feat introduces a new feature to the codebase (this correlates with MINOR in Semantic \
Versioning).
- BREAKING CHANGE: a commit that has a footer BREAKING CHANGE:, or appends a ! after the type/scope, introduces a \
breaking API change (correlating with MAJOR in Semantic Versioning). A BREAKING CHANGE can be part of commits of any \
type.
- types other than fix: and feat: are allowed if appropriate for the code base, for example: build:, chore:, ci:, \
docs:, style:, refactor:, perf:, test:, etc

Reply with JUST the commit message, without quotes, comments, questions, etc!
"""

AIDER_SUMMARIZE = """*Briefly* summarize this partial conversation about programming.
Include less detail about older parts and more detail about the most recent messages.
Start a new paragraph every time the topic changes!

This is only part of a longer conversation so *DO NOT* conclude the summary with language like "Finally, ...". \
Because the conversation continues after the summary.
The summary *MUST* include the function names, libraries, packages that are being discussed.
The summary *MUST* include the filenames that are being referenced by the assistant inside the ```...``` fenced \
code blocks!
The summaries *MUST NOT* include ```...``` fenced code blocks!

Phrase the summary with the USER in first person, telling the ASSISTANT about the conversation.
Write *as* the user.
The user should refer to the assistant as *you*.
Start the summary with "I asked you...".
"""

CLAUDE_TITLE_SYSTEM = ("Summarize this coding conversation in under 50 characters.\n"
                       "Capture the main task, key files, problems addressed, and current status.")
CLAUDE_TOPIC_SYSTEM = ("Analyze if this message indicates a new conversation topic. If it does, extract a 2-3 word "
                       "title that captures the new topic. Format your response as a JSON object with two fields: "
                       "'isNewTopic' (boolean) and 'title' (string, or null if isNewTopic is false). Only include "
                       "these fields, no other text.")
CLAUDE_SESSION_TITLE_SYSTEM = (
    "Generate a concise, sentence-case title (3-7 words) that captures the main topic or goal of this coding "
    "session. The title should be clear enough that the user recognizes the session in a list. Use sentence case: "
    "capitalize only the first word and proper nouns.\n\nReturn JSON with a single \"title\" field.\n\n"
    "Good examples:\n{\"title\": \"Fix login button on mobile\"}\n{\"title\": \"Add OAuth authentication\"}\n"
    "{\"title\": \"Debug failing CI tests\"}\n{\"title\": \"Refactor API client error handling\"}\n\n"
    "Bad (too vague): {\"title\": \"Code changes\"}\nBad (too long): {\"title\": \"Investigate and fix the issue "
    "where the login button does not respond on mobile devices\"}\nBad (wrong case): {\"title\": \"Fix Login "
    "Button On Mobile\"}")
CLAUDE_TITLE_SCHEMA = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"],
                       "additionalProperties": False}

OPENCODE_TITLE_SYSTEM = """You are a title generator. You output ONLY a thread title. Nothing else.

<task>
Generate a brief title that would help the user find this conversation later.

Follow all rules in <rules>
Your output must be:
- A single line
- ≤50 characters
- No explanations
</task>

<rules>
- you MUST use the same language as the user message you are summarizing
- Title must be grammatically correct and read naturally - no word salad
- Never include tool names in the title (e.g. "read tool", "bash tool", "edit tool")
- Focus on the main topic or question the user needs to retrieve
- Vary your phrasing - avoid repetitive patterns like always starting with "Analyzing"
- When a file is mentioned, focus on WHAT the user wants to do WITH the file, not just that they shared it
- Keep exact: technical terms, numbers, filenames, HTTP codes
- Remove: the, this, my, a, an
- Never assume tech stack
- Never use tools
- NEVER respond to questions, just generate a title for the conversation
- The title should NEVER include "summarizing" or "generating" when generating a title
- DO NOT SAY YOU CANNOT GENERATE A TITLE OR COMPLAIN ABOUT THE INPUT
- Always output something meaningful, even if the input is minimal.
- If the user message is short or conversational (e.g. "hello", "lol", "what's up", "hey"):
  → create a title that reflects the user's tone or intent (such as Greeting, Quick check-in, Light chat, \
Intro message, etc.)
</rules>

<examples>
"debug 500 errors in production" → Debugging production 500 errors
"refactor user service" → Refactoring user service
"why is app.js failing" → app.js failure investigation
"implement rate limiting" → Rate limiting implementation
"how do I connect postgres to my API" → Postgres API connection
</examples>
"""
OPENCODE_SUMMARY_SYSTEM = """Summarize what was done in this conversation. Write like a pull request description.

Rules:
- 2-3 sentences max
- Describe the changes made, not the process
- Do not mention running tests, builds, or other validation steps
- Do not explain what the user asked for
- Write in first person (I added..., I fixed...)
- Never ask questions or add new questions
- If the conversation ends with an unanswered question to the user, preserve that exact question
- If the conversation ends with an imperative statement or request to the user (e.g. "Now please run the command \
and paste the console output"), always include that exact request in the summary
- Respond in the same language as the conversation
"""


def openai(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"protocol": "openai", "body": {"model": "gpt-4o-mini", "messages": messages, **extra}}


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


# ---- aider commit messages -----------------------------------------------------------------------------
DIFFS: dict[str, tuple[str, str]] = {
    # name -> (chat context, diff)
    "readme-typo": ("", """diff --git a/README.md b/README.md
index 3b18e51..a9c2f4d 100644
--- a/README.md
+++ b/README.md
@@ -12,7 +12,7 @@ Install the package with pip:
 pip install tinyq
 ```

-Tinyq is a minimal job queue backed by SQLite. It suports retries and delays.
+Tinyq is a minimal job queue backed by SQLite. It supports retries and delays.

 ## Usage
"""),
    "http-retry": ("\nUSER: make fetch_json retry on connection errors, 3 attempts with backoff\n"
                   "\nASSISTANT: I'll add a retry loop with exponential backoff to fetch_json.\n", """diff --git a/app/http.py b/app/http.py
index 1c2d3e4..5f6a7b8 100644
--- a/app/http.py
+++ b/app/http.py
@@ -1,12 +1,24 @@
+import time
+
 import requests


-def fetch_json(url, timeout=10):
-    response = requests.get(url, timeout=timeout)
-    response.raise_for_status()
-    return response.json()
+def fetch_json(url, timeout=10, attempts=3, backoff=0.5):
+    for attempt in range(attempts):
+        try:
+            response = requests.get(url, timeout=timeout)
+            response.raise_for_status()
+            return response.json()
+        except requests.ConnectionError:
+            if attempt == attempts - 1:
+                raise
+            time.sleep(backoff * 2 ** attempt)
"""),
    "pagination": ("\nUSER: the last page of results is always missing one item\n", """diff --git a/src/paginate.js b/src/paginate.js
index 88a1b2c..99d0e1f 100644
--- a/src/paginate.js
+++ b/src/paginate.js
@@ -3,7 +3,7 @@ export function paginate(items, page, perPage) {
   const start = (page - 1) * perPage;
-  const end = start + perPage - 1;
+  const end = start + perPage;
   return items.slice(start, end);
 }
"""),
    "parse-date-test": ("", """diff --git a/tests/test_dates.py b/tests/test_dates.py
new file mode 100644
index 0000000..2b3c4d5
--- /dev/null
+++ b/tests/test_dates.py
@@ -0,0 +1,14 @@
+import pytest
+
+from app.dates import parse_date
+
+
+def test_parses_iso_dates():
+    assert parse_date("2024-02-29").day == 29
+
+
+def test_rejects_garbage():
+    with pytest.raises(ValueError):
+        parse_date("not a date")
"""),
    "bump-axios": ("", """diff --git a/package.json b/package.json
index 4d5e6f7..8a9b0c1 100644
--- a/package.json
+++ b/package.json
@@ -14,7 +14,7 @@
   "dependencies": {
-    "axios": "^1.6.2",
+    "axios": "^1.7.4",
     "express": "^4.19.2"
   }
"""),
    "verbose-flag": ("\nUSER: add a --verbose flag that turns on debug logging\n", """diff --git a/cli.py b/cli.py
index 0a1b2c3..4d5e6f7 100644
--- a/cli.py
+++ b/cli.py
@@ -8,9 +8,13 @@ def main(argv=None):
     parser = argparse.ArgumentParser(prog="sync")
     parser.add_argument("source")
     parser.add_argument("target")
+    parser.add_argument("--verbose", action="store_true", help="log debug output")
     args = parser.parse_args(argv)
+    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO)
     return sync(args.source, args.target)
"""),
    "rename-fetch-user": ("", """diff --git a/services/users.py b/services/users.py
index 7e8f9a0..1b2c3d4 100644
--- a/services/users.py
+++ b/services/users.py
@@ -20,7 +20,7 @@ class UserService:
-    def get_user(self, user_id):
+    def fetch_user(self, user_id):
         return self.db.query(User).filter(User.id == user_id).one()
diff --git a/api/routes.py b/api/routes.py
index 5e6f7a8..9b0c1d2 100644
--- a/api/routes.py
+++ b/api/routes.py
@@ -33,5 +33,5 @@ def show_user(user_id):
-    user = services.users.get_user(user_id)
+    user = services.users.fetch_user(user_id)
     return jsonify(user.to_dict())
"""),
    "ci-workflow": ("", """diff --git a/.github/workflows/test.yml b/.github/workflows/test.yml
new file mode 100644
index 0000000..c3d4e5f
--- /dev/null
+++ b/.github/workflows/test.yml
@@ -0,0 +1,15 @@
+name: test
+on: [push, pull_request]
+jobs:
+  test:
+    runs-on: ubuntu-latest
+    steps:
+      - uses: actions/checkout@v4
+      - uses: actions/setup-python@v5
+        with:
+          python-version: "3.12"
+      - run: pip install -e .[test]
+      - run: pytest -q
"""),
    "go-nil": ("\nUSER: the handler panics when the request has no body\n", """diff --git a/internal/api/handler.go b/internal/api/handler.go
index 2f3a4b5..6c7d8e9 100644
--- a/internal/api/handler.go
+++ b/internal/api/handler.go
@@ -41,6 +41,10 @@ func (h *Handler) CreateOrder(w http.ResponseWriter, r *http.Request) {
+	if r.Body == nil {
+		http.Error(w, "missing body", http.StatusBadRequest)
+		return
+	}
 	var order Order
 	if err := json.NewDecoder(r.Body).Decode(&order); err != nil {
"""),
    "install-docs": ("", """diff --git a/docs/index.md b/docs/index.md
index 6a7b8c9..0d1e2f3 100644
--- a/docs/index.md
+++ b/docs/index.md
@@ -1,5 +1,16 @@
 # tinyq

+## Installation
+
+```sh
+pip install tinyq
+```
+
+Or from source:
+
+```sh
+pip install git+https://github.com/example/tinyq
+```
+
 ## Quick start
"""),
    "extract-method": ("\nUSER: split the validation out of save_order\n", """diff --git a/orders/service.py b/orders/service.py
index 3c4d5e6..7f8a9b0 100644
--- a/orders/service.py
+++ b/orders/service.py
@@ -10,12 +10,16 @@ class OrderService:
     def save_order(self, order):
-        if not order.items:
-            raise ValueError("an order needs items")
-        if order.total < 0:
-            raise ValueError("negative total")
+        self._validate(order)
         self.repo.save(order)
+
+    @staticmethod
+    def _validate(order):
+        if not order.items:
+            raise ValueError("an order needs items")
+        if order.total < 0:
+            raise ValueError("negative total")
"""),
    "regex-cache": ("", """diff --git a/lexer.py b/lexer.py
index 8b9c0d1..2e3f4a5 100644
--- a/lexer.py
+++ b/lexer.py
@@ -1,8 +1,10 @@
 import re

+TOKEN = re.compile(r"\\s*(?:(\\d+)|(\\w+)|(.))")
+

 def tokenize(text):
-    for match in re.finditer(r"\\s*(?:(\\d+)|(\\w+)|(.))", text):
+    for match in TOKEN.finditer(text):
         yield match.lastindex, match.group(match.lastindex)
"""),
    "startup-log": ("", """diff --git a/server/main.go b/server/main.go
index 1a2b3c4..5d6e7f8 100644
--- a/server/main.go
+++ b/server/main.go
@@ -22,6 +22,7 @@ func main() {
 	addr := envOr("ADDR", ":8080")
+	log.Printf("listening on %s (version %s)", addr, version)
 	if err := http.ListenAndServe(addr, router()); err != nil {
"""),
    "remove-endpoint": ("\nUSER: delete the v1 export endpoint, nobody uses it since v2\n", """diff --git a/api/export.py b/api/export.py
index 9c0d1e2..3f4a5b6 100644
--- a/api/export.py
+++ b/api/export.py
@@ -1,18 +1,6 @@
 from flask import Blueprint, jsonify

 bp = Blueprint("export", __name__)
-
-
-@bp.route("/v1/export")
-def export_v1():
-    return jsonify(legacy_export())
-
-
-def legacy_export():
-    return {"rows": [r.to_dict() for r in Row.query.all()]}


 @bp.route("/v2/export")
"""),
}


# Diffs of the second holdout (written after the rules were tuned on the first): prompts never tuned on.
HOLDOUT_DIFFS: dict[str, tuple[str, str]] = {
    "timeout-env": ("", """diff --git a/app/config.py b/app/config.py
index 2c3d4e5..6f7a8b9 100644
--- a/app/config.py
+++ b/app/config.py
@@ -4,6 +4,7 @@ import os
 DATABASE_URL = os.environ["DATABASE_URL"]
 LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO")
+REQUEST_TIMEOUT_S = float(os.environ.get("REQUEST_TIMEOUT_S", "10"))
"""),
    "button-align": ("\nUSER: the save button is not aligned with the cancel button on mobile\n", """diff --git a/web/src/form.css b/web/src/form.css
index 0b1c2d3..4e5f6a7 100644
--- a/web/src/form.css
+++ b/web/src/form.css
@@ -18,6 +18,8 @@
 .form-actions {
   display: flex;
+  align-items: center;
+  gap: 0.5rem;
 }
"""),
    "add-column": ("", """diff --git a/migrations/0042_add_last_login.sql b/migrations/0042_add_last_login.sql
new file mode 100644
index 0000000..a1b2c3d
--- /dev/null
+++ b/migrations/0042_add_last_login.sql
@@ -0,0 +1,2 @@
+ALTER TABLE users ADD COLUMN last_login_at TIMESTAMPTZ;
+CREATE INDEX users_last_login_at_idx ON users (last_login_at);
"""),
    "type-hints": ("\nUSER: add type hints to parse_price\n", """diff --git a/shop/prices.py b/shop/prices.py
index 5d6e7f8..9a0b1c2 100644
--- a/shop/prices.py
+++ b/shop/prices.py
@@ -1,4 +1,7 @@
-def parse_price(text):
+from decimal import Decimal
+
+
+def parse_price(text: str) -> Decimal:
     return Decimal(text.replace(",", "").strip("$"))
"""),
}
DIFFS_ALL = {**DIFFS, **HOLDOUT_DIFFS}


def aider_commit(diff: str, language: str | None = None) -> dict[str, Any]:
    context, patch = DIFFS_ALL[diff]
    instruction = f"\n- Is written in {language}." if language else ""
    content = (context + "\n" if context else "") + "# Diffs:\n" + patch
    return openai([system(AIDER_COMMIT_SYSTEM.format(language_instruction=instruction)), user(content)])


def aider_commit_old(diff: str) -> dict[str, Any]:
    context, patch = DIFFS[diff]
    content = (context + "\n" if context else "") + "# Diffs:\n" + patch
    return openai([system(AIDER_COMMIT_SYSTEM_OLD), user(content)])


def aider_summary(sections: list[tuple[str, str]]) -> dict[str, Any]:
    content = "".join(f"# {role}\n{text}\n" for role, text in sections)
    return openai([system(AIDER_SUMMARIZE), user(content)])


# ---- Claude Code ---------------------------------------------------------------------------------------
def anthropic(system_text: str, user_text: str, **extra: Any) -> dict[str, Any]:
    body = {"model": "claude-3-5-haiku-20241022", "max_tokens": 512, "temperature": 0,
            "system": [{"type": "text", "text": system_text, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": user_text}], **extra}
    return {"protocol": "anthropic", "body": body}


def claude_title(conversation: str, with_for: bool = True) -> dict[str, Any]:
    lead = "Please write a 5-10 word title for the following conversation:" if with_for else \
        "Please write a 5-10 word title the following conversation:"
    text = f"{lead}\n\n{conversation}\n\nRespond with the title for the conversation and nothing else."
    return anthropic(CLAUDE_TITLE_SYSTEM, text)


def claude_topic(message: str) -> dict[str, Any]:
    return anthropic(CLAUDE_TOPIC_SYSTEM, message)


def claude_session_title(message: str) -> dict[str, Any]:
    body = {"model": "claude-haiku-4-5-20251001", "max_tokens": 32000, "temperature": 1,
            "system": [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
                       {"type": "text", "text": CLAUDE_SESSION_TITLE_SYSTEM}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": message}]}],
            "output_config": {"format": {"type": "json_schema", "schema": CLAUDE_TITLE_SCHEMA}}}
    return {"protocol": "anthropic", "body": body}


# ---- opencode ------------------------------------------------------------------------------------------
def opencode_title(message: str) -> dict[str, Any]:
    return openai([system(OPENCODE_TITLE_SYSTEM), user("Generate a title for this conversation:\n"), user(message)])


def opencode_summary(turns: list[dict[str, Any]]) -> dict[str, Any]:
    return openai([system(OPENCODE_SUMMARY_SYSTEM), *turns,
                   user("Summarize the conversation above following the rules.")])


# ---- structured output (Codex exec --output-schema, the Agents SDK's output_type) -----------------------
def json_schema_request(instructions: str, schema: dict[str, Any], name: str) -> dict[str, Any]:
    return openai([user(instructions)], response_format={
        "type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}})


RISK_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["summary", "risk"],
               "properties": {"summary": {"type": "string"},
                              "risk": {"type": "string", "enum": ["low", "medium", "high"]}}}
FILES_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["files"],
                "properties": {"files": {"type": "array", "items": {"type": "string"}}}}
ANSWER_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["answer", "confidence"],
                 "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}}}


CONVERSATIONS = {
    "blog-post": ("User: do you know how to create a new blog post\n\nClaude: Yes, to create a new blog post:\n\n"
                  "1. Create a directory in `src/posts/` with format `YYYY-MM-DD-post-title/`\n2. Add `meta.json` "
                  "with title, date, and other metadata\n3. Write content in `index.md` with the EJS template "
                  "header\n\nWould you like me to create a new post for you?"),
    "flaky-test": ("User: test_upload_retries fails about one run in five on CI, can you look?\n\nClaude: The test "
                   "sleeps 0.1 s and then asserts the retry happened; on a slow runner the retry is still waiting. "
                   "I replaced the sleep with an event the fake server sets, and the test passed 50 runs in a row."),
    "docker-build": ("User: the docker build takes 9 minutes, can we make it faster?\n\nClaude: Most of the time is "
                     "`pip install` running again on every change because the requirements are copied after the "
                     "source. I moved `COPY requirements.txt` and the install above `COPY . .` and added a cache "
                     "mount; a code change now rebuilds in 40 s."),
    "rename-module": ("User: rename the utils module to helpers everywhere\n\nClaude: I renamed `utils.py` to "
                      "`helpers.py` and updated the 14 imports across `app/`, `tests/` and `scripts/`. All tests "
                      "pass."),
    "hello": "User: hi\n\nClaude: Hello! What would you like to work on today?",
    "oauth": ("[Last 4 of 9 messages]\n\nUser: add GitHub login to the Flask app\n\nClaude: I added an OAuth blueprint "
              "using Authlib, a `/login/github` route and the callback that stores the user in the session. You need "
              "GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET set.\n\nUser: the callback says state mismatch\n\nClaude: The "
              "session cookie was set for `localhost` but the callback came to `127.0.0.1`; I made the redirect URI "
              "use the request host, and the login works now."),
    "sql-slow": ("User: this query takes 12 seconds: SELECT * FROM orders WHERE customer_email = ? ORDER BY created_at "
                 "DESC LIMIT 20\n\nClaude: There is no index on customer_email, so Postgres scans 4M rows. I added a "
                 "migration creating an index on (customer_email, created_at DESC); the query now takes 3 ms."),
    "types": ("User: run mypy and fix what it finds in billing/\n\nClaude: mypy found 7 errors in billing/: missing "
              "return types, an Optional used without a check in `invoice.total()`, and a dict typed as list. I fixed "
              "all seven; `mypy billing/` is clean."),
}


def prompts() -> list[dict[str, Any]]:
    """Every prompt of the set: id, client, kind, the request (protocol + body), and why it is here."""
    items: list[dict[str, Any]] = []

    def add(pid: str, client: str, kind: str, request: dict[str, Any], note: str = "") -> None:
        items.append({"id": pid, "client": client, "kind": kind, **request, "note": note})

    for name in DIFFS:
        add(f"aider-commit-{name}", "aider", "commit_message", aider_commit(name))
    add("aider-commit-de-readme-typo", "aider", "commit_message", aider_commit("readme-typo", "German"),
        "aider --commit-language German")
    add("aider-commit-de-verbose-flag", "aider", "commit_message", aider_commit("verbose-flag", "German"),
        "aider --commit-language German")
    for name in ("http-retry", "remove-endpoint", "ci-workflow"):
        add(f"aider-commit-old-{name}", "aider", "commit_message", aider_commit_old(name),
            "aider's earlier prompt: Conventional Commits with an optional body")
    add("aider-summary-retry", "aider", "summary", aider_summary([
        ("USER", "make fetch_json retry on connection errors"),
        ("ASSISTANT", "app/http.py\n```python\n<<<<<<< SEARCH\ndef fetch_json(url, timeout=10):\n=======\ndef "
                      "fetch_json(url, timeout=10, attempts=3, backoff=0.5):\n>>>>>>> REPLACE\n```\nI added a retry "
                      "loop with exponential backoff."),
        ("USER", "also log each retry"),
        ("ASSISTANT", "app/http.py\n```python\n<<<<<<< SEARCH\n            time.sleep(backoff * 2 ** attempt)\n=======\n"
                      "            log.warning(\"retry %d for %s\", attempt + 1, url)\n            time.sleep(backoff * "
                      "2 ** attempt)\n>>>>>>> REPLACE\n```")]))
    add("aider-summary-pagination", "aider", "summary", aider_summary([
        ("USER", "the last page of results is always missing one item"),
        ("ASSISTANT", "src/paginate.js\n```javascript\n<<<<<<< SEARCH\n  const end = start + perPage - 1;\n=======\n"
                      "  const end = start + perPage;\n>>>>>>> REPLACE\n```\n`slice` excludes its end index, so the "
                      "`- 1` dropped the last item of every page.")]))
    for name, conversation in CONVERSATIONS.items():
        add(f"claude-title-{name}", "claude-code", "title", claude_title(conversation, with_for=name != "blog-post"))
    for pid, message in (("new-task", "now let's add rate limiting to the API"),
                         ("thanks", "thanks, that works"),
                         ("run-tests", "run the tests again"),
                         ("k8s", "how do I deploy this to kubernetes?"),
                         ("html", "HTML file that renders your conversation"),
                         ("continue", "yes, go ahead with that approach")):
        add(f"claude-topic-{pid}", "claude-code", "topic", claude_topic(message))
    for pid, message in (("agent-loop", "Create a plan to implement minimal agentic loop in Python using Anthropic API "
                                        "with a run bash tool and human confirmation before executing scripts."),
                         ("hello", "hello"),
                         ("csv-export", "add a CSV export button to the reports page"),
                         ("memory-leak", "the worker's memory grows by 200MB an hour, find the leak"),
                         ("ts-migrate", "migrate the frontend from webpack to vite"),
                         ("german", "Kannst du die Fehlermeldung beim Login auf Deutsch übersetzen?")):
        add(f"claude-session-title-{pid}", "claude-code", "title", claude_session_title(message))
    for pid, message in (("500s", "debug 500 errors in production on the /checkout endpoint"),
                         ("hey", "hey"),
                         ("postgres", "how do I connect postgres to my API using sqlalchemy?"),
                         ("app-js", "why is app.js failing with 'Cannot read properties of undefined (reading map)'"),
                         ("spanish", "¿Cómo agrego autenticación con JWT a mi API de Express?"),
                         ("german", "Warum schlägt der Build in der CI fehl, aber lokal nicht?"),
                         ("long", "I have a monorepo with three services (api, worker, web) and the worker keeps "
                                  "timing out when the api enqueues more than 100 jobs per second; I think redis "
                                  "is the bottleneck but I am not sure how to measure it, can you help?")):
        add(f"opencode-title-{pid}", "opencode", "title", opencode_title(message))
    add("opencode-summary-retry", "opencode", "summary", opencode_summary([
        user("make fetch_json retry on connection errors"),
        assistant("I added a retry loop with exponential backoff to fetch_json in app/http.py (3 attempts).")]))
    add("opencode-summary-index", "opencode", "summary", opencode_summary([
        user("this orders query is slow"),
        assistant("I added a migration with an index on (customer_email, created_at DESC); the query went from 12 s "
                  "to 3 ms. Now please run the migration on staging and paste the output.")]))
    add("opencode-summary-question", "opencode", "summary", opencode_summary([
        user("upgrade the project to React 19"),
        assistant("I upgraded react and react-dom to 19.0 and replaced the two uses of `ReactDOM.render` with "
                  "`createRoot`. Do you want me to also remove the legacy context API usage in Settings.tsx?")]))
    add("codex-schema-risk", "codex", "structured", json_schema_request(
        "Review this change and report a one-sentence summary and its risk.\n\n```diff\n-  const end = start + perPage "
        "- 1;\n+  const end = start + perPage;\n```", RISK_SCHEMA, "review"))
    add("codex-schema-files", "codex", "structured", json_schema_request(
        "Which files in this listing are test files?\n\nsrc/app.py\nsrc/db.py\ntests/test_app.py\ntests/conftest.py\n"
        "README.md", FILES_SCHEMA, "files"))
    add("codex-schema-risk-2", "codex", "structured", json_schema_request(
        "Summarize the risk of deleting the v1 export endpoint that has had no traffic for 90 days.", RISK_SCHEMA,
        "review"))
    add("agents-sdk-answer", "agents-sdk", "structured", json_schema_request(
        "What HTTP status code means Too Many Requests?", ANSWER_SCHEMA, "final_output"))
    add("agents-sdk-answer-2", "agents-sdk", "structured", json_schema_request(
        "Which git command shows the commits on the current branch that are not on main?", ANSWER_SCHEMA,
        "final_output"))
    routine_stated = {
        "one-sentence-stash": "In one sentence, what does `git stash` do?",
        "cli-name": "Give me a 3-5 word name for a CLI tool that syncs dotfiles. Reply with just the name.",
        "regex-only": "Write a regex that matches ISO dates (YYYY-MM-DD). Reply with only the regex, no explanation.",
        "json-only": "Return JSON with keys name and age for: Alice, 30. Output only the JSON.",
        "yaml-to-json": "Convert this YAML to JSON:\n```yaml\nname: app\nport: 8080\ndebug: false\n```",
        "summarize-20": ("Summarize in under 20 words: The build fails because the lockfile was generated with npm 10 "
                         "and the CI image still ships npm 8, which cannot read lockfileVersion 3."),
        "bash-one-liner": "Write a one-line bash command to count the lines in all .py files under src/.",
        "branch-name": ("Suggest a branch name for fixing the login timeout bug. Reply only with the branch name in "
                        "kebab-case."),
        "translate-de": "Translate to German and reply only with the translation: 'The file was not found.'",
        "validate-username": "Write a Python function that checks a username is under 20 characters and alphanumeric.",
        "mutex-3": "Explain what a mutex is in 2-3 sentences.",
        "fenced-sql": "Write a SQL query that counts orders per day. Put the query in a code block.",
    }
    for pid, text in routine_stated.items():
        add(f"routine-{pid}", "openai-python", "routine_stated", openai([user(text)], max_tokens=160))
    for name in HOLDOUT_DIFFS:
        add(f"h2-aider-commit-{name}", "aider", "commit_message", aider_commit(name), "second holdout")
    add("h2-aider-commit-fr-type-hints", "aider", "commit_message", aider_commit("type-hints", "French"),
        "second holdout; aider --commit-language French")
    for name, conversation in (
            ("cors", "User: the browser says CORS error when the web app calls the API\n\nClaude: The API did not "
                     "send Access-Control-Allow-Origin. I added the flask-cors middleware allowing the web app's "
                     "origin, and the calls succeed now."),
            ("readme", "User: write a README for this repo\n\nClaude: I wrote README.md with an overview, install "
                       "steps, a usage example and the test command."),
            ("segfault", "User: the C extension segfaults on empty input\n\nClaude: `parse()` read `buf[0]` before "
                         "checking the length. I added the check and a test with an empty string.")):
        add(f"h2-claude-title-{name}", "claude-code", "title", claude_title(conversation), "second holdout")
    for pid, message in (("new-db", "let's switch the database from MySQL to Postgres"),
                         ("looks-good", "looks good, commit it")):
        add(f"h2-claude-topic-{pid}", "claude-code", "topic", claude_topic(message), "second holdout")
    for pid, message in (("dark-mode", "add a dark mode toggle to the settings page"),
                         ("flaky-e2e", "the playwright tests time out on CI but pass locally")):
        add(f"h2-claude-session-title-{pid}", "claude-code", "title", claude_session_title(message), "second holdout")
    for pid, message in (("french", "Comment configurer le cache HTTP pour les images statiques ?"),
                         ("japanese", "Dockerのビルドが遅いので速くしたいです"),
                         ("refactor", "refactor the payment service to use dependency injection")):
        add(f"h2-opencode-title-{pid}", "opencode", "title", opencode_title(message), "second holdout")
    add("h2-codex-schema-risk", "codex", "structured", json_schema_request(
        "Assess the risk of bumping axios from 1.6.2 to 1.7.4.", RISK_SCHEMA, "review"), "second holdout")
    add("h2-agents-sdk-answer", "agents-sdk", "structured", json_schema_request(
        "Which port does Redis listen on by default?", ANSWER_SCHEMA, "final_output"), "second holdout")
    for pid, text in {
            "methods": "List three HTTP methods, one per line, nothing else.",
            "kib": "How many bytes are in a KiB? Reply with just the number.",
            "spanish": "Reply in Spanish: what is a mutex?",
            "cors-2": "In at most 2 sentences, explain what CORS is.",
            "sql-only": "Return only the SQL, no explanation: delete rows older than 30 days from the events table.",
            "snake-name": ("Name a function that returns a user's age in years. Reply only with the name in "
                           "snake_case."),
    }.items():
        add(f"h2-routine-{pid}", "openai-python", "routine_stated", openai([user(text)], max_tokens=160),
            "second holdout")
    routine = {
        "capital": "What is the capital of France?",
        "rebase": "What does git rebase do?",
        "commit-readme": "Write a git commit message for: fixed typo in README",
        "list-tuple": "What is the difference between a list and a tuple in Python?",
        "undo-commit": "How do I undo the last git commit but keep the changes?",
        "postgres-port": "What port does PostgreSQL listen on by default?",
        "valid-json": "Is this valid JSON? {\"a\": 1,}",
        "decorator": "Explain what a Python decorator is.",
    }
    for pid, text in routine.items():
        add(f"routine-{pid}", "openai-python", "routine", openai([user(text)], max_tokens=160))
    return items
