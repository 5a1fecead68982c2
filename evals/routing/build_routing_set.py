"""Writes evals/routing/routing_set.jsonl: developer and agent traffic shapes, each with the tier that should
answer it and why (docs/routing.md, "The larger routing eval").

Expected tiers assume the set-up the spec's v1 assumes: L2 rules, Lt tools, a small local L3, a mid-sized
local coder at L4 and a frontier L6 (no L5; "L5/L6" accepts either). The expectation is the cheapest tier
that does the job well, judged from the request alone, never from what the classifier says.

`split` alternates "tune" / "holdout" inside each kind; the holdout half was written before any rule was
tuned and must stay out of tuning (docs/routing.md says how the split was used).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("routing_set.jsonl")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def assistant(text: str | None, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return message


def fence(code: str, lang: str = "") -> str:
    return f"```{lang}\n{code}\n```"


def py_module(functions: int) -> str:
    """A plausible Python module of `functions` small functions (~9 lines each)."""
    out = ["import json", "import logging", "", "log = logging.getLogger(__name__)", ""]
    for n in range(functions):
        out += [f"def handle_event_{n}(payload, store):",
                f"    \"\"\"Apply event type {n} to the store.\"\"\"",
                "    data = json.loads(payload)",
                "    if 'id' not in data:",
                f"        log.warning('event {n} without id')",
                "        return None",
                "    record = store.get(data['id']) or {'count': 0}",
                f"    record['count'] += {n + 1}",
                "    store[data['id']] = record",
                "    return record", ""]
    return "\n".join(out)


def server_log(lines: int) -> str:
    out = []
    for n in range(lines):
        level = "ERROR" if n % 37 == 5 else ("WARN" if n % 11 == 3 else "INFO")
        out.append(f"2026-11-29 10:{n // 60 % 60:02d}:{n % 60:02d} {level} api[{1000 + n % 7}] "
                   f"GET /orders/{n * 17 % 991} status={500 if level == 'ERROR' else 200} ms={20 + n % 180}")
    return "\n".join(out)


PY_TRACE = """Traceback (most recent call last):
  File "/srv/app/worker.py", line 88, in run
    result = process(job)
  File "/srv/app/worker.py", line 54, in process
    return handlers[job.kind](job.payload)
KeyError: 'invoice.created'"""

JS_TRACE = """TypeError: Cannot read properties of undefined (reading 'map')
    at OrderList (webpack:///./src/components/OrderList.jsx:14:23)
    at renderWithHooks (react-dom.development.js:14985:18)
    at mountIndeterminateComponent (react-dom.development.js:17811:13)"""

SMALL_FN = """def parse_price(text):
    text = text.strip().replace(",", "")
    if text.startswith("$"):
        text = text[1:]
    return float(text)"""

JS_FN = """function groupBy(items, key) {
  const out = {};
  for (const item of items) {
    if (!out[item[key]]) out[item[key]] = [];
    out[item[key]].push(item);
  }
  return out;
}"""

DIFF = """diff --git a/api/users.py b/api/users.py
@@ -40,6 +40,9 @@ def get_user(user_id):
     user = db.users.find_one({"_id": user_id})
+    if user is None:
+        abort(404)
+    user.pop("password_hash", None)
     return jsonify(user)"""

AGENT_SYSTEM = "\n".join(
    ["You are an interactive coding agent. You help the user with software engineering tasks in their "
     "repository using the tools provided. Be concise; prefer editing existing files; never commit unless asked."]
    + [f"- Guideline {n}: read before you edit; run the tests after a change; report results honestly; keep "
       f"changes minimal and in the style of the surrounding code; explain what you did in one or two lines."
       for n in range(1, 70)])

TOOLS = [
    {"type": "function", "function": {"name": "Read", "description": "Read a file.",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                     "required": ["path"]}}},
    {"type": "function", "function": {"name": "Bash", "description": "Run a shell command.",
                                      "parameters": {"type": "object",
                                                     "properties": {"command": {"type": "string"}},
                                                     "required": ["command"]}}},
    {"type": "function", "function": {"name": "Edit", "description": "Replace text in a file.",
                                      "parameters": {"type": "object", "properties": {
                                          "path": {"type": "string"}, "old": {"type": "string"},
                                          "new": {"type": "string"}}, "required": ["path", "old", "new"]}}},
]
SMALL_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]

EDIT_SYSTEM = ("Act as an expert developer. Make the requested change to the files the user added. Write each "
               "change as a *SEARCH/REPLACE block*:\n\npath/to/file.py\n```python\n<<<<<<< SEARCH\nold lines\n"
               "=======\nnew lines\n>>>>>>> REPLACE\n```\n\nThe SEARCH part must match the file exactly. "
               "Only edit files the user added to the chat. Keep blocks short.")
XML_SYSTEM = ("You are an engineer working in the user's editor.\n\n====\n\nTOOL USE\n\nTool uses are formatted "
              "using XML-style tags.\n\n## read_file\n<read_file>\n<path>src/a.ts</path>\n</read_file>\n\n"
              "## execute_command\n<execute_command>\n<command>npm test</command>\n</execute_command>\n\n"
              "## attempt_completion\n<attempt_completion>\n<result>done</result>\n</attempt_completion>\n\n"
              + "\n".join(f"- Rule {n}: one tool per message; wait for the result; paths are relative to the "
                          f"workspace; confirm success before attempt_completion." for n in range(1, 80)))
TITLE_SYSTEM = "Write a 3-7 word sentence-case title for this coding session. Reply as JSON {\"title\": ...}."


def call(name: str, args: dict[str, Any], n: int = 1) -> dict[str, Any]:
    return {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def tool_result(text: str, n: int = 1) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{n}", "content": text}


Row = tuple[str, list[dict[str, Any]], str, str]  # (kind, messages, expected tier, reason)


def simple(kind: str, tier: str, reason: str, *texts: str) -> list[Row]:
    return [(kind, [user(t)], tier, reason) for t in texts]


def rows() -> list[Row | tuple[str, list[dict[str, Any]], str, str, dict[str, Any]]]:
    out: list[Any] = []
    out += simple("question", "L3", "short factual developer question; a small local model knows it",
                  "What's the difference between a list and a tuple in Python?",
                  "How do I undo the last git commit but keep the changes?",
                  "What port does PostgreSQL listen on by default?",
                  "how do i exit vim",
                  "Which HTTP status code means too many requests?",
                  "What does `set -euo pipefail` do in bash?",
                  "what is a race condition",
                  "How do I list running docker containers?",
                  "What's the command to create a Python virtual environment?",
                  "Difference between let and const in JavaScript?",
                  "What does HEAD mean in git?",
                  "How do I check which process uses port 8080 on Linux?",
                  "What is the default branch name in new GitHub repos?",
                  "Why do people say 'don't use eval' in JavaScript?",
                  "What is the time complexity of looking up a key in a Python dict?",
                  "How can I see the environment variables in a running container?",
                  "what's a good name for a function that checks if a user is an admin",
                  "How do I pretty print a dict in the Python REPL?",
                  "What does the -p flag do in mkdir?",
                  "In SQL, what is the difference between WHERE and HAVING?")
    out += simple("classify", "L3", "tiny yes/no or label question",
                  "Is this valid JSON? {\"a\": 1,}",
                  "Classify this commit message as feat, fix or chore: 'bump lodash to 4.17.21'",
                  "yes or no: does git pull rebase by default?",
                  "Is this a safe SQL query? cursor.execute('SELECT * FROM u WHERE id=%s', (uid,))",
                  "Which language is this: fn main() { println!(\"hi\"); }",
                  "True or false: Go has generics.",
                  "Is this email address valid: bob@@example.com",
                  "Classify the sentiment of this review: 'the CLI is fast but the docs are awful'",
                  "Is it a breaking change to rename a public function?",
                  "Which type of test is this: it spins up Postgres in Docker and calls the API.")
    out += simple("transform", "L3", "small reformat or extraction of the text given",
                  "Convert this CSV to a markdown table:\nname,lang\nAda,Python\nLinus,C",
                  "snake_case these names: firstName, lastName, createdAt",
                  "Extract the URLs from this text: see https://a.dev/x and http://b.io/docs for details",
                  "Sort these imports alphabetically:\nimport sys\nimport abc\nimport os",
                  "Reformat this SQL: select id,name from users where age>30 order by name",
                  "Turn this JSON into YAML: {\"name\": \"daari\", \"port\": 8787}",
                  "Translate this error message to German: 'File not found'",
                  "Extract the version numbers from: requests==2.31.0, httpx>=0.27, trio",
                  "Convert 1700000000 (unix time) to an ISO date",
                  "Parse this query string into key/value pairs: a=1&b=two&c=")
    out += simple("rule", "L2", "an exact conversion with one right answer: the L2 rules",
                  "Convert this YAML to JSON:\nname: api\nreplicas: 3\nports:\n  - 80\n  - 443",
                  "Format as JSON: {foo: 1, bar: [1, 2]}",
                  "Convert this YAML to JSON:\nenabled: true\nlimits:\n  cpu: 2\n  memory: 4Gi",
                  "Pretty-print this JSON: {\"a\":{\"b\":[1,2,3]},\"c\":null}",
                  "Format as JSON: {retries: 3, backoff: 0.5}",
                  "Convert this YAML to JSON:\n- id: 1\n  name: ann\n- id: 2\n  name: bob")
    out += simple("command", "Lt", "names a developer command: the tool tier runs it",
                  "git status", "git diff", "Run eslint on src/", "run the tests", "git status please",
                  "Run eslint on the project", "show me git diff", "npm test", "run lint", "pytest")
    out += simple("commit", "L3", "short text from a small diff or log",
                  "Write a commit message for:\n" + DIFF,
                  "Summarize this diff in one sentence:\n" + DIFF,
                  "Write a PR title for this change:\n" + DIFF,
                  "Summarize this error log:\n" + "\n".join(server_log(40).splitlines()[:3]),
                  "What happened here?\n2026-11-29 10:00:01 ERROR db: connection refused (host=db-1)",
                  "Give me a one-line changelog entry for: added --json output to the export command")
    out += simple("explain_error", "L3", "a short error to explain, no fix asked",
                  "What does this error mean? ModuleNotFoundError: No module named 'yaml'",
                  "What does 'fatal: not a git repository' mean?",
                  "Explain: EADDRINUSE: address already in use :::3000",
                  "what does 'permission denied (publickey)' mean when I git push")
    out += simple("codegen", "L4", "writing working code: beyond a small model",
                  "Write a Python function that merges overlapping intervals.",
                  "Implement an LRU cache in TypeScript with get and put.",
                  "Write a bash script that backs up /var/lib/postgres to S3 every night.",
                  "Write a Go HTTP handler that returns the server time as JSON.",
                  "Create a React component that shows a paginated table of orders.",
                  "Write a SQL migration that adds a nullable `deleted_at` column to users and an index on it.",
                  "Implement binary search in Rust.",
                  "Write a Python class for a token bucket rate limiter.",
                  "Generate unit tests for this function:\n" + fence(SMALL_FN, "python"),
                  "Write pytest tests for this function:\n" + fence(SMALL_FN, "python"),
                  "Add unit tests for groupBy:\n" + fence(JS_FN, "javascript"),
                  "Write a Dockerfile for a FastAPI app with uvicorn, multi-stage, non-root user.",
                  "Write a GitHub Actions workflow that runs pytest on Python 3.11 and 3.12.",
                  "Write a regex-free Python function that validates IPv4 addresses, with tests.",
                  "Create a CLI in Python with argparse that renames files by a pattern.",
                  "Write a function to debounce another function in JavaScript.")
    out += simple("fix", "L4", "find and fix a bug in the code or trace given",
                  "Fix this bug:\n" + fence(SMALL_FN, "python") + "\nparse_price('1.234,50') returns the wrong value",
                  "My worker crashes, fix it:\n" + PY_TRACE,
                  "Fix the bug in this React code:\n" + JS_TRACE,
                  "Why does this crash and how do I fix it?\n" + PY_TRACE + "\n\nhandlers = {'invoice.paid': pay}",
                  "This test fails intermittently, debug it:\n" + fence(
                      "def test_cache():\n    c = Cache(ttl=1)\n    c.put('a', 1)\n    time.sleep(1)\n"
                      "    assert c.get('a') == 1", "python"),
                  "fix this: groupBy returns undefined keys\n" + fence(JS_FN, "javascript"),
                  "Fix the off-by-one error:\n" + fence("for i in range(1, len(xs)):\n    total += xs[i]", "python"),
                  "Debug this: the Flask app returns 500 on /login.\n" + PY_TRACE)
    out += simple("refactor_small", "L4", "restructuring code: needs a capable coder",
                  "Refactor this to remove duplication:\n" + fence(JS_FN + "\n" + JS_FN.replace("groupBy", "indexBy"),
                                                                  "javascript"),
                  "Refactor this function to be more readable:\n" + fence(SMALL_FN, "python"),
                  "Refactor handle_event_0 and handle_event_1 into one function:\n" + fence(py_module(2), "python"),
                  "Refactor this into async/await:\n" + fence(
                      "fetch(url).then(r => r.json()).then(d => render(d)).catch(e => log(e))", "javascript"))
    out += simple("review_small", "L4", "reviewing a small change for bugs",
                  "Review this diff for bugs:\n" + DIFF,
                  "Code review please:\n" + fence(SMALL_FN, "python"),
                  "Any problems with this code?\n" + fence(JS_FN, "javascript"),
                  "Review this SQL for injection issues:\n" + fence(
                      "q = f\"SELECT * FROM users WHERE name = '{name}'\"\ncursor.execute(q)", "python"))
    out += simple("medium_explain", "L4", "explaining a few hundred lines of pasted code",
                  "Explain what this module does:\n" + fence(py_module(6), "python"),
                  "Walk me through this code:\n" + fence(py_module(8), "python"),
                  "What does this code do, and is anything wrong with it?\n" + fence(py_module(7), "python"),
                  "Explain this module to a new team member:\n" + fence(py_module(10), "python"))
    out += simple("architecture", "L6", "design reasoning: trade-offs a small model gets wrong",
                  "Explain microservices vs monolith for a team of 8 building a shop, 500+ words.",
                  "Review the architecture of our billing system: Postgres, a Go API, a Kafka queue, three workers.",
                  "Design a rate limiting service for our public API that works across regions.",
                  "Do a security audit of our login flow: JWT in localStorage, refresh tokens, no CSRF token.",
                  "Plan step by step how we migrate 40 services from MySQL to Postgres without downtime.",
                  "Write a design doc for adding multi-tenancy to our SaaS backend.",
                  "Threat model our file upload endpoint.",
                  "Compare event sourcing and CRUD for an order system; when is each the better choice?",
                  "How should we split this monolith into services? Payments, catalog, users and search share one DB.",
                  "Prove that this lock-free queue is linearizable, or show a counterexample.")
    out += simple("long_context", "L6", "thousands of tokens of context to read",
                  "Summarize this log and tell me what went wrong:\n" + server_log(400),
                  "Refactor this module so the handlers share one code path:\n" + fence(py_module(60), "python"),
                  "Find the bug in this module:\n" + fence(py_module(45), "python"),
                  "Review this code for bugs:\n" + fence(py_module(50), "python"),
                  "Explain this file:\n" + fence(py_module(70), "python"),
                  "Which requests failed and why?\n" + server_log(300),
                  "Add type hints to this module:\n" + fence(py_module(40), "python"),
                  "Write docs for every function in this module:\n" + fence(py_module(55), "python"))
    # Agent turns (ADR-0004): real coding agents send a long system prompt and several tools.
    task = "Fix the failing test in tests/test_cart.py"
    out += [
        ("agent", [system(AGENT_SYSTEM), user(task)], "L6", "agent turn with a long system prompt and tools",
         {"tools": TOOLS}),
        ("agent", [system(AGENT_SYSTEM), user(task), assistant(None, [call("Bash", {"command": "pytest -x"})]),
                   tool_result("FAILED tests/test_cart.py::test_total - assert 90 == 100")],
         "L6", "agent loop: a tool result to act on", {"tools": TOOLS}),
        ("agent", [system(AGENT_SYSTEM), user("Add a --json flag to the export command"),
                   assistant(None, [call("Read", {"path": "cli/export.py"})]),
                   tool_result(py_module(5))], "L6", "agent loop reading a file", {"tools": TOOLS}),
        ("agent", [system(AGENT_SYSTEM), user("Rename the config loader and update its callers"),
                   assistant(None, [call("Bash", {"command": "rg -n load_config"})]),
                   tool_result("app.py:3:from config import load_config\ncli.py:8:cfg = load_config()")],
         "L6", "multi-file agent work", {"tools": TOOLS}),
        ("agent", [system(AGENT_SYSTEM), user("What does this repo do?")], "L6",
         "agent turn: tools and a long system prompt, whatever the question", {"tools": TOOLS}),
        ("agent", [system(AGENT_SYSTEM), user("Run the linter and fix what it finds"),
                   assistant(None, [call("Bash", {"command": "ruff check ."})]),
                   tool_result("app.py:12:5: F841 local variable 'x' is assigned to but never used")],
         "L6", "agent loop with lint output", {"tools": TOOLS}),
        ("agent_small", [user("What's the weather in Lisbon?")], "L3",
         "a small function-calling app: one tool, a short question (ADR-0004 routes agent turns to L3)",
         {"tools": SMALL_TOOLS}),
        ("agent_small", [user("Weather in Oslo and Bergen?"), assistant(None, [call("get_weather", {"city": "Oslo"})]),
                         tool_result("Oslo: 3°C, rain")], "L3", "small tool loop: one tool result to report",
         {"tools": SMALL_TOOLS}),
        ("agent_small", [user("Is it raining in Paris?")], "L3", "one tool, one short question",
         {"tools": SMALL_TOOLS}),
        ("agent_small", [user("Get the weather for Rome"), assistant(None, [call("get_weather", {"city": "Rome"})]),
                         tool_result("Rome: 18°C, sunny")], "L3", "small tool loop", {"tools": SMALL_TOOLS}),
    ]
    # Real clients' side calls and special shapes.
    session = "<session>\nuser: the export command crashes on empty files\nassistant: fixed the empty check\n</session>"
    out += [
        ("side_call", [system(TITLE_SYSTEM), user(session)], "L3", "session title: a side call, cheapest tier", {}),
        ("side_call", [user("quota")], "L3", "quota probe (max_tokens 1): cheapest tier", {"max_tokens": 1}),
        ("side_call", [user(".")], "L3", "connectivity probe (max_tokens 1)", {"max_tokens": 1}),
        ("side_call", [system('Does the message start a new topic? Reply {"isNewTopic": bool, "title": str}.'),
                       user("now let's fix the flaky payment tests")], "L3", "topic check side call", {}),
        ("side_call", [system("Generate a 2-4 word kebab-case name for this conversation. Return JSON with a name."),
                       user("<conversation>user: add oauth login</conversation>")], "L3", "session name side call",
         {}),
        ("side_call", [system(TITLE_SYSTEM), user("<session>\nuser: why is CI red\n</session>")], "L3",
         "session title side call", {}),
    ]
    aider_files = "I have *added these files to the chat* so you can edit them.\n\ncli.py\n" + fence(SMALL_FN)
    out += [
        ("aider", [system(EDIT_SYSTEM), user(aider_files),
                   assistant("Ok, any changes I propose will be to those files."),
                   user("Make parse_price accept euros too.")], "L4",
         "edit request in SEARCH/REPLACE format: a small model only acknowledges", {}),
        ("aider", [system(EDIT_SYSTEM), user(aider_files), assistant("Ok."), user("add docstrings")], "L4",
         "edit format, small file", {}),
        ("aider", [system(EDIT_SYSTEM),
                   user("I have *added these files to the chat* so you can edit them.\n\nhandlers.py\n"
                        + fence(py_module(50))),
                   assistant("Ok, any changes I propose will be to those files."),
                   user("Merge all handle_event functions into one table-driven handler.")], "L6",
         "edit format over a large file", {}),
        ("aider", [system(EDIT_SYSTEM), user(aider_files), assistant("Ok."), user("go ahead")], "L4",
         "'go ahead' in an edit session means: write the blocks", {}),
        ("roo", [system(XML_SYSTEM), user("<task>\nAdd input validation to the signup form\n</task>")], "L6",
         "XML-tool agent (Roo Code / Cline): agent work with a long prompt", {}),
        ("roo", [system(XML_SYSTEM), user("<task>\nWhy is the build failing?\n</task>"),
                 assistant("<execute_command>\n<command>npm run build</command>\n</execute_command>"),
                 user("[execute_command] Result:\nError: Cannot find module 'zod'")], "L6",
         "XML-tool agent loop", {}),
    ]
    java_trace = "\n".join(["Exception in thread \"main\" java.lang.NullPointerException: order is null"]
                           + [f"    at com.shop.orders.OrderService.step{n}(OrderService.java:{40 + n})"
                              for n in range(60)])
    out += simple("log", "L4", "a long trace or a medium log to diagnose: more than a small model can hold",
                  "Here is the full trace, what's wrong?\n" + java_trace,
                  "Summarize the errors in this log:\n" + server_log(60),
                  "Why does this keep failing?\n" + java_trace + "\n\nIt started after the 2.3 deploy.",
                  "Group these log lines by endpoint and tell me which one is slow:\n" + server_log(70),
                  "Diagnose this crash:\n" + java_trace)
    out += simple("log_small", "L3", "a few log lines to read back",
                  "What failed here?\n" + "\n".join(server_log(12).splitlines()[3:6]),
                  "Summarize this 3-line log:\n" + "\n".join(server_log(3).splitlines()),
                  "Which status codes appear here?\n" + "\n".join(server_log(8).splitlines()[:4]),
                  "Any errors in these lines?\n" + "\n".join(server_log(5).splitlines()))

    # Multi-turn chats.
    out += [
        ("multi_turn", [user("My Flask app returns 500 on /login."), assistant("What does the log say?"),
                        user("KeyError: 'SECRET_KEY'"), assistant("Is SECRET_KEY set in the environment?"),
                        user("It was in .env but we moved to systemd. Why would that break it?")], "L3",
         "a short debugging conversation; the last question is small", {}),
        ("multi_turn", [user("hi"), assistant("Hello! How can I help?"), user("thanks, that's all")], "L3",
         "chit-chat", {}),
        ("multi_turn", [user("Write a function that slugifies titles"), assistant(fence(
            "def slugify(t):\n    return t.lower().replace(' ', '-')", "python")),
                        user("Now make it strip accents and collapse repeated dashes, with tests")], "L4",
         "follow-up asking for more code", {}),
        ("multi_turn", [user("what is CORS"), assistant("A browser rule about cross-origin requests..."),
                        user("how do I allow one origin in Express?")], "L3", "follow-up quick question", {}),
    ]
    return out


def main() -> None:
    counts: dict[str, int] = {}
    with OUT.open("w", encoding="utf-8") as out:
        for n, row in enumerate(rows(), start=1):
            kind, messages, tier, reason = row[:4]
            extra = row[4] if len(row) > 4 else {}
            index = counts.get(kind, 0)
            counts[kind] = index + 1
            prompt = {"id": f"RS-{n:03d}", "kind": kind, "split": "tune" if index % 2 == 0 else "holdout",
                      "expected_tier": tier, "reason": reason, "messages": messages, **extra}
            out.write(json.dumps(prompt, ensure_ascii=False) + "\n")
    total = sum(counts.values())
    print(f"{total} prompts in {len(counts)} kinds -> {OUT}")


if __name__ == "__main__":
    main()
